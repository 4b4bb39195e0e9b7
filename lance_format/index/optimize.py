"""``optimize_indices``: bring every BTREE / BITMAP index up to date in one commit.

An index falls behind in two ways: fragments appended after it was built are not in its
fragment bitmap (scans read them unindexed), and a compaction that deferred remapping
left row addresses that readers translate through ``__lance_frag_reuse`` on every
query. This rebuilds each such index over all fragments of the current version (one new
segment replaces its old segments, as pylance's default ``num_indices_to_merge`` folds
deltas into one), then drops the fragment-reuse entry once no index still needs it.
Everything lands in one ``CreateIndex`` transaction; files of a failed commit are removed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from lance_format.index import frag_reuse
from lance_format.index._compat import manifest_indices, to_operation
from lance_format.index.build import commit_files, execute_index_task, plan_index_build
from lance_format.index.models import FRAG_REUSE_INDEX, is_system, kind_of
from lance_format.index.remap import remappable
from lance_format.index.store import IndexDir
from lance_format.table.index_metadata import IndexMetadata
from lance_format.table.transaction import Transaction

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset
    from lance_format.maintenance.runner import Runner

_TYPE_OF = {"BTreeIndexDetails": "BTREE", "BitmapIndexDetails": "BITMAP", "LabelListIndexDetails": "LABEL_LIST"}


def _behind(segs: list[IndexMetadata], live: frozenset[int], reuse_versions: list[int]) -> bool:
    covered = frozenset().union(*(s.fragment_bitmap or frozenset() for s in segs))
    # A reuse version equal to the index's read version postdates it (see ``frag_reuse``).
    pending = any(v >= s.dataset_version for s in segs for v in reuse_versions)
    return bool(live - covered) or pending or len(segs) > 1


def optimize_indices(ds: LanceDataset, *, index_names: list[str] | None = None,
                     runner: Runner | None = None,
                     transaction_properties: Mapping[str, str] | None = None) -> LanceDataset:
    """Rebuild out-of-date BTREE / BITMAP indices and drop a no-longer-needed ``__lance_frag_reuse``.

    Args:
        ds: The dataset (moves to the new version if anything was committed).
        index_names: Only these indices (all by default).
        runner: Runs the read tasks (local threads by default).
        transaction_properties: Stored with the ``CreateIndex`` commit (e.g. the lineage of the
            scheduler that ran it; pylance's ``optimize_indices`` takes none).

    Returns:
        ``ds``.
    """
    from lance_format.dataset import LanceDataset
    from lance_format.maintenance.runner import LocalRunner
    from lance_format.table.transaction import LanceOperation

    metas = manifest_indices(ds.manifest)
    reuse = [m for m in metas if m.name == FRAG_REUSE_INDEX]
    reuse_versions = [v.dataset_version for v in frag_reuse.decode_details(reuse[-1], ds._store)] if reuse else []
    live = frozenset(f.id for f in ds.manifest.fragments)
    by_name: dict[str, list[IndexMetadata]] = {}
    for m in metas:
        if not is_system(m) and (index_names is None or m.name in index_names):
            by_name.setdefault(m.name, []).append(m)
    new: list[IndexMetadata] = []
    removed: list[IndexMetadata] = []
    outs: list[IndexDir] = []
    run = runner or LocalRunner()
    try:
        for name, segs in by_name.items():
            if not all(remappable(s) for s in segs) or len(segs[0].fields) != 1:
                continue  # not ours to rebuild (e.g. pylance's INVERTED): left as it is
            if not _behind(segs, live, reuse_versions):
                continue
            column = next((f.name for f in ds.lance_schema.fields if f.id == segs[0].fields[0]), None)
            if column is None:
                continue
            plan = plan_index_build(ds, column, _TYPE_OF[kind_of(segs[0])], name=name, replace=True)
            meta, out = commit_files(plan, run.map(execute_index_task, list(plan.tasks)))
            outs.append(out)
            new.append(meta)
            removed.extend(segs)
        remaining = [m for m in metas if not is_system(m) and m not in removed]
        if reuse and all(m.dataset_version > max(reuse_versions, default=-1) for m in remaining
                         if m.name != FRAG_REUSE_INDEX):
            removed.extend(reuse)  # every index has caught up: the reuse entry has no reader left
        if not new and not removed:
            return ds
        op = LanceOperation.CreateIndex([to_operation(m) for m in new], [to_operation(m) for m in removed])
        txn = Transaction(ds.version, op, transaction_properties=dict(transaction_properties or {}))
        committed = LanceDataset.commit(ds, txn)
    except BaseException:
        for out in outs:
            out.discard()
        raise
    ds._set_manifest(committed.manifest)
    return ds
