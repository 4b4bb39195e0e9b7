"""The execute step of compaction: rewrite one task's fragments into new data files.

Nothing is committed here. Output sizing follows pylance's ``rewrite_files``
(``rust/lance/src/dataset/optimize.rs``): ``k = max(1, live_rows // target)`` output
fragments, the live rows spread evenly (the first ``live_rows % k`` get one more), in
the dataset's storage version. With stable row ids the old row-id sequences (deleted
rows masked out) are re-cut to the new fragment sizes, and so are the created/updated
version sequences, so row ids survive compaction unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.errors import InvalidInputError, UnsupportedVersionError
from lance_format.file.v2_1.joint import read_whole_files
from lance_format.maintenance.compaction_models import CompactionMetrics, RewriteResult
from lance_format.scanner import LanceScanner
from lance_format.storage import open_store
from lance_format.table.discard import discard_fragment_files
from lance_format.table.models import FragmentMetadata
from lance_format.table.read import DEFAULT_BATCH_SIZE, FragmentScan, ReadContext
from lance_format.table.rowids import decode_row_ids, decode_versions, encode_row_ids, encode_versions
from lance_format.table.scan import ScanOptions
from lance_format.table.versions import load_manifest
from lance_format.table.writing import DEFAULT_MAX_BYTES_PER_FILE, write_fragment_files

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset
    from lance_format.maintenance.compaction import CompactionTask
    from lance_format.storage import ObjectStore


def _context_at(task: CompactionTask, ds: LanceDataset | None) -> ReadContext:
    """A read context on the task's read version: the handle's own when it is there already
    (its cached deletion vectors serve the scan), else one opened from the task."""
    if ds is not None and ds.version == task.read_version:
        return ds._ctx
    store = ds._store if ds is not None else open_store(task.uri, task.storage_options)
    options = dict(task.storage_options) if task.storage_options is not None else None
    return ReadContext(store, load_manifest(store, task.read_version), options)


def _check_sources(task: CompactionTask, ctx: ReadContext) -> None:
    # A task must describe fragments exactly as its read version holds them; anything
    # else means it was planned on another dataset (or edited), and rewriting it would
    # commit rows that are not there.
    for frag in task.fragments:
        have = ctx.manifest.fragment(frag.id)
        if have is None or have.files != frag.files or have.deletion_file != frag.deletion_file \
                or have.physical_rows != frag.physical_rows:
            raise InvalidInputError(f"{task.uri}: compaction task for fragments {list(task.fragment_ids)} does "
                                    f"not match version {task.read_version} (fragment {frag.id} differs); "
                                    "plan again on the current version")


def output_row_counts(live_rows: int, target: int) -> list[int]:
    """Rows of each output fragment: pylance's even split into ``max(1, live // target)`` parts."""
    if live_rows <= 0:
        return []
    k = max(1, live_rows // target)
    base, extra = divmod(live_rows, k)
    return [base + (1 if i < extra else 0) for i in range(k)]


def _take(it: Iterator[pa.RecordBatch], pending: list[pa.RecordBatch], n: int) -> Iterator[pa.RecordBatch]:
    """Yield exactly ``n`` rows from ``pending`` + ``it`` (a sliced remainder goes back to ``pending``)."""
    while n > 0:
        batch = pending.pop() if pending else next(it, None)
        if batch is None:
            return
        if batch.num_rows > n:
            pending.append(batch.slice(n))
            batch = batch.slice(0, n)
        n -= batch.num_rows
        if batch.num_rows:
            yield batch


#: Fragments of up to this many rows are read together with their neighbours (``_joint_batches``).
JOINT_MAX_ROWS = 1 << 17
#: Most rows read together, and about the most bytes of data files (the decoded batch is a few
#: times that): more rows per group means fewer decode steps per row, and more memory.
JOINT_GROUP_ROWS = 1 << 18
JOINT_GROUP_BYTES = 32 << 20


def _source_batches(ctx: ReadContext, task: CompactionTask, deletions: Sequence[npt.NDArray[np.uint32]],
                    batch_size: int) -> Iterator[pa.RecordBatch]:
    """The live rows of the task's fragments, in order.

    On a local disk, runs of small fragments are read together (``_joint_batches``); the rest,
    and every fragment elsewhere (where the scanner overlaps the requests of several fragments),
    go through the scanner.
    """
    names = list(ctx.arrow_schema.names)
    frags = list(task.fragments)

    def scanned(part: list[FragmentMetadata]) -> Iterator[pa.RecordBatch]:
        opts = ScanOptions(names, batch_size=batch_size, fragments=part)
        return iter(LanceScanner(ctx, opts).to_batches())

    if not ctx.low_latency:
        yield from scanned(frags)
        return
    group: list[int] = []

    def flush() -> Iterator[pa.RecordBatch]:
        part = [frags[k] for k in group]
        joint = _joint_batches(ctx, part, [deletions[k] for k in group], names)
        group.clear()
        return iter(joint) if joint is not None else scanned(part)

    def full(frag: FragmentMetadata) -> bool:
        part = [frags[k] for k in group] + [frag]
        return sum(f.physical_rows for f in part) > JOINT_GROUP_ROWS or \
            sum(df.file_size_bytes or 0 for f in part for df in f.files) > JOINT_GROUP_BYTES

    for i, frag in enumerate(frags):
        small = frag.physical_rows <= JOINT_MAX_ROWS
        if group and (not small or full(frag)):
            yield from flush()
        if small:
            group.append(i)
        else:
            yield from scanned([frag])
    if group:
        yield from flush()


def _joint_batches(ctx: ReadContext, frags: list[FragmentMetadata], deletions: list[npt.NDArray[np.uint32]],
                   names: list[str]) -> list[pa.RecordBatch] | None:
    """The live rows of ``frags`` (small fragments of 2.1 / 2.2 files) as one batch, each column
    decoded for all their files at once (``file.v2_1.joint``: a small page costs about as much
    Python as a large one). None when a fragment does not qualify (several data files, blob or
    extension columns, other file versions): the caller scans them instead.
    """
    if len(frags) < 2:
        return None
    scans = [FragmentScan(ctx, f, names) for f in frags]
    decoders = [s.whole_file_decoder() for s in scans]
    if any(d is None for d in decoders):
        return None
    arrays = read_whole_files(decoders)
    if arrays is None:
        return None
    batch = scans[0].batch_of(arrays)
    total = sum(f.physical_rows for f in frags)
    if any(d.size for d in deletions):
        # one mask for the group from the deletion vectors, one filter
        keep = np.ones(total, dtype=bool)
        base = 0
        for frag, dels in zip(frags, deletions, strict=True):
            keep[base + dels[dels < frag.physical_rows].astype(np.int64)] = False
            base += frag.physical_rows
        mask = pa.Array.from_buffers(pa.bool_(), total, [None, pa.py_buffer(np.packbits(keep, bitorder="little"))])
        batch = batch.filter(mask)
    return [batch] if batch.num_rows else []


def _live(values: npt.NDArray[np.uint64], deleted: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint64]:
    if deleted.size == 0:
        return values
    keep = np.ones(values.size, dtype=bool)
    keep[deleted[deleted < values.size]] = False
    return values[keep]


def rechunk_stable_row_ids(store: ObjectStore, old: Sequence[FragmentMetadata],
                           deletions: Sequence[npt.NDArray[np.uint32]],
                           new: Sequence[FragmentMetadata]) -> list[FragmentMetadata]:
    """Give ``new`` the surviving row ids (and row versions) of ``old``, cut to the new sizes."""
    import dataclasses

    ids, created, updated = [], [], []
    for frag, dels in zip(old, deletions, strict=True):
        where = f"fragment {frag.id} row ids"
        if frag.row_id_meta is None:
            raise UnsupportedVersionError(f"{where}: stable row ids are enabled but the fragment has no "
                                          "inline row id sequence (external sequences are not supported)")
        ids.append(_live(decode_row_ids(frag.row_id_meta, where=where, expected_len=frag.physical_rows), dels))
        c = (decode_versions(frag.created_at_version_meta, expected_len=frag.physical_rows)
             if frag.created_at_version_meta else np.ones(frag.physical_rows, dtype=np.uint64))
        u = (decode_versions(frag.last_updated_at_version_meta, expected_len=frag.physical_rows)
             if frag.last_updated_at_version_meta else c)
        created.append(_live(c, dels))
        updated.append(_live(u, dels))
    all_ids, all_c, all_u = (np.concatenate(x) if x else np.zeros(0, np.uint64) for x in (ids, created, updated))
    out = []
    pos = 0
    for frag in new:
        end = pos + frag.physical_rows
        out.append(dataclasses.replace(
            frag, row_id_meta=encode_row_ids(all_ids[pos:end]),
            created_at_version_meta=encode_versions(all_c[pos:end]),
            last_updated_at_version_meta=encode_versions(all_u[pos:end])))
        pos = end
    if pos != all_ids.size:
        raise InvalidInputError(f"compaction wrote {pos} rows but the source fragments hold {all_ids.size}")
    return out


def rewrite_task(task: CompactionTask, ds: LanceDataset | None) -> RewriteResult:
    """Execute ``task`` (see :meth:`CompactionTask.execute`)."""
    opts = task.options
    ctx = _context_at(task, ds)
    _check_sources(task, ctx)
    # the read context: deletion files in other bases are found, and the scan below
    # reuses what it read
    deletions = [ctx.deleted_offsets(f) for f in task.fragments]
    store = ctx.store
    live = sum(f.physical_rows - int(d.size) for f, d in zip(task.fragments, deletions, strict=True))
    counts = output_row_counts(live, opts.target_rows_per_fragment)
    schema = ctx.arrow_schema
    batches = _source_batches(ctx, task, deletions, opts.batch_size or DEFAULT_BATCH_SIZE)
    pending: list[pa.RecordBatch] = []
    new: list[FragmentMetadata] = []
    try:
        for n in counts:
            new.extend(write_fragment_files(
                store, schema, _take(batches, pending, n), ctx.schema,
                max_rows_per_file=n, max_rows_per_group=opts.max_rows_per_group,
                max_bytes_per_file=opts.max_bytes_per_file or DEFAULT_MAX_BYTES_PER_FILE,
                data_storage_version=ctx.manifest.data_storage_version))
        written = sum(f.physical_rows for f in new)
        if written != live or next(batches, None) is not None:
            raise InvalidInputError(f"{task.uri}: compaction of fragments {list(task.fragment_ids)} read "
                                    f"{written} rows where the metadata says {live} live rows")
        if ctx.manifest.uses_stable_row_ids:
            new = rechunk_stable_row_ids(store, task.fragments, deletions, new)
    except BaseException:
        discard_fragment_files(store, new)
        raise
    metrics = CompactionMetrics(
        fragments_removed=len(task.fragments), fragments_added=len(new),
        files_removed=sum(len(f.files) + (f.deletion_file is not None) for f in task.fragments),
        files_added=sum(len(f.files) for f in new), rows_rewritten=live,
        bytes_written=sum(df.file_size_bytes or 0 for f in new for df in f.files))
    return RewriteResult(task.read_version, task.fragments, tuple(new), metrics, opts.defer_index_remap)


