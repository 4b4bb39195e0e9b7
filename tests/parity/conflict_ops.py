"""Builds the same commit operation with pylance 14.0.2 or with lance_format, for the conflict matrix.

Each builder gets the library module, the dataset URI and the dataset opened at version 1 (three
fragments of ten rows: ``x`` 0..29, ``y`` = ``x * 10``) and returns an operation whose
data files (if any) are already written, ready for ``LanceDataset.commit(uri, op, read_version=1)``.
Names ending in ``@0`` / ``@1`` say which fragment the operation touches.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa

import lance_format

ROWS_PER_FRAGMENT = 10
FRAGMENTS = 3


def base_table() -> pa.Table:
    """The rows of version 1."""
    x = pa.array(range(ROWS_PER_FRAGMENT * FRAGMENTS), pa.int64())
    return pa.table({"x": x, "y": pa.compute.multiply(x, 10)})


def is_pylance(lib: Any) -> bool:
    """Whether ``lib`` is pylance (``lance``) rather than lance_format."""
    return lib is not lance_format


def _write_fragments(lib: Any, table: pa.Table, uri: str) -> list[Any]:
    writer = sys.modules["lance.fragment"].write_fragments if is_pylance(lib) else lib.write_fragments
    return list(writer(table, uri))


def _frag(ds: Any, fid: int) -> Any:
    return ds.get_fragment(fid)


def _rows_of(fid: int) -> pa.Table:
    return base_table().slice(fid * ROWS_PER_FRAGMENT, ROWS_PER_FRAGMENT)


def append(lib: Any, uri: str, ds: Any) -> Any:
    return lib.LanceOperation.Append(_write_fragments(lib, base_table().slice(0, 5), uri))


def delete_at(fid: int) -> Callable[[Any, str, Any], Any]:
    def build(lib: Any, uri: str, ds: Any) -> Any:
        lo = fid * ROWS_PER_FRAGMENT
        pred = f"x < {lo + 3}"
        meta = _frag(ds, fid).delete(pred)
        return lib.LanceOperation.Delete([meta], [], pred)
    return build


def delete_whole(fid: int) -> Callable[[Any, str, Any], Any]:
    def build(lib: Any, uri: str, ds: Any) -> Any:
        return lib.LanceOperation.Delete([], [fid], f"x >= {fid * ROWS_PER_FRAGMENT}")
    return build


def update_at(fid: int) -> Callable[[Any, str, Any], Any]:
    """An Update that rewrites fragment ``fid``'s rows into a new fragment (pylance's default mode)."""
    def build(lib: Any, uri: str, ds: Any) -> Any:
        rows = _rows_of(fid)
        rows = rows.set_column(1, "y", pa.compute.add(rows["y"], 1))
        new = _write_fragments(lib, rows, uri)
        return lib.LanceOperation.Update(removed_fragment_ids=[fid], new_fragments=new)
    return build


def overwrite(lib: Any, uri: str, ds: Any) -> Any:
    t = base_table().slice(0, 7)
    return lib.LanceOperation.Overwrite(t.schema, _write_fragments(lib, t, uri))


def rewrite_at(fid: int) -> Callable[[Any, str, Any], Any]:
    def build(lib: Any, uri: str, ds: Any) -> Any:
        new = _write_fragments(lib, _rows_of(fid), uri)
        group = lib.LanceOperation.RewriteGroup([_frag(ds, fid).metadata], new)
        return lib.LanceOperation.Rewrite([group], [])
    return build


def create_index_on(fids: tuple[int, ...]) -> Callable[[Any, str, Any], Any]:
    """A CreateIndex of a (file-less) segment covering ``fids``: the check looks at metadata only."""
    def build(lib: Any, uri: str, ds: Any) -> Any:
        if is_pylance(lib):
            idx = sys.modules["lance.dataset"].Index(
                uuid=str(uuid.uuid4()), name="x_idx", fields=[0], dataset_version=1,
                fragment_ids=set(fids), index_version=0)
        else:
            idx = lib.Index(uuid=str(uuid.uuid4()), name="x_idx", fields=(0,), dataset_version=1,
                            fragment_bitmap=frozenset(fids))
        return lib.LanceOperation.CreateIndex([idx], [])
    return build


def merge(lib: Any, uri: str, ds: Any) -> Any:
    """A Merge keeping every fragment and the schema (what add_columns commits, minus the new files)."""
    frags = [f.metadata for f in ds.get_fragments()]
    return lib.LanceOperation.Merge(frags, ds.schema)


def project(lib: Any, uri: str, ds: Any) -> Any:
    """A Project dropping ``y``."""
    if is_pylance(lib):
        schema = sys.modules["lance.dataset"].LanceSchema.from_pyarrow(pa.schema([ds.schema.field("x")]))
    else:
        schema = pa.schema([ds.schema.field("x")])
    return lib.LanceOperation.Project(schema)


def restore(lib: Any, uri: str, ds: Any) -> Any:
    return lib.LanceOperation.Restore(1)


OPERATIONS: dict[str, Callable[[Any, str, Any], Any]] = {
    "append": append,
    "delete@0": delete_at(0),
    "delete@1": delete_at(1),
    "delete_fragment@0": delete_whole(0),
    "update@0": update_at(0),
    "update@1": update_at(1),
    "overwrite": overwrite,
    "rewrite@0": rewrite_at(0),
    "rewrite@1": rewrite_at(1),
    "create_index@0": create_index_on((0,)),
    "create_index@1,2": create_index_on((1, 2)),
    "merge": merge,
    "project": project,
    "restore": restore,
}


def create_index_named(name: str, fids: tuple[int, ...]) -> Callable[[Any, str, Any], Any]:
    """A CreateIndex of a file-less segment named ``name`` covering ``fids``."""
    def build(lib: Any, uri: str, ds: Any) -> Any:
        if is_pylance(lib):
            idx = sys.modules["lance.dataset"].Index(
                uuid=str(uuid.uuid4()), name=name, fields=[0], dataset_version=1,
                fragment_ids=set(fids), index_version=0)
        else:
            idx = lib.Index(uuid=str(uuid.uuid4()), name=name, fields=(0,), dataset_version=1,
                            fragment_bitmap=frozenset(fids))
        return lib.LanceOperation.CreateIndex([idx], [])
    return build


def update_config(lib: Any, uri: str, ds: Any) -> Any:
    """pylance only: an UpdateConfig setting one table config key."""
    L = lib.LanceOperation
    return L.UpdateConfig(config_updates=L.UpdateMap({"k": "v"}, replace=False))


def data_replacement_at(fid: int) -> Callable[[Any, str, Any], Any]:
    """pylance only: replace fragment ``fid``'s ``y`` by a new data file."""
    def build(lib: Any, uri: str, ds: Any) -> Any:
        rows = _rows_of(fid).select(["y"])
        new = _write_fragments(lib, rows, uri)[0].files[0]
        new.fields = [1]
        return lib.LanceOperation.DataReplacement([lib.LanceOperation.DataReplacementGroup(fid, new)])
    return build
