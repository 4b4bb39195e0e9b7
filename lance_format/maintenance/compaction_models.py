"""The values compaction passes between plan, execute and commit: options, results, metrics.

They live apart from :mod:`lance_format.maintenance.compaction` (planning, tasks) so that the
execute and commit steps, which produce and consume them, import them without importing the
planner that imports those steps. All are frozen, picklable and JSON-serialisable.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from lance_format.errors import InvalidInputError
from lance_format.table.codec.fragments import fragment_bytes, fragment_from_wire
from lance_format.table.models import FragmentMetadata


@dataclass(frozen=True)
class CompactionOptions:
    """Options of a compaction, named and defaulted as pylance's ``CompactionOptions``.

    Attributes:
        target_rows_per_fragment: Fragments with fewer physical rows are candidates, and
            output fragments hold about this many rows.
        max_rows_per_group: Rows handed to the file writer at a time.
        max_bytes_per_file: Cap on an output file's size (``None`` = the writer default).
        materialize_deletions: Rewrite fragments whose deleted share is over the threshold.
        materialize_deletions_threshold: Deleted share that triggers a rewrite (>= 1.0
            turns ``materialize_deletions`` off).
        num_threads: Local threads for ``compact_files`` (``None`` = one per core).
        batch_size: Rows per read batch (``None`` = the scanner default).
        defer_index_remap: Record a fragment-reuse index instead of rewriting indices.
        max_source_fragments: Stop adding tasks once this many source fragments are planned.
        max_source_rows: Stop adding tasks once this many live source rows are planned.
        excluded_fragment_ids: Fragments never compacted (they also split bins).
    """

    target_rows_per_fragment: int = 1_048_576
    max_rows_per_group: int = 1024
    max_bytes_per_file: int | None = None
    materialize_deletions: bool = True
    materialize_deletions_threshold: float = 0.1
    num_threads: int | None = None
    batch_size: int | None = None
    defer_index_remap: bool = False
    max_source_fragments: int | None = None
    max_source_rows: int | None = None
    excluded_fragment_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "excluded_fragment_ids", tuple(int(i) for i in self.excluded_fragment_ids))
        for name in ("target_rows_per_fragment", "max_rows_per_group"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise InvalidInputError(f"CompactionOptions.{name} must be a positive integer, got {value!r}")
        for name in ("max_bytes_per_file", "num_threads", "batch_size", "max_source_fragments",
                     "max_source_rows"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
                raise InvalidInputError(f"CompactionOptions.{name} must be a positive integer or None, "
                                        f"got {value!r}")

    @property
    def materializes_deletions(self) -> bool:
        """Whether deletions are materialized (a threshold of 1.0 or more turns it off, as in pylance)."""
        return self.materialize_deletions and self.materialize_deletions_threshold < 1.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the options."""
        out = asdict(self)
        out["excluded_fragment_ids"] = list(self.excluded_fragment_ids)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CompactionOptions:
        """Inverse of :meth:`to_dict`; unknown keys (e.g. pylance-only options) are ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known and v is not None})

    @classmethod
    def coerce(cls, options: CompactionOptions | Mapping[str, Any] | None) -> CompactionOptions:
        """Accept options as this class, a pylance-style dict, or ``None`` (defaults)."""
        if options is None:
            return cls()
        if isinstance(options, CompactionOptions):
            return options
        if isinstance(options, Mapping):
            unknown = set(options) - {f.name for f in fields(cls)}
            if unknown:
                raise InvalidInputError(f"unknown compaction option(s): {sorted(unknown)}")
            # pylance's keywords take None for "default"
            return cls(**{k: v for k, v in options.items() if v is not None})
        raise InvalidInputError(f"options must be CompactionOptions or a dict, got {type(options).__name__}")


def frag_to_json(frag: FragmentMetadata) -> str:
    # Serialized DataFragment bytes, base64: lossless (row ids, version sequences, unknown fields).
    return base64.b64encode(fragment_bytes(frag)).decode("ascii")


def frag_from_json(text: str) -> FragmentMetadata:
    try:
        data = base64.b64decode(text, validate=True)
    except ValueError as exc:
        raise InvalidInputError(f"compaction JSON: a fragment is not base64: {exc}") from exc
    return fragment_from_wire(data, "compaction JSON")


@dataclass(frozen=True)
class CompactionMetrics:
    """What a compaction did (pylance's four counters plus rows and bytes written).

    Attributes:
        fragments_removed: Source fragments replaced.
        fragments_added: New fragments written.
        files_removed: Source data files plus deletion files dropped.
        files_added: New data files written.
        rows_rewritten: Live rows copied into the new fragments.
        bytes_written: Size of the new data files.
    """

    fragments_removed: int = 0
    fragments_added: int = 0
    files_removed: int = 0
    files_added: int = 0
    rows_rewritten: int = 0
    bytes_written: int = 0

    def __add__(self, other: CompactionMetrics) -> CompactionMetrics:
        return CompactionMetrics(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


@dataclass(frozen=True)
class RewriteResult:
    """The output of one executed task, to be passed to :meth:`Compaction.commit`.

    Attributes:
        read_version: Version the task read.
        original_fragments: Source fragments (as in ``read_version``).
        new_fragments: New fragments (ids unassigned until commit).
        metrics: Counters of this task.
        defer_index_remap: The task was planned with ``defer_index_remap`` (as pylance's
            result carries ``changed_row_addrs`` instead of a row-id map), so
            :meth:`Compaction.commit` defers without being told again.
    """

    read_version: int
    original_fragments: tuple[FragmentMetadata, ...]
    new_fragments: tuple[FragmentMetadata, ...]
    metrics: CompactionMetrics = field(default_factory=CompactionMetrics)
    defer_index_remap: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "original_fragments", tuple(self.original_fragments))
        object.__setattr__(self, "new_fragments", tuple(self.new_fragments))

    def to_json(self) -> str:
        """JSON text of the result."""
        return json.dumps({"read_version": self.read_version,
                           "original_fragments": [frag_to_json(f) for f in self.original_fragments],
                           "new_fragments": [frag_to_json(f) for f in self.new_fragments],
                           "metrics": asdict(self.metrics), "defer_index_remap": self.defer_index_remap})

    @classmethod
    def from_json(cls, text: str) -> RewriteResult:
        """Inverse of :meth:`to_json`."""
        obj = json.loads(text)
        return cls(int(obj["read_version"]), tuple(frag_from_json(f) for f in obj["original_fragments"]),
                   tuple(frag_from_json(f) for f in obj["new_fragments"]), CompactionMetrics(**obj["metrics"]),
                   bool(obj.get("defer_index_remap", False)))


__all__ = ["CompactionMetrics", "CompactionOptions", "RewriteResult", "frag_from_json", "frag_to_json"]
