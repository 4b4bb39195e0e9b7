"""``optimize_indices``: bring every index we maintain up to date in one commit.

An index falls behind in two ways: fragments appended after it was built are not in its
fragment bitmap (scans read them unindexed), and a compaction that deferred remapping left
row addresses that readers translate through ``__lance_frag_reuse`` on every query.

Per index, its kind (:mod:`lance_format.index.registry`) decides how it catches up:

* an *incremental* kind (vector, full text) gets a delta segment over the unindexed
  fragments built with the model of its newest segment (pylance adds delta indices the same
  way, ``rust/lance/src/index/append.rs``); ``retrain=True`` or a pending deferred remap
  rebuilds it instead;
* every other kind is rebuilt over all live fragments (one new segment replaces the old
  ones, as pylance's default ``num_indices_to_merge`` folds deltas into one).

The fragment-reuse entry is dropped once no index still needs it. Everything lands in one
``CreateIndex``; files of a failed commit are removed. Indices of kinds we cannot rebuild are
left as they are and named in :attr:`IndexOptimization.unmaintained`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lance_format.index import frag_reuse, registry
from lance_format.index._compat import manifest_indices
from lance_format.index.build import IndexChange, build_change, commit_change, plan_index_build
from lance_format.index.models import FRAG_REUSE_INDEX, is_system
from lance_format.index.store import IndexDir
from lance_format.maintenance.runner import LocalRunner, Runner
from lance_format.table.index_metadata import IndexMetadata
from lance_format.table.manifest import Manifest

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset


@dataclass(frozen=True)
class IndexOptimization:
    """What ``optimize_indices`` did.

    Attributes:
        manifest: The committed version (``None`` when nothing needed doing).
        rebuilt: Indices rebuilt over every live fragment.
        extended: Indices that gained a delta segment.
        unmaintained: Indices behind the data that we cannot rebuild (kind unknown or newer).
    """

    manifest: Manifest | None
    rebuilt: tuple[str, ...] = ()
    extended: tuple[str, ...] = ()
    unmaintained: tuple[str, ...] = ()


def _covered(segs: list[IndexMetadata]) -> frozenset[int]:
    return frozenset().union(*(s.fragment_bitmap or frozenset() for s in segs))


def _pending(segs: list[IndexMetadata], reuse_versions: list[int]) -> bool:
    # A reuse version equal to the index's read version postdates it (see ``frag_reuse``).
    return any(v >= s.dataset_version for s in segs for v in reuse_versions)


def _newest(segs: list[IndexMetadata], n: int | None) -> list[IndexMetadata]:
    """The ``n`` newest segments (none for ``None`` / 0)."""
    if not n or n <= 0:
        return []
    return sorted(segs, key=lambda s: s.dataset_version)[-n:]


def plan_optimize(ds: LanceDataset, *, index_names: list[str] | None = None, runner: Runner | None = None,
                  retrain: bool = False, num_indices_to_merge: int | None = None
                  ) -> tuple[IndexChange, IndexOptimization]:
    """Write the segments that bring the indices up to date; the change is not committed yet."""
    metas = manifest_indices(ds.manifest)
    reuse = [m for m in metas if m.name == FRAG_REUSE_INDEX]
    reuse_versions = [v.dataset_version for v in frag_reuse.decode_details(reuse[-1], ds._store)] if reuse else []
    live = frozenset(f.id for f in ds.manifest.fragments)
    by_name: dict[str, list[IndexMetadata]] = {}
    for m in metas:
        if not is_system(m) and (index_names is None or m.name in index_names):
            by_name.setdefault(m.name, []).append(m)
    change = IndexChange()
    rebuilt: list[str] = []
    extended: list[str] = []
    unmaintained: list[str] = []
    run = runner or LocalRunner()
    try:
        for name, segs in by_name.items():
            missing = live - _covered(segs)
            pending = _pending(segs, reuse_versions)
            if not (missing or pending or len(segs) > 1 or retrain):
                continue
            kinds = {registry.maintained(s) for s in segs}
            kind = kinds.pop() if len(kinds) == 1 else None
            column = next((f.name for f in ds.lance_schema.fields if f.id == segs[0].fields[0]), None) \
                if len(segs[0].fields) == 1 else None
            if kind is None or column is None:
                unmaintained.append(name)  # not ours to rebuild (e.g. a kind we only list): left as it is
                continue
            delta = kind.incremental and not retrain and not pending
            # num_indices_to_merge=N folds the newest N segments (and the new rows) into one, as
            # pylance's OptimizeOptions does (``rust/lance-index/src/optimize.rs``).
            merged = _newest(segs, num_indices_to_merge) if delta and not kind.delta_absorbs_older else []
            if delta and not missing and len(merged) < 2:
                continue  # several delta segments are how an incremental index grows
            newest = max(segs, key=lambda s: s.dataset_version)
            src = IndexDir(ds._store, newest.uuid, sizes={f.path: f.size_bytes for f in newest.files or ()})
            index_type, params = kind.rebuild_request(src, newest)
            if delta:
                frags = missing | (_covered(merged) & live)
                plan = plan_index_build(ds, column, index_type, name=name, replace=True, fragment_ids=sorted(frags),
                                        params=params, model=kind.load_model(src, newest))
                step = build_change(plan, run)
                if kind.delta_absorbs_older:  # one segment grows (pylance's INVERTED partitions)
                    new = tuple(dataclasses.replace(m, fragment_bitmap=(m.fragment_bitmap or frozenset())
                                                    | _covered(segs)) for m in step.new)
                    change += IndexChange(new, tuple(segs), step.dirs)
                else:
                    change += IndexChange(step.new, tuple(merged), step.dirs)  # older segments stay
                extended.append(name)
                continue
            plan = plan_index_build(ds, column, index_type, name=name, replace=True, params=params)
            change += build_change(plan, run)
            rebuilt.append(name)
        remaining = [m for m in metas if not is_system(m) and m not in change.removed]
        if reuse and all(m.dataset_version > max(reuse_versions, default=-1) for m in remaining):
            # every index has caught up: the reuse entry has no reader left
            change += IndexChange(removed=tuple(reuse))
    except BaseException:
        change.discard()
        raise
    return change, IndexOptimization(None, tuple(rebuilt), tuple(extended), tuple(unmaintained))


def optimize_indices(ds: LanceDataset, *, index_names: list[str] | None = None, runner: Runner | None = None,
                     transaction_properties: Mapping[str, str] | None = None, retrain: bool = False,
                     num_indices_to_merge: int | None = None) -> IndexOptimization:
    """Rebuild or extend out-of-date indices and drop a no-longer-needed ``__lance_frag_reuse``.

    Args:
        ds: The dataset (not moved; the facade moves its handle).
        index_names: Only these indices (all by default).
        runner: Runs the build tasks (local threads by default).
        transaction_properties: Stored with the ``CreateIndex`` commit (e.g. the lineage of the
            scheduler that ran it; pylance's ``optimize_indices`` takes none).
        retrain: Rebuild incremental kinds from scratch (new model) instead of adding deltas.
        num_indices_to_merge: Incremental kinds: fold the newest N segments and the new rows into
            one segment with the existing model (``None`` / 0: a new delta segment, older ones kept).

    Returns:
        What was done, with the committed manifest (``None`` when nothing was).
    """
    change, result = plan_optimize(ds, index_names=index_names, runner=runner, retrain=retrain,
                                   num_indices_to_merge=num_indices_to_merge)
    if not change:
        return result
    manifest = commit_change(ds, change, transaction_properties)
    return IndexOptimization(manifest, result.rebuilt, result.extended, result.unmaintained)
