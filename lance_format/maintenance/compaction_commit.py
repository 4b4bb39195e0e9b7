"""The commit step of compaction: reserve fragment ids, remap indices, commit one ``Rewrite``.

As pylance's ``commit_compaction`` (``rust/lance/src/dataset/optimize.rs``): the new
fragments get ids from one ``ReserveFragments`` commit (ids
``max_fragment_id + 1 - n ..= max_fragment_id`` of the manifest it produced), so the
old→new row-address map is known before the ``Rewrite`` is committed; the ``Rewrite``
is built on the oldest read version of the results, so every commit made since the
plan is conflict-checked against it: the rows a delete or update removed from a rewritten
fragment meanwhile are deleted from the new fragments too, an append is compatible and both
land, anything else (e.g. new data files in a rewritten fragment) is a conflict.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from lance_format.errors import InvalidInputError
from lance_format.index import frag_reuse
from lance_format.index.remap import RowAddressMap, remap_indices
from lance_format.maintenance import _indices
from lance_format.maintenance.compaction_models import CompactionMetrics, CompactionOptions, RewriteResult
from lance_format.table.commit import check_transaction, commit_transaction
from lance_format.table.discard import discard_fragment_files
from lance_format.table.transaction import LanceOperation, Transaction

U64 = npt.NDArray[np.uint64]

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset
    from lance_format.index.frag_reuse import ReuseVersion
    from lance_format.table.index_metadata import IndexMetadata


#: Marks a deleted row in :func:`row_address_arrays` (``RowAddressMap``'s convention).
DELETED = np.uint64(0xFFFFFFFFFFFFFFFF)


def row_address_arrays(ds: LanceDataset, results: Sequence[RewriteResult]) -> tuple[U64, U64]:
    """Old row addresses and where each went (:data:`DELETED` for a deleted row).

    pylance's ``transpose_row_addrs``: the surviving rows of the old fragments, in order,
    land in the new fragments in order. New fragment ids must be assigned already.
    """
    olds: list[U64] = []
    news: list[U64] = []
    for res in results:
        new_addrs = [(np.uint64(f.id) << np.uint64(32)) + np.arange(f.physical_rows, dtype=np.uint64)
                     for f in res.new_fragments]
        targets = np.concatenate(new_addrs) if new_addrs else np.zeros(0, np.uint64)
        pos = 0
        for frag in res.original_fragments:
            offsets = np.arange(frag.physical_rows, dtype=np.uint64)
            live = np.ones(frag.physical_rows, dtype=bool)
            dels = ds._ctx.deleted_offsets(frag)
            live[dels[dels < frag.physical_rows]] = False
            moved = np.full(frag.physical_rows, DELETED, dtype=np.uint64)
            n_live = int(live.sum())
            moved[live] = targets[pos:pos + n_live]
            pos += n_live
            olds.append((np.uint64(frag.id) << np.uint64(32)) + offsets)
            news.append(moved)
    if not olds:
        return np.zeros(0, np.uint64), np.zeros(0, np.uint64)
    return np.concatenate(olds), np.concatenate(news)


def row_address_map(ds: LanceDataset, results: Sequence[RewriteResult],
                    reuse: Sequence[ReuseVersion] = ()) -> RowAddressMap:
    """Old row address → new row address (``None``: deleted), for ``remap_indices``.

    Array-backed (no per-row Python objects). With ``reuse`` (the versions of a
    ``__lance_frag_reuse`` entry) the map also takes addresses from before those deferred
    compactions straight to where the rows are after this one, so an index that still
    holds them comes out holding current addresses.
    """
    old, new = row_address_arrays(ds, results)
    if reuse:
        old, new = _through_reuse(old, new, reuse)
    return RowAddressMap.from_arrays(old, new)


def _through_reuse(old: U64, new: U64, reuse: Sequence[ReuseVersion]) -> tuple[U64, U64]:

    r_old, r_new = frag_reuse.address_map(reuse)
    keys = np.concatenate([r_old, old])
    vals = np.concatenate([r_new, new])
    order = np.argsort(keys, kind="stable")
    k_sorted, v_sorted = keys[order], vals[order]
    # Follow chains (a row moved by several compactions); fragment ids are never reused,
    # so each step moves to a newer fragment and this ends within one step per map.
    for _ in range(len(reuse) + 1):
        if not k_sorted.size:
            break
        pos = np.minimum(np.searchsorted(k_sorted, vals), k_sorted.size - 1)
        hit = (k_sorted[pos] == vals) & (vals != DELETED)
        if not hit.any():
            break
        vals = np.where(hit, v_sorted[pos], vals)
    return keys, vals


def _reserve_ids(ds: LanceDataset, count: int, properties: Mapping[str, str]) -> list[int]:
    # The reservation carries the Rewrite's properties: it is part of the same compaction
    # (an orchestrator attributes both commits to the run that made them).
    txn = Transaction(ds.version, LanceOperation.ReserveFragments(count), transaction_properties=dict(properties))
    manifest = commit_transaction(ds._store, txn, base=ds.manifest)
    top = manifest.max_fragment_id
    assert top is not None
    return list(range(top + 1 - count, top + 1))


def _check_indices(ds: LanceDataset, results: Sequence[RewriteResult], opts: CompactionOptions
                   ) -> tuple[bool, list[_indices.IndexInfo]]:
    """Refuse rewrites an index could not follow; return (remap needed, indices to remap).

    With ``defer_index_remap`` nothing is remapped (the ``__lance_frag_reuse`` entry
    carries the moves). With stable row ids only segments holding row addresses are
    rewritten (``remap_indices`` picks them, e.g. pylance's version-1 BTree); the table
    layer moves every other index's fragment bitmap.
    """
    infos = [i for i in _indices.index_infos(ds.manifest) if not i.is_system]
    old_ids = {f.id for r in results for f in r.original_fragments}
    covered = dict(zip([i.uuid for i in infos if i.fragment_ids is not None],
                       _indices.effective_coverage(ds.manifest, ds._store), strict=True))
    touched = [i for i in infos if i.fragment_ids is None or covered[i.uuid] & old_ids]
    if not touched:
        return False, []
    stable = ds.manifest.uses_stable_row_ids
    held = _indices.unremappable_coverage(ds.manifest, stable_row_ids=stable)
    blocked = sorted(old_ids & held) if -1 not in held else sorted(old_ids)
    if blocked:
        raise InvalidInputError(f"{ds.uri}: compaction would rewrite fragments {blocked}, covered by an index "
                                "that cannot follow the rewrite; plan again (the planner holds them back)")
    if opts.defer_index_remap:
        return False, []
    remap = [i for i in touched if _indices.can_remap(i) and (not stable or _indices.stores_addresses(i, stable))]
    return bool(remap), remap


def _remap(ds: LanceDataset, assigned: Sequence[RewriteResult]) -> list[LanceOperation.RewrittenIndex]:
    """Rewrite the indices through this compaction's map (and any pending deferred ones)."""


    entry = None if ds.manifest.uses_stable_row_ids else frag_reuse.current_entry(ds.manifest.indices)
    reuse = frag_reuse.decode_details(entry, ds._store) if entry is not None else ()
    rewritten = remap_indices(ds, row_address_map(ds, assigned, reuse))
    if not reuse:
        return rewritten
    # Their stored bitmaps still name the deferred compactions' sources: the new bitmaps
    # follow the fragments they answered for (``covered_before``).
    by_uuid = {m.uuid: m for m in ds.manifest.indices}
    out = []
    for r in rewritten:
        meta = by_uuid[r.old_id]
        if meta.fragment_bitmap is not None:
            before = frag_reuse.covered_after(meta.fragment_bitmap, reuse, meta.dataset_version)
            r = dataclasses.replace(r, covered_before=before & {f.id for f in ds.manifest.fragments})
        out.append(r)
    return out


def _frag_reuse_entry(ds: LanceDataset, assigned: Sequence[RewriteResult]) -> IndexMetadata:
    """The ``__lance_frag_reuse`` entry of a deferred compaction (one group per result)."""

    groups = []
    for res in assigned:
        old, new = row_address_arrays(ds, [res])
        groups.append(frag_reuse.group_for(res.original_fragments, res.new_fragments, old[new != DELETED]))
    previous = frag_reuse.current_entry(ds.manifest.indices)
    # pylance records the version its Rewrite is applied to (after ReserveFragments).
    return frag_reuse.build_frag_reuse_entry(previous, ds.version, groups, ds._store)


def commit_compaction(ds: LanceDataset, results: Sequence[RewriteResult], opts: CompactionOptions,
                      transaction_properties: Mapping[str, str] | None = None) -> CompactionMetrics:
    """Commit ``results`` as one ``Rewrite`` (see the module docstring); ``ds`` moves to the new version."""

    results = list(results)
    if not results:
        return CompactionMetrics()
    seen: set[int] = set()
    for res in results:
        ids = {f.id for f in res.original_fragments}
        if ids & seen:
            raise InvalidInputError(f"{ds.uri}: two compaction results rewrite fragments {sorted(ids & seen)}")
        seen |= ids
    deferred = {r.defer_index_remap for r in results}
    if len(deferred) > 1:
        raise InvalidInputError(f"{ds.uri}: compaction results planned with and without defer_index_remap "
                                "cannot be committed together")
    if deferred == {True} and not opts.defer_index_remap:
        opts = dataclasses.replace(opts, defer_index_remap=True)
    latest = ds.checkout_latest()
    read_version = min(r.read_version for r in results)
    # Refuse a doomed rewrite before reserving ids or writing index files. The commit loop
    # checks again (for commits that land after this point) and carries deletes and updates
    # of rewritten fragments over to the new fragments (lance_format.table.rebase.RewriteRebase).
    check_transaction(latest._store, Transaction(read_version, LanceOperation.Rewrite(
        [LanceOperation.RewriteGroup(r.original_fragments, r.new_fragments) for r in results])),
        upto=latest.version)
    remap, _ = _check_indices(latest, results, opts)
    n_new = sum(len(r.new_fragments) for r in results)
    new_ids = iter(_reserve_ids(latest, n_new, transaction_properties or {}) if n_new else [])
    assigned = [_with_ids(r, new_ids) for r in results]
    rewritten: list[LanceOperation.RewrittenIndex] = []
    if remap:
        rewritten = _remap(latest, assigned)
    reuse = None
    if opts.defer_index_remap and not latest.manifest.uses_stable_row_ids:
        latest = latest.checkout_latest()  # the ReserveFragments commit
        reuse = _frag_reuse_entry(latest, assigned)
    groups = [LanceOperation.RewriteGroup(r.original_fragments, r.new_fragments) for r in assigned]
    txn = Transaction(read_version, LanceOperation.Rewrite(groups, rewritten, frag_reuse_index=reuse),
                      transaction_properties=dict(transaction_properties or {}))
    manifest = commit_transaction(ds._store, txn)
    ds._set_manifest(manifest)
    total = CompactionMetrics()
    for r in results:
        total = total + r.metrics
    return total


def _with_ids(res: RewriteResult, ids: Iterator[int]) -> RewriteResult:
    return dataclasses.replace(res, new_fragments=tuple(f.with_id(next(ids)) for f in res.new_fragments))


def discard_new_files(ds: LanceDataset, results: Sequence[RewriteResult]) -> None:
    """Delete the data files of uncommitted results (best effort)."""
    discard_fragment_files(ds._store, (frag for res in results for frag in res.new_fragments))
