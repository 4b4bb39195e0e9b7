"""Generate ``docs/pylance-compatibility.md``: every public pylance 14.0.2 name beside ours.

Run from the repository root with the test venv (pylance installed as ``lance``)::

    .venv/bin/python docs/gen_compat.py            # rewrite the page
    .venv/bin/python docs/gen_compat.py --check    # exit 1 if the committed page is stale

The script walks the module-level public names of pylance's modules (``__all__`` where a module has
one, else the classes, functions and constants it defines) and the public members of the classes
users' code calls, finds ours by the same name in the module of the same name under
``lance_format`` (``lance.dataset`` → ``lance_format.dataset``), and compares ``inspect.signature``
parameter names, kinds, positions and defaults. A name that is missing on our side gets a reason
from :data:`REASONS` (hand-kept, matched by ``fnmatch`` pattern) or "not implemented yet".
``tests/parity/test_compat_page.py`` regenerates the page in memory and fails when it differs from
the committed file, so the page cannot drift from either library.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import importlib
import inspect
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

PAGE = Path(__file__).with_name("pylance-compatibility.md")

# pylance modules whose public names are listed (``lance.lance`` is the native module behind them;
# its users' names are re-exported by these).
MODULES = [
    "lance", "lance.dataset", "lance.fragment", "lance.file", "lance.schema", "lance.query",
    "lance.indices", "lance.optimize", "lance.util", "lance.commit", "lance.progress", "lance.blob",
    "lance.debug", "lance.udf",
]

# Classes whose public methods and properties are listed one by one (``LanceOperation``'s nested
# operation classes are walked too).
CLASSES = [
    "lance.dataset.LanceDataset", "lance.dataset.LanceScanner", "lance.dataset.MergeInsertBuilder",
    "lance.dataset.LanceOperation", "lance.dataset.Transaction", "lance.dataset.DatasetOptimizer",
    "lance.dataset.Tags", "lance.dataset.Branches", "lance.fragment.LanceFragment",
    "lance.fragment.FragmentMetadata", "lance.fragment.DataFile", "lance.fragment.DeletionFile",
    "lance.file.LanceFileReader", "lance.file.LanceFileWriter", "lance.file.LanceFileMetadata",
    "lance.schema.LanceSchema",
]

# Where ours lives under another name (pylance name -> our dotted name).
ALIASES = {
    "lance.dataset.DatasetOptimizer": "lance_format.optimize.Optimize",
    "lance.dataset.Branches": "lance_format.evolution.branches.Branches",
}

# Classes users get from the library rather than construct: their constructors are not compared.
OBTAINED_NOT_CONSTRUCTED = {
    "LanceScanner", "MergeInsertBuilder", "Tags", "Branches", "DatasetOptimizer", "LanceSchema",
    "CompactionPlan", "CompactionTask", "RewriteResult", "LanceFileMetadata",
}

# Why a name is not supported, where that cannot be computed: first matching pattern wins.
REASONS: list[tuple[str, str]] = [
    # -- outside this implementation: native code, mem-WAL / LSM, DataFusion objects --------------
    ("lance.Lsm*", "the LSM / mem-WAL read path (memtables, flushed SSTables) is outside this implementation"),
    ("lance.CompactedSsTable", "the LSM / mem-WAL read path (memtables, flushed SSTables) is outside this "
                               "implementation"),
    ("lance.Shard*", "sharded mem-WAL writers (write-ahead log shards merged by a background LSM) are outside "
                     "this implementation"),
    ("lance.evaluate_sharding_spec", "sharded mem-WAL writers are outside this implementation"),
    ("lance.dataset.LanceDataset.*mem_wal*", "the mem-WAL (write-ahead log + LSM merge) is outside this "
                                             "implementation"),
    ("lance.dataset.MergeInsertBuilder.mark_sstables_as_compacted", "mem-WAL SSTables are outside this "
                                                                    "implementation"),
    ("lance.FFILanceTableProvider", "a DataFusion FFI table provider is a native (Rust) object; there is no "
                                    "DataFusion here"),
    ("lance.ExecutionPlan", "plans are described as text (explain_plan / analyze_plan); there is no DataFusion "
                            "plan object"),
    ("lance.dataset.LanceScanner.from_*", "builds a scanner around a DataFusion plan / native dataset object; "
                                          "use LanceDataset.scanner or LanceFragment.scanner"),
    ("lance.dataset.ScannerBuilder", "pylance's fluent builder over the native scanner; LanceDataset.scanner "
                                     "takes the same options as keywords"),
    ("lance.dataset.LanceScanner.scan_batches", "yields native TaggedRecordBatch objects (fragment + offset); "
                                                "use to_batches with with_row_address=True"),
    ("lance.dataset.PySearchFilter", "a native filter object of the vector search path; filters are SQL text "
                                     "or pyarrow expressions"),
    ("lance.dataset.LanceDataset.join*", "joins run in DataFusion in pylance; join the Arrow tables "
                                         "(pyarrow Table.join / join_asof)"),
    ("lance.set_logger", "logging goes through Python's logging module (logger 'lance_format')"),
    ("lance.simd_info", "no native code: there are no SIMD kernels to report"),
    ("lance.tokenize", "the tokenizer is internal to lance_format.index.inverted (tokenizer.py) with no "
                       "public entry point yet"),
    ("lance.FtsToken", "the tokenizer is internal to lance_format.index.inverted (tokenizer.py) with no "
                       "public entry point yet"),
    ("lance.bytes_read_counter", "process-wide native counters; LanceDataset.io_stats_snapshot() / "
                                 "io_stats_incremental() and scan_stats_callback report ours"),
    ("lance.iops_counter", "process-wide native counters; LanceDataset.io_stats_snapshot() / "
                           "io_stats_incremental() and scan_stats_callback report ours"),
    ("lance.io", "pylance's native I/O counter module; lance_format.io_stats holds ours"),
    # -- blob columns: 2.0/2.1 blobs (lance-encoding:blob) read and write; blob v2 is read-only ----------
    ("lance.blob.LanceBlobFile", "the native handle behind BlobFile; lance_format.BlobFile reads the bytes "
                                 "itself"),
    ("lance.blob.BlobIterator", "iterates native blob handles; iterate over take_blobs(...)"),
    ("*blob_field", "blob v2 (lance.blob.v2 struct columns with inline / packed / dedicated / external "
                    "storage) is read but not written here; write blobs as large_binary with "
                    "lance-encoding:blob metadata (2.0 / 2.1 files)"),
    ("*blob_array", "blob v2 (lance.blob.v2) writes are not implemented: reads of packed and dedicated "
                    "sidecars work, writing them needs the sidecar writers (see *BlobWriter)"),
    ("*BlobWriter", "writes blob v2 sidecar files (packed .blob files / one file per blob); ours writes 2.0 / "
                    "2.1 blob columns only"),
    ("*Blob*", "blob v2 (lance.blob.v2) logical values and descriptors for writing; reads return the "
               "descriptor struct as pylance's, but blob v2 writes are not implemented"),
    ("lance.blob.DEFAULT_BLOB_BUFFER_SIZE", "a read-buffer size of the native BlobFile; ours reads exactly the "
                                            "requested ranges"),
    ("lance.dataset.DEFAULT_BLOB_BUFFER_SIZE", "a read-buffer size of the native BlobFile; ours reads exactly "
                                               "the requested ranges"),
    ("lance.dataset.LanceDataset.read_blob*", "batch blob reads (read_blobs / read_blob_ranges) are new in "
                                              "14.x and not implemented; take_blobs gives file handles"),
    # -- vector / full-text query objects and index internals -----------------------------------------
    ("lance.util.HNSW", "vector index building lives in lance_format.index.vector (ds.create_index)"),
    ("lance.util.KMeans", "k-means lives in lance_format.index.vector.kmeans (ds.create_index trains it)"),
    ("lance.util.validate_vector_index", "checks a native vector index against brute force; recall is "
                                         "checked in tests/index instead"),
    ("lance.indices.*", "the distributed / step-by-step index builder (IndicesBuilder, IVF / PQ models, "
                        "segments) is not exposed: ds.create_index builds and commits in one call"),
    ("lance.dataset.Index*", "index build configuration objects of the distributed builder; ds.create_index "
                             "takes keywords"),
    ("lance.dataset.SupportedDistributedIndices", "distributed index builds (per-fragment segments merged "
                                                  "later) are not exposed"),
    ("lance.dataset.LanceDataset.merge_index_metadata", "distributed index builds (per-fragment segments "
                                                        "merged later) are not exposed"),
    ("lance.dataset.LanceDataset.*index_segment*", "vector index segment internals are not exposed"),
    ("lance.dataset.LanceDataset.centroids", "IVF centroids are internal to lance_format.index.vector"),
    ("lance.dataset.LanceDataset.get_ivf_model", "IVF models are internal to lance_format.index.vector"),
    ("lance.dataset.LanceDataset.prewarm_index", "index files are read on first use and kept in the "
                                                 "session's cache; there is no separate prewarm step"),
    ("lance.dataset.LanceDataset.index_statistics", "use ds.stats.index_stats(name) (same values)"),
    ("lance.query.*", "full-text queries are dicts or lance_format.search.fts_query values (MatchQuery, "
                      "PhraseQuery, BooleanQuery ... live there)"),
    ("lance.dataset.*Query*", "vector / full-text queries go through scanner(nearest=, full_text_query=); SQL "
                              "queries need DataFusion"),
    ("lance.dataset.DocumentGranularity", "a full-text index option of 14.x (document vs. passage "
                                          "granularity); ours indexes whole documents"),
    ("lance.dataset.VectorIndexReader", "vector index internals are not exposed"),
    ("lance.progress.IndexProgress", "index builds report no progress events"),
    ("lance.IndexProgress", "index builds report no progress events"),
    # -- batch_udf ---------------------------------------------------------------------------------
    ("*normalize_transform", "an internal helper of pylance's add_columns; ours takes the same transforms "
                             "directly"),
    # -- other names not implemented, and why -------------------------------------------------------
    ("lance.MergeInsertBuilder", "import it from lance_format.dataset (ds.merge_insert returns it)"),
    ("lance.dataset.LanceDataset.delta", "DatasetDelta (row-level change feed between versions) is not "
                                         "implemented: it needs row version tracking beyond stable row ids"),
    ("lance.dataset.DatasetDelta", "row-level change feed between versions, not implemented (needs row "
                                   "version tracking beyond stable row ids)"),
    ("lance.dataset.LanceDataset.deep_clone", "only shallow_clone (a new dataset referencing the same files) "
                                              "is implemented; a deep clone copies every file"),
    ("lance.dataset.LanceOperation.Clone", "the operation behind clones; shallow_clone writes it internally"),
    ("lance.dataset.LanceOperation.DataOverlay*", "data overlays (14.x: columns patched per fragment without "
                                                  "rewriting) are not implemented"),
    ("lance.fragment.FragmentMetadata.overlays", "data overlays (14.x) are not implemented"),
    ("lance.dataset.LanceOperation.DataReplacement*", "the DataReplacement operation (swap a column's data "
                                                      "files) is not implemented; it is read back from "
                                                      "pylance's transactions as an unknown operation"),
    ("lance.dataset.LanceOperation.RewrittenIndex.new_details*", "index details travel as one IndexDetails "
                                                                 "value (new_index_details)"),
    ("lance.dataset.LanceOperation.Update.updated_fragment_offsets", "per-fragment updated row offsets (14.x "
                                                                     "conflict detail) are not recorded"),
    ("lance.dataset.LanceDataset.add_bases", "adding base paths after creation is not implemented; give "
                                             "initial_bases= when the dataset is created"),
    ("lance.dataset.MergeInsertBuilder.target*bases", "merge_insert writes into the dataset root only; "
                                                      "write_dataset(target_bases=) places appends"),
    ("lance.dataset.MergeInsertBuilder.execute_uncommitted*", "merge_insert commits in execute(); an "
                                                              "uncommitted transaction is not returned"),
    ("lance.dataset.MergeInsertBuilder.*_batches", "pass a RecordBatchReader or Table to execute / "
                                                   "explain_plan"),
    ("lance.dataset.MergeInsertBuilder.analyze_plan", "merge_insert has explain_plan; running it with "
                                                      "metrics is not implemented"),
    ("lance.dataset.MergeInsertBuilder.data_storage_version", "merge_insert writes the dataset's own data "
                                                              "storage version"),
    ("lance.dataset.MergeInsertBuilder.write_mode", "14.x write modes of merge_insert (rewrite rows vs. "
                                                    "columns) are not implemented: rows are rewritten"),
    ("lance.dataset.LanceDataset.explain_cleanup_old_versions", "cleanup_old_versions(dry_run=True) lists "
                                                                "what would be removed"),
    ("*CleanupExplanation", "cleanup_old_versions(dry_run=True) lists what would be removed"),
    ("*CleanupCandidateFile", "cleanup_old_versions(dry_run=True) lists what would be removed"),
    ("*CleanupReferencedBranch", "cleanup_old_versions(dry_run=True) lists what would be removed"),
    ("lance.dataset.LanceDataset.remap_row_addrs", "row address remapping is internal to compaction "
                                                   "(lance_format.index.remap)"),
    ("lance.dataset.serialize_row_addrs", "row address serialization is internal to compaction"),
    ("lance.dataset.LanceDataset.replace_schema", "replacing the whole schema (metadata-only) is not "
                                                  "implemented; use alter_columns / update_schema_metadata"),
    ("lance.dataset.LanceDataset.truncate_table", "not implemented: delete('true') removes every row"),
    ("lance.dataset.LanceDataset.drop", "not implemented: remove the directory (a dataset has no catalog "
                                        "entry)"),
    ("lance.dataset.LanceDataset.migrate_manifest_paths_v2", "not implemented: new datasets use V2 "
                                                             "manifest paths, old ones are read as they are"),
    ("lance.dataset.LanceDataset.*storage_options*", "storage options are fixed when the dataset opens; "
                                                     "there is no storage-options provider to refresh "
                                                     "credentials"),
    ("lance.dataset.LanceDataset.new_file_session", "a native file session; use lance_format.file readers "
                                                    "and writers"),
    ("lance.fragment.LanceFragment.open_session", "a native reader session; use LanceFragment.scanner / take"),
    ("lance.fragment.FragmentSession", "a native reader session; use LanceFragment.scanner / take"),
    ("*partition_expression", "partitioned datasets (14.x partition expressions) are not implemented"),
    ("lance.dataset.LanceDataset.all_files", "not implemented: list the files with the manifest's fragments "
                                             "and indices"),
    ("lance.dataset.LanceDataset.tracked_files", "not implemented: list the files with the manifest's "
                                                 "fragments and indices"),
    ("lance.dataset.LanceDataset.filter", "pyarrow.dataset protocol method; use to_table(filter=)"),
    ("lance.dataset.LanceDataset.sort_by", "pyarrow.dataset protocol method; use to_table(order_by=)"),
    ("lance.dataset.LanceDataset.slice", "pyarrow.dataset protocol method; use to_table(offset=, limit=)"),
    ("lance.dataset.LanceDataset.fragment_ids", "use [f.fragment_id for f in ds.get_fragments()]"),
    ("lance.dataset.LanceDataset.from_pydantic_model", "pydantic schema conversion is not implemented; "
                                                       "build the pyarrow schema"),
    ("lance.dataset.model_to_dict", "pydantic schema conversion is not implemented"),
    ("lance.dataset.LanceDataset.get_version", "use checkout_version(v).version / versions()"),
    ("lance.dataset.LanceDataset.version_refs", "use versions() and tags.list()"),
    ("lance.dataset.Tags.list_ordered", "tags.list() returns every tag; sort by version"),
    ("lance.dataset.Branches.list_ordered", "branches.list() returns every branch; sort by version"),
    ("*.replace_metadata", "tag and branch metadata (14.x) are not written"),
    ("lance.dataset.AlterColumn", "a TypedDict of alter_columns' argument; plain dicts are taken"),
    ("lance.dataset.ExecuteResult", "merge_insert().execute() returns the same keys in a dict"),
    ("lance.dataset.BulkCommitResult", "commit_batch returns {'dataset', 'merged'} in a dict"),
    ("lance.dataset.Compaction", "lance_format.optimize.Compaction (plan / execute / commit)"),
    ("lance.dataset.LANCE_COMMIT_MESSAGE_KEY", "lance_format.table.transaction.COMMIT_MESSAGE_KEY"),
    ("*td_to_micros", "an internal helper of pylance (timedelta to microseconds)"),
    ("lance.util.sanitize_ts", "an internal helper of pylance (timestamp coercion)"),
    ("lance.file.stable_version", "the file format version 'stable' resolves to; lance_format.file writes "
                                  "2.0 by default and takes version="),
    ("*Bitmap", "a native RoaringBitmap wrapper for deletion vectors; deletion files are read into numpy "
                "arrays (lance_format.table.deletion)"),
    ("lance.fragment.RowIdMeta", "stable row-id sequences are decoded internally (lance_format.table.rowids); "
                                 "FragmentMetadata.row_id_meta holds the raw bytes"),
    ("lance.fragment.RowIdSequence", "stable row-id sequences are decoded internally "
                                     "(lance_format.table.rowids)"),
    ("lance.fragment.RowDatasetVersionMeta", "row version sequences are decoded internally "
                                             "(lance_format.table.rowids)"),
    ("*FragmentWriteProgress", "see lance_format.progress (write_dataset(progress=))"),
    ("lance.fragment.LanceFragment.delete_rows", "not implemented per fragment: ds.delete(predicate)"),
    ("lance.fragment.LanceFragment.physical_schema", "fragment.schema is the dataset schema its files store"),
    ("lance.fragment.LanceFragment.validate", "ds.validate() checks every fragment"),
    ("lance.fragment.FragmentMetadata.data_files", "use FragmentMetadata.files"),
    ("lance.fragment.DataFile.create", "construct DataFile(path, fields, column_indices, ...)"),
    ("lance.fragment.DataFile.field_ids", "use DataFile.fields"),
    ("lance.commit.CommitConflictError", "lance_format.errors.CommitConflictError"),
]

DEFAULT_REASON = "not implemented yet"

# How a name differs on purpose (in signature or in behaviour), appended to the computed verdict.
WHY_DIFFERENT: dict[str, str] = {
    "lance.BlobFile": "handles come from take_blobs; ours is built over a store, key and byte range, not a "
                      "native handle",
    "lance.blob.BlobFile": "handles come from take_blobs; ours is built over a store, key and byte range",
    "lance.dataset.LanceScanner.take": "pylance's raises NotImplementedError, ours NotSupportedError (a "
                                       "NotImplementedError)",
    "lance.dataset.MergeInsertBuilder.explain_plan": "the first line is pylance's; the lines below describe "
                                                     "our steps, not DataFusion operators",
    "lance.schema.LanceSchema.fields": "its value can be called: `schema.fields()` returns a list as pylance's "
                                       "does, and a field's `name()`, `id()` and `children()` work too; reading "
                                       "`schema.fields` as a tuple (our older property) still works",
    "lance.fragment.LanceFragment.create_from_file": "for a nested 2.1+ file ours lists the ids of the fields "
                                                     "that own a column, as the writers do; pylance lists every "
                                                     "field id, which its own commit then refuses",
    "lance.schema.LanceSchema.field": "a missing field raises SchemaError where pylance returns None",
    "lance.file.LanceFileReader.num_rows": "its value can be called: `reader.num_rows()` works as in pylance, and "
                                           "reading it as a number (our older property) still works",
}


@dataclasses.dataclass(frozen=True)
class Row:
    """One line of the page: a pylance name, its kind, ours and the verdict."""

    name: str
    kind: str
    ours: str
    status: str


# -- finding names ----------------------------------------------------------------------------


def _module(name: str) -> ModuleType | None:
    # ``importlib`` rather than attribute access: ``lance.dataset`` the module is shadowed by
    # ``lance.dataset`` the function.
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _defined_here(obj: Any) -> bool:
    mod = getattr(obj, "__module__", None)
    if inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj):
        # pylance's native classes report ``builtins`` / ``_lib``; its native functions report none.
        return mod is None or mod in ("builtins", "_lib") or str(mod).split(".")[0] == "lance"
    return False


def module_names(module: ModuleType) -> list[str]:
    """Public names of a pylance module, sorted: ``__all__`` or what it defines (plus constants)."""
    explicit = getattr(module, "__all__", None)
    if explicit is not None:
        return sorted(n for n in explicit if not n.startswith("_"))
    names = []
    for n, obj in vars(module).items():
        if n.startswith("_") or n == "TYPE_CHECKING":
            continue
        constant = n.isupper() and isinstance(obj, (str, int, float)) and not isinstance(obj, bool)
        if constant or _defined_here(obj):
            names.append(n)
    return sorted(names)


def _resolve(dotted: str) -> Any:
    """The object at a dotted path under a module (``lance_format.optimize.Optimize``), or None."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        mod = _module(".".join(parts[:cut]))
        if mod is None:
            continue
        obj: Any = mod
        for attr in parts[cut:]:
            obj = getattr(obj, attr, None)
            if obj is None:
                return None
        return obj
    return None


def ours_module(pylance_module: str) -> str:
    """Our module of the same name (``lance.file`` → ``lance_format.file``)."""
    return "lance_format" + pylance_module[len("lance"):]


# -- comparing signatures -----------------------------------------------------------------------


def _signature(obj: Any) -> inspect.Signature | None:
    target = obj
    if inspect.isclass(obj) and obj.__init__ is object.__init__ and obj.__new__ is object.__new__:
        return inspect.Signature([])
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    if params and params[0].name in ("self", "cls"):
        params = params[1:]
    return sig.replace(parameters=params)


def _default_text(value: Any) -> str:
    if value is inspect.Parameter.empty:
        return "required"
    if dataclasses.is_dataclass(value) or "0x" in repr(value):
        return type(value).__name__  # object addresses change per run
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def compare_signatures(theirs: inspect.Signature, ours: inspect.Signature) -> str:
    """``same``, ``same; ours adds ...`` or ``differs: ...`` for two call signatures."""
    P = inspect.Parameter
    t_params = [p for p in theirs.parameters.values() if not p.name.startswith("_")]
    o_params = list(ours.parameters.values())
    o_by_name = {p.name: p for p in o_params}
    o_varkw = any(p.kind is P.VAR_KEYWORD for p in o_params)
    o_varpos = any(p.kind is P.VAR_POSITIONAL for p in o_params)
    positional = (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)
    t_pos = [p.name for p in t_params if p.kind in positional]
    o_pos = [p.name for p in o_params if p.kind in positional]
    problems: list[str] = []
    for p in t_params:
        if p.kind is P.VAR_POSITIONAL:
            if not o_varpos:
                problems.append(f"no `*{p.name}`")
            continue
        if p.kind is P.VAR_KEYWORD:
            if not o_varkw:
                problems.append(f"no `**{p.name}`")
            continue
        o = o_by_name.get(p.name)
        if o is None:
            problems.append(f"`{p.name}` only through **kwargs" if o_varkw and p.kind is not P.POSITIONAL_ONLY
                            else f"no `{p.name}`")
            continue
        if p.kind in positional and o.kind is P.KEYWORD_ONLY:
            problems.append(f"`{p.name}` is keyword-only")
        elif p.kind in positional and o.kind in positional and t_pos.index(p.name) != o_pos.index(p.name):
            problems.append(f"`{p.name}` is positional argument {o_pos.index(p.name) + 1} "
                            f"(pylance {t_pos.index(p.name) + 1})")
        if p.kind is P.POSITIONAL_ONLY and o.kind is P.KEYWORD_ONLY:
            problems.append(f"`{p.name}` is keyword-only")
        t_def, o_def = _default_text(p.default), _default_text(o.default)
        if t_def != o_def and t_def != "required":
            problems.append(f"`{p.name}` default {o_def} (pylance {t_def})")
    t_names = {p.name for p in theirs.parameters.values()}
    extras = [p for p in o_params if p.name not in t_names and p.kind not in (P.VAR_KEYWORD, P.VAR_POSITIONAL)]
    for p in extras:
        if p.default is P.empty:
            problems.append(f"ours requires `{p.name}`")
    if problems:
        return "differs: " + "; ".join(problems)
    added = [p.name for p in extras]
    return "same" + (f"; ours adds {', '.join(f'`{n}`' for n in added)}" if added else "")


def _kind(obj: Any, static: Any) -> str:
    if isinstance(static, (property, dataclasses.Field)) or type(static).__name__ in (
            "getset_descriptor", "member_descriptor"):
        return "property"
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    return "attribute"


def compare(theirs: Any, t_static: Any, ours: Any, o_static: Any) -> str:
    """Verdict for one pylance object against ours (both present)."""
    t_kind, o_kind = _kind(theirs, t_static), _kind(ours, o_static)
    if t_kind != o_kind:
        if t_kind == "attribute" or o_kind == "attribute":
            return "same"  # a constant or field either way: nothing to call
        return f"differs: a {o_kind} in ours, a {t_kind} in pylance"
    if t_kind in ("property", "attribute"):
        return "same"
    if t_kind == "class" and theirs.__name__ in OBTAINED_NOT_CONSTRUCTED:
        return "same"  # obtained from the library (ds.scanner(), ds.tags, ...): members compared below
    t_sig, o_sig = _signature(theirs), _signature(ours)
    if t_sig is None or o_sig is None:
        return "same" if t_sig is None else "differs: our signature cannot be inspected"
    return compare_signatures(t_sig, o_sig)


# -- rows -----------------------------------------------------------------------------------------


def reason(name: str) -> str:
    """The hand-kept reason why ``name`` is not supported."""
    for pattern, why in REASONS:
        if fnmatch.fnmatchcase(name, pattern):
            return why
    return DEFAULT_REASON


def _missing(name: str, kind: str) -> Row:
    return Row(name, kind, "—", f"not supported: {reason(name)}")


def _class_members(cls: type) -> Iterator[tuple[str, Any]]:
    names = {n for n in dir(cls) if not n.startswith("_")}
    if dataclasses.is_dataclass(cls):
        names |= {f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")}
    for n in sorted(names):
        yield n, inspect.getattr_static(cls, n, None)


def _member(cls: Any, name: str) -> tuple[bool, Any, Any]:
    """(found, value, static value) of a class member, dataclass fields and instance slots included."""
    if cls is None:
        return False, None, None
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if f.name == name:
                return True, getattr(cls, name, None), f
    static = inspect.getattr_static(cls, name, inspect.Parameter.empty)
    if static is inspect.Parameter.empty:
        return False, None, None
    return True, getattr(cls, name, static), static


def class_rows(t_name: str, theirs: type, o_name: str | None, ours: Any) -> list[Row]:
    """One row per public member of a pylance class (nested classes walked)."""
    rows = []
    for n, t_static in _class_members(theirs):
        value = getattr(theirs, n, t_static)
        full = f"{t_name}.{n}"
        found, o_value, o_static = _member(ours, n)
        if not found:
            rows.append(_missing(full, _kind(value, t_static)))
            continue
        verdict = compare(value, t_static, o_value, o_static)
        if full in WHY_DIFFERENT:
            verdict = f"{verdict} ({WHY_DIFFERENT[full]})"
        rows.append(Row(full, _kind(value, t_static), f"{o_name}.{n}", verdict))
    return rows


def module_rows(t_module: str) -> list[Row]:
    """One row per public name of a pylance module."""
    theirs = _module(t_module)
    assert theirs is not None, t_module
    o_module = ours_module(t_module)
    ours = _module(o_module)
    rows = []
    for n in module_names(theirs):
        value = getattr(theirs, n)
        full = f"{t_module}.{n}"
        target = ALIASES.get(full)
        if target is not None:
            rows.append(Row(full, _kind(value, value), target, compare(value, value, _resolve(target),
                                                                       _resolve(target))))
            continue
        if ours is not None and hasattr(ours, n):
            o_value = getattr(ours, n)
            rows.append(Row(full, _kind(value, value), f"{o_module}.{n}", compare(value, value, o_value, o_value)))
            continue
        root = _module("lance_format")
        if root is not None and hasattr(root, n) and t_module != "lance":
            rows.append(Row(full, _kind(value, value), f"lance_format.{n}",
                            f"differs: import it from lance_format, not {o_module}"))
            continue
        rows.append(_missing(full, _kind(value, value)))
    return rows


def _ours_for_class(t_name: str) -> tuple[str, Any]:
    if t_name in ALIASES:
        return ALIASES[t_name], _resolve(ALIASES[t_name])
    module, _, cls = t_name.rpartition(".")
    o_name = f"{ours_module(module)}.{cls}"
    found = _resolve(o_name)
    if found is None and _resolve(f"lance_format.{cls}") is not None:
        return f"lance_format.{cls}", _resolve(f"lance_format.{cls}")
    return o_name, found


def all_sections() -> list[tuple[str, list[Row]]]:
    """(heading, rows) for every module and class, in page order."""
    sections = [(f"Module `{m}`", module_rows(m)) for m in MODULES]
    pending = list(CLASSES)
    while pending:
        t_name = pending.pop(0)
        theirs = _resolve(t_name)
        assert inspect.isclass(theirs), t_name
        o_name, ours = _ours_for_class(t_name)
        heading = f"Class `{t_name}` (ours: `{o_name}`)" if ours is not None else f"Class `{t_name}` (not in ours)"
        sections.append((heading, class_rows(t_name, theirs, o_name, ours)))
        nested = [f"{t_name}.{n}" for n, _ in _class_members(theirs)
                  if inspect.isclass(getattr(theirs, n, None))
                  and getattr(theirs, n).__qualname__.startswith(theirs.__qualname__ + ".")]
        idx = 0
        for n in nested:
            if n not in pending and n not in CLASSES and _ours_for_nested(n, o_name) is not None:
                pending.insert(idx, n)
                idx += 1
    return sections


def _ours_for_nested(t_name: str, o_parent: str) -> Any:
    return _resolve(f"{o_parent}.{t_name.rpartition('.')[2]}")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(title_version: str, sections: list[tuple[str, list[Row]]]) -> str:
    """The Markdown page."""
    rows = [r for _, rs in sections for r in rs]
    counts = {k: sum(1 for r in rows if r.status.startswith(k)) for k in ("same", "differs", "not supported")}
    out = [
        "# pylance compatibility",
        "",
        f"Every public name of pylance {title_version} beside `lance_format`'s, generated by `docs/gen_compat.py`",
        "(do not edit by hand: run `.venv/bin/python docs/gen_compat.py`). Signatures are compared by parameter",
        "names, kinds, positions and defaults; \"ours adds\" lists our extra optional parameters, which pylance",
        "code never passes. Behaviour is checked by the tests under `tests/parity/`.",
        "",
        f"**{len(rows)} names**: {counts['same']} same, {counts['differs']} differ, "
        f"{counts['not supported']} not supported.",
        "",
    ]
    for heading, section in sections:
        out += [f"## {heading}", "", "| pylance | kind | ours | status |", "|---|---|---|---|"]
        for r in section:
            ours = f"`{r.ours}`" if r.ours != "—" else r.ours
            out.append(f"| `{r.name}` | {r.kind} | {ours} | {_cell(r.status)} |")
        out.append("")
    return "\n".join(out)


def generate() -> str:
    """The page as it should be committed (needs pylance importable as ``lance``)."""
    lance = importlib.import_module("lance")
    return render(lance.__version__, all_sections())


def main(argv: list[str], write: Callable[[str], Any] = PAGE.write_text) -> int:
    """Write the page, or with ``--check`` report whether the committed one is current."""
    text = generate()
    if "--check" in argv:
        current = PAGE.read_text() if PAGE.exists() else ""
        if current != text:
            print(f"{PAGE} is stale: run .venv/bin/python docs/gen_compat.py", file=sys.stderr)
            return 1
        return 0
    write(text)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
