"""Projections beyond top-level columns, as pylance's ``columns=`` accepts them.

* nested paths (``"s.x"``) come back as a flat column named by the path;
* ``{"name": "SQL expression"}`` computes columns;
* ``_rowid``, ``_rowaddr`` and the row lineage columns ``_row_created_at_version`` /
  ``_row_last_updated_at_version`` may be listed like columns (lineage is read from the
  fragments' version sequences; rows of fragments without one report version 1, as
  pylance does);
* ``strict_batch_size=True`` re-chunks the stream so every batch but the last has
  exactly ``batch_size`` rows (deletions otherwise leave short batches, as in pylance).

The scan reads the top-level columns these need; the outputs are derived batch by batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import InvalidInputError
from lance_format.evolution.sqlexpr import Compiled, evaluate, value_expression
from lance_format.scanner import ROW_ADDR, ROW_ID, LanceScanner, ReadContext, ScanOptions, referenced_columns
from lance_format.table.manifest import Manifest
from lance_format.table.rowids import decode_versions

CREATED = "_row_created_at_version"
UPDATED = "_row_last_updated_at_version"
SPECIAL = (ROW_ID, ROW_ADDR, CREATED, UPDATED)


@dataclass(frozen=True)
class Output:
    """One requested output column: ``kind`` is column, path, expr or one of :data:`SPECIAL`."""

    name: str
    kind: str
    source: Any = None
    type: pa.DataType = pa.null()


@dataclass(frozen=True)
class Plan:
    """What to scan and how to derive the requested columns."""

    read_columns: list[str]
    outputs: list[Output] | None  # None: the scan's own columns are the answer
    with_row_id: bool
    with_row_address: bool


def plan(schema: pa.Schema, columns: Sequence[str] | Mapping[str, str] | None) -> Plan:
    """Resolve ``columns`` against ``schema``.

    Raises:
        InvalidInputError: unknown columns or bad expressions.
    """
    names = list(schema.names)
    if columns is None:
        return Plan(names, None, False, False)
    if isinstance(columns, str):
        raise InvalidInputError(f"columns must be a list of names, got the string {columns!r}")
    if not isinstance(columns, Mapping):
        seen: set[object] = set()
        for c in columns:
            if not isinstance(c, str):
                raise InvalidInputError(f"column names must be strings, got {type(c).__name__} {c!r}")
            if c in seen:  # pylance: "Duplicate column name"
                raise InvalidInputError(f"column {c!r} is requested twice in {list(columns)}")
            seen.add(c)
    outputs: list[Output] = []
    if isinstance(columns, Mapping):

        for out, text in columns.items():
            if text in SPECIAL:
                outputs.append(Output(str(out), text, None, pa.uint64()))
                continue
            expr, typ = value_expression(str(text), schema)
            outputs.append(Output(str(out), "expr", expr, typ))
    else:
        for c in columns:
            if c in names:
                outputs.append(Output(c, "column", c, schema.field(c).type))
            elif c in SPECIAL:
                outputs.append(Output(c, c, None, pa.uint64()))
            elif "." in c:
                outputs.append(Output(c, "path", c.split("."), _path_type(schema, c)))
            else:
                raise InvalidInputError(f"column {c!r} is not in the dataset schema {names}")
    read: list[str] = []
    for o in outputs:
        wanted = ([o.source] if o.kind == "column" else [o.source[0]] if o.kind == "path"
                  else referenced_columns(o.source, names) if o.kind == "expr" else [])
        read += [w for w in wanted if w not in read]
    simple = all(o.kind in ("column", ROW_ID, ROW_ADDR) for o in outputs) and [
        o.name for o in outputs if o.kind == "column"] == read and all(
        o.kind == "column" for o in outputs[: len(read)])
    kinds = {o.kind for o in outputs}
    if simple and not (kinds & {ROW_ID, ROW_ADDR}):
        return Plan(read, None, False, False)
    need_addr = bool(kinds & {ROW_ADDR, CREATED, UPDATED})
    return Plan(read, outputs, ROW_ID in kinds, need_addr)


def _path_type(schema: pa.Schema, path: str) -> pa.DataType:
    parts = path.split(".")
    if parts[0] not in schema.names:
        raise InvalidInputError(f"column {path!r} is not in the dataset schema {list(schema.names)}")
    typ = schema.field(parts[0]).type
    for p in parts[1:]:
        if not pa.types.is_struct(typ) or typ.get_field_index(p) < 0:
            raise InvalidInputError(f"column {path!r}: no field {p!r} in {typ}")
        typ = typ.field(p).type
    return typ


class ProjectedScanner(LanceScanner):
    """A scanner whose batches carry derived columns (see the module docstring)."""

    def __init__(self, ctx: ReadContext, options: ScanOptions, outputs: list[Output] | None, *,
                 user_row_id: bool, user_row_address: bool, strict_batch_size: bool):
        super().__init__(ctx, options)
        self._outputs = outputs
        self._user_row_id = user_row_id
        self._user_row_address = user_row_address
        self._strict = strict_batch_size
        self._versions: dict[tuple[int, str], npt.NDArray[np.uint64]] = {}
        # The base class streams batches of ``self._schema``; the caller sees ``self._out``.
        self._out = self._schema
        if outputs is not None:
            fields = [pa.field(o.name, o.type) for o in outputs]
            if user_row_id and not any(o.name == ROW_ID for o in outputs):
                fields.append(pa.field(ROW_ID, pa.uint64()))
            if user_row_address and not any(o.name == ROW_ADDR for o in outputs):
                fields.append(pa.field(ROW_ADDR, pa.uint64()))
            self._out = pa.schema(fields, metadata=ctx.arrow_schema.metadata)

    @property
    def projected_schema(self) -> pa.Schema:
        """Schema of the batches this scanner yields."""
        return self._out

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Stream the projected result."""
        stream = super().to_batches()
        if self._outputs is not None:
            stream = (self._derive(b) for b in stream)
        if self._strict:
            stream = _rechunk(stream, max(1, self._opts.batch_size), self._out)
        return stream

    def to_table(self) -> pa.Table:
        """Materialize the result."""
        return pa.Table.from_batches(list(self.to_batches()), schema=self._out)

    def to_reader(self) -> pa.RecordBatchReader:
        """The result as a streaming ``RecordBatchReader``."""
        return pa.RecordBatchReader.from_batches(self._out, self.to_batches())

    def head(self, num_rows: int) -> pa.Table:
        """The first ``num_rows`` rows."""
        out: list[pa.RecordBatch] = []
        left = num_rows
        for b in self.to_batches():
            if left <= 0:
                break
            out.append(b.slice(0, left))
            left -= out[-1].num_rows
        return pa.Table.from_batches(out, schema=self._out)

    def _derive(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        assert self._outputs is not None
        arrays: list[pa.Array] = []
        computed = evaluate_outputs(batch, self._outputs)
        for o in self._outputs:
            if o.kind == "column":
                arrays.append(batch.column(o.source))
            elif o.kind == "path":
                arr = batch.column(o.source[0])
                for p in o.source[1:]:
                    arr = pc.struct_field(arr, p)
                arrays.append(arr)
            elif o.kind == "expr":
                arrays.append(computed[o.name])
            elif o.kind in (ROW_ID, ROW_ADDR):
                arrays.append(batch.column(o.kind))
            else:
                arrays.append(self._lineage(batch.column(ROW_ADDR).to_numpy(), o.kind))
        if self._user_row_id and not any(o.name == ROW_ID for o in self._outputs):
            arrays.append(batch.column(ROW_ID))
        if self._user_row_address and not any(o.name == ROW_ADDR for o in self._outputs):
            arrays.append(batch.column(ROW_ADDR))
        return pa.RecordBatch.from_arrays([a.cast(f.type) if not a.type.equals(f.type) else a
                                           for a, f in zip(arrays, self._out, strict=True)], schema=self._out)

    def _lineage(self, addresses: npt.NDArray[np.uint64], kind: str) -> pa.Array:
        return pa.array(row_versions(self._ctx.manifest, addresses, kind, self._versions), pa.uint64())


def row_versions(manifest: Manifest, addresses: npt.NDArray[np.uint64], kind: str = CREATED,
                 decoded: dict[tuple[int, str], npt.NDArray[np.uint64]] | None = None) -> npt.NDArray[np.uint64]:
    """The version each row at ``addresses`` was created in (:data:`CREATED`) or last updated in (:data:`UPDATED`).

    Rows of fragments without that version sequence report version 1, as pylance does. Used by
    the lineage columns of scans and by updates and merges (moved rows keep their creation version).

    Args:
        manifest: The dataset version the addresses belong to.
        addresses: Row addresses (``fragment id << 32 | offset``).
        kind: :data:`CREATED` or :data:`UPDATED`.
        decoded: Sequences decoded so far by ``(fragment id, kind)``, kept across calls (a scan's batches).
    """
    out = np.ones(addresses.size, dtype=np.uint64)
    frag_ids = (addresses >> np.uint64(32)).astype(np.int64)
    offsets = (addresses & np.uint64(0xFFFFFFFF)).astype(np.int64)
    cache = {} if decoded is None else decoded
    for fid in np.unique(frag_ids):
        key = (int(fid), kind)
        versions = cache.get(key)
        if versions is None:
            frag = manifest.fragment(int(fid))
            meta = None if frag is None else (frag.created_at_version_meta if kind == CREATED
                                              else frag.last_updated_at_version_meta)
            versions = decode_versions(meta) if meta is not None else np.empty(0, dtype=np.uint64)
            cache[key] = versions
        if versions.size:
            sel = frag_ids == fid
            out[sel] = versions[offsets[sel]]
    return out


def evaluate_outputs(data: pa.Table | pa.RecordBatch, outputs: Sequence[Output]) -> dict[str, pa.Array]:
    """The computed (``expr``) outputs over ``data``, by name: one evaluation for all of them.

    Raises:
        InvalidInputError: if an expression cannot be evaluated on this data.
    """
    exprs: Compiled = {o.name: (o.source, o.type) for o in outputs if o.kind == "expr"}
    if not exprs:
        return {}
    return evaluate(pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data, exprs)


def _rechunk(stream: Iterator[pa.RecordBatch], size: int, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    pending: list[pa.RecordBatch] = []
    rows = 0
    for batch in stream:
        pending.append(batch)
        rows += batch.num_rows
        while rows >= size:
            table = pa.Table.from_batches(pending, schema=schema)
            head = table.slice(0, size).combine_chunks()
            yield head.to_batches()[0] if head.num_rows else pa.RecordBatch.from_pylist([], schema=schema)
            rest = table.slice(size)
            pending = rest.to_batches()
            rows = rest.num_rows
    if rows:
        yield pa.Table.from_batches(pending, schema=schema).combine_chunks().to_batches()[0]
