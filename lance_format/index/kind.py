"""What an index kind is: the one interface every kind module implements.

An index kind (BTREE, BITMAP, IVF_PQ, INVERTED…) is one module under
:mod:`lance_format.index.kinds` holding one :class:`IndexKind` subclass, listed in
:mod:`lance_format.index.registry`. Everything that handles indices in general
(``create_index``, the scanner's index planning, compaction's remap, ``optimize_indices``,
``index_statistics``, the health metrics) asks the registry for the segment's kind and calls
these methods; none of them names a kind. This mirrors pylance's plugin registry
(``ScalarIndexPluginRegistry``, ``rust/lance-index/src/scalar/registry.rs``), where a kind is
found by the last ``.`` token of its details type URL.

A build runs in three steps so any :class:`~lance_format.maintenance.runner.Runner` can fan it
out (local threads, Spark executors):

1. :meth:`IndexKind.train` on the driver (a sample, e.g. k-means centroids; ``None`` for kinds
   that need no model),
2. :meth:`IndexKind.encode` per group of fragments on the runner (values and row ids in,
   a picklable chunk out),
3. :meth:`IndexKind.write` on the driver: the segment's files from every chunk.

Kinds are stateless singletons; a segment opened for queries is an :class:`IndexReader`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.errors import InvalidInputError, UnsupportedIndexTypeError
from lance_format.index.predicates import In, IndexQuery, IsNull, Range
from lance_format.index.rowset import RowDomain
from lance_format.index.store import IndexDir
from lance_format.table.index_metadata import IndexFile, IndexMetadata

if TYPE_CHECKING:
    from lance_format.index.remap import RowAddressMap

U64 = npt.NDArray[np.uint64]
Family = Literal["scalar", "vector", "text", "system"]


@dataclass(frozen=True)
class TrainingData:
    """The rows one build task read: the column's values and their row ids, in scan order."""

    values: pa.Array
    ids: U64


@dataclass(frozen=True)
class BuildContext:
    """What a kind may look at while training or encoding (picklable)."""

    column: str
    field_type: pa.DataType
    params: Mapping[str, Any]
    stable_row_ids: bool
    #: ``fragment id -> physical rows`` of the version being indexed.
    fragment_rows: Mapping[int, int]


class IndexReader(Protocol):
    """One opened segment that answers queries."""

    @property
    def path(self) -> str:
        """The file a query reads (named in errors)."""
        ...


class ValueReader(IndexReader, Protocol):
    """A segment answering the predicates of a scan filter (``=``, ranges, ``IN``, ``contains``…)."""

    def search_values(self, query: IndexQuery) -> tuple[U64, pa.Array]:
        """Sorted unique row ids matching ``query`` and the value the index holds for each.

        An inexact kind (:attr:`IndexKind.exact` false) returns candidates, with null values.
        """
        ...


def check_scalar_type(kind: str, column: str, typ: pa.DataType) -> None:
    """Refuse column types a value index (BTREE, BITMAP…) cannot order or compare.

    Raises:
        UnsupportedIndexTypeError: a list, struct, or other non-scalar column.
    """
    t = pa.types
    if t.is_list(typ) or t.is_large_list(typ):
        raise UnsupportedIndexTypeError(
            f"a {kind} index cannot be built on list column {column!r} ({typ}); use LABEL_LIST")
    ok = (t.is_integer(typ) or t.is_floating(typ) or t.is_boolean(typ) or t.is_string(typ)
          or t.is_large_string(typ) or t.is_binary(typ) or t.is_large_binary(typ) or t.is_date(typ)
          or t.is_timestamp(typ) or t.is_time(typ) or t.is_decimal(typ))
    if not ok:
        raise UnsupportedIndexTypeError(f"a {kind} index cannot be built on column {column!r} of type {typ}")


class IndexKind:
    """One index kind. Subclasses set the class attributes and override what they support.

    The defaults describe a kind we can list but neither build, query nor rewrite, so a
    kind added to the registry with only its names is reported as unmaintained, never
    silently dropped.
    """

    #: The ``index_type`` users pass to ``create_index`` (``"BTREE"``).
    name: ClassVar[str]
    #: Other accepted spellings of ``name`` (pylance accepts e.g. ``"INVERTED"`` and ``"FTS"``).
    aliases: ClassVar[tuple[str, ...]] = ()
    #: The details message name, the last token of the type URL (``"BTreeIndexDetails"``).
    details: ClassVar[str]
    #: pylance's ``type`` string in ``list_indices()`` (``"BTree"``).
    display: ClassVar[str]
    family: ClassVar[Family] = "scalar"
    #: Highest ``index_version`` we understand; newer segments are left alone, as pylance's
    #: ``retain_supported_indices`` does.
    supported_version: ClassVar[int] = 0
    #: Whether :meth:`write` / :meth:`open` / :meth:`remap` are implemented.
    buildable: ClassVar[bool] = False
    queryable: ClassVar[bool] = False
    #: Whether a query's rows are exactly the matching rows, each with the value the index holds
    #: (BTREE, BITMAP), so the scan can check fetched rows against it; else a superset
    #: (ZONEMAP, BLOOMFILTER, NGRAM) the scan's filter re-checks.
    exact: ClassVar[bool] = True
    remappable: ClassVar[bool] = False
    #: ``optimize_indices`` adds a delta segment over new fragments (with :meth:`load_model`'s
    #: model) instead of rebuilding the index.
    incremental: ClassVar[bool] = False
    #: The delta segment of an incremental kind carries the older segments' data too (INVERTED
    #: copies their partitions and adds one): it replaces them and covers their fragments.
    delta_absorbs_older: ClassVar[bool] = False
    #: Create-time keyword arguments accepted, with their defaults.
    defaults: ClassVar[Mapping[str, Any]] = {}
    #: Rows one build task reads at most (before its last fragment), below the build's own
    #: limit (``index.build.TASK_ROWS``); ``None``: that limit.
    task_rows: ClassVar[int | None] = None
    #: A build task hands the kind its scan batch by batch (:meth:`encode_batches`) instead of
    #: the whole column at once: kinds that reduce rows to small summaries (zone statistics)
    #: never hold the column, whose first writes cost more than reading it.
    streams: ClassVar[bool] = False

    @property
    def type_url(self) -> str:
        """The details type URL recorded in the manifest."""
        return f"/lance.table.{self.details}"

    # -- what a segment is -------------------------------------------------------------------
    def understands(self, meta: IndexMetadata) -> bool:
        """Whether we can read ``meta`` (its version is not newer than we know)."""
        return meta.index_version <= self.supported_version

    def answers_filters(self, meta: IndexMetadata) -> bool:
        """Whether a scan may ask segment ``meta`` its filter's predicates (value kinds: always)."""
        return self.family == "scalar"

    def index_version(self, stable_row_ids: bool) -> int:
        """The ``index_version`` pylance records for a new segment of this kind."""
        return 0

    def stores_addresses(self, meta: IndexMetadata, stable_row_ids: bool) -> bool:
        """Whether the segment's ids are row addresses (else stable row ids, which compaction keeps)."""
        return not stable_row_ids

    def display_name(self, meta: IndexMetadata) -> str:
        """pylance's ``list_indices()`` type of ``meta`` (vector kinds read it from the details)."""
        return self.display

    def rebuild_request(self, src: IndexDir, meta: IndexMetadata) -> tuple[str, dict[str, Any]]:
        """The ``index_type`` and parameters that rebuild ``meta``'s index from scratch.

        Kinds sharing one details message (the vector kinds) answer from the segment's details.
        """
        return self.name, {}

    def details_value(self, ctx: BuildContext, model: Any) -> bytes:
        """The serialized details message of a new segment (empty for most scalar kinds)."""
        return b""

    # -- build --------------------------------------------------------------------------------
    def params(self, column: str, given: Mapping[str, Any]) -> dict[str, Any]:
        """Validated create-time parameters, defaults filled in.

        Raises:
            InvalidInputError: an unknown parameter.
        """
        unknown = sorted(set(given) - set(self.defaults))
        if unknown:
            raise InvalidInputError(
                f"{self.name} index on column {column!r}: unknown parameter(s) {unknown} "
                f"(accepted: {sorted(self.defaults) or 'none'})")
        return {**self.defaults, **given}

    def check_column(self, column: str, typ: pa.DataType) -> None:
        """Raise ``UnsupportedIndexTypeError`` if this kind cannot index a column of type ``typ``."""
        raise UnsupportedIndexTypeError(f"building {self.name} indices is not supported")

    def reads_addresses(self, stable_row_ids: bool) -> bool:
        """Whether a build should read row addresses (``_rowaddr``) rather than row ids."""
        return False

    def train(self, sample: Callable[[int], TrainingData], ctx: BuildContext) -> Any:
        """A model trained on the driver before the per-fragment tasks run (``None``: none needed).

        Args:
            sample: Returns up to ``n`` rows drawn from the fragments being indexed.
            ctx: The build's column, parameters and dataset facts.
        """
        return None

    def encode(self, data: TrainingData, model: Any, ctx: BuildContext) -> Any:
        """One task's contribution to the segment (runs on the runner; result is pickled)."""
        return data

    def encode_batches(self, batches: Iterable[tuple[pa.Array, U64]], model: Any, ctx: BuildContext) -> Any:
        """:meth:`encode` of a task's rows given as ``(values, ids)`` batches in scan order (kinds with :attr:`streams`)."""
        parts = list(batches)
        values = pa.concat_arrays([v for v, _ in parts]) if parts else pa.array([], ctx.field_type)
        ids = np.concatenate([i for _, i in parts]) if parts else np.empty(0, np.uint64)
        return self.encode(TrainingData(values, ids.astype(np.uint64, copy=False)), model, ctx)

    def finish_tasks(self, chunks: Sequence[Any], model: Any, ctx: BuildContext) -> Sequence[Any]:
        """Picklable work for the runner between the :meth:`encode` tasks and :meth:`write`.

        A kind whose segment needs a second pass over regrouped rows (HNSW graphs per IVF
        partition) returns one item per group; each runs through :meth:`finish` on the runner
        and :meth:`write` gets their results instead of the chunks. Default: none (and a
        :meth:`write` must still accept plain chunks, as ``commit_index_build`` passes them).
        """
        return ()

    def finish(self, task: Any) -> Any:
        """Run one :meth:`finish_tasks` item (on the runner; the result is pickled)."""
        return task

    def write(self, out: IndexDir, chunks: Sequence[Any], model: Any, ctx: BuildContext) -> tuple[IndexFile, ...]:
        """Write the segment's files from every task's :meth:`encode` result."""
        raise UnsupportedIndexTypeError(f"building {self.name} indices is not supported")

    def load_model(self, src: IndexDir, meta: IndexMetadata) -> Any:
        """The model of an existing segment, for incremental optimize (see :attr:`incremental`)."""
        return None

    # -- query, remap, statistics --------------------------------------------------------------
    def answers(self, query: IndexQuery) -> bool:
        """Whether a segment of this kind answers ``query`` (value predicates by default)."""
        return isinstance(query, (Range, In, IsNull))

    def open(self, src: IndexDir, meta: IndexMetadata, domain: RowDomain) -> IndexReader:
        """Open a segment for queries (cached by the caller per read)."""
        raise UnsupportedIndexTypeError(f"querying {self.name} indices is not supported")

    def remap(self, src: IndexDir, out: IndexDir, meta: IndexMetadata, amap: RowAddressMap,
              fragment_rows: Mapping[int, int]) -> tuple[IndexFile, ...]:
        """Write the segment again with its row addresses moved by a compaction (``amap``)."""
        raise UnsupportedIndexTypeError(f"remapping {self.name} indices is not supported")

    def statistics(self, src: IndexDir, meta: IndexMetadata, fragment_rows: Mapping[int, int]) -> dict[str, Any]:
        """Kind-specific keys of a segment's statistics (``num_pages``, ``num_partitions``…)."""
        return {}


@dataclass(frozen=True)
class ColumnIndex:
    """One index on a column a scan may use: its name, kind and segments."""

    name: str
    kind: IndexKind
    segments: tuple[IndexMetadata, ...]


#: Column → its usable indices, exact kinds first (a column may carry a BTREE and an NGRAM).
IndexedColumns = dict[str, tuple[ColumnIndex, ...]]
