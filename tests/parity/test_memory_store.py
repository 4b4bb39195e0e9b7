"""``memory://`` datasets behave as in pylance 14.0.2: every open of the URI is a new, empty store,
and a dataset handle keeps its own store for every later write, checkout and maintenance step."""

from __future__ import annotations

import uuid
from typing import Any

import lance
import lance.fragment
import pyarrow as pa
import pytest

import lance_format
import lance_format.fragment

T = pa.table({"a": pa.array(range(300), pa.int64())})
LIBS = pytest.mark.parametrize("lib", [lance, lance_format], ids=["pylance", "ours"])


def _uri() -> str:
    return f"memory://m-{uuid.uuid4().hex[:8]}/t.lance"


@LIBS
def test_reopening_a_memory_uri_finds_no_dataset(lib: Any) -> None:
    uri = _uri()
    lib.write_dataset(T, uri)
    with pytest.raises(ValueError):
        lib.dataset(uri)


@LIBS
def test_writing_the_uri_again_starts_a_new_dataset(lib: Any) -> None:
    uri = _uri()
    first = lib.write_dataset(T, uri)
    again = lib.write_dataset(T, uri, mode="create")  # no "already exists": a new, empty store
    appended = lib.write_dataset(T, uri, mode="append")  # an append to nothing creates
    assert (again.version, appended.version, appended.count_rows()) == (1, 1, 300)
    assert (first.version, first.count_rows()) == (1, 300)


def _history(lib: Any) -> list[Any]:
    """A run of verbs through one handle; what each step sees."""
    ds = lib.write_dataset(T, _uri(), max_rows_per_file=100)
    seen: list[Any] = [ds.count_rows()]
    ds.delete("a < 10")
    ds.insert(T.slice(0, 5))
    seen += [ds.version, ds.count_rows(), ds.checkout_version(1).count_rows(), len(ds.versions())]
    ds.add_columns({"b": "a * 2"})
    ds.create_scalar_index("a", "BTREE")
    ds.optimize.compact_files()
    latest = ds.checkout_version(ds.latest_version)
    seen += [latest.version, latest.schema.names, [i["name"] if isinstance(i, dict) else i.name
                                                   for i in latest.list_indices()]]
    seen.append(latest.to_table(filter="a = 7").num_rows)
    more = lib.write_dataset(T.append_column("b", pa.array(range(300), pa.int64())), latest, mode="append")
    seen += [more.version, more.count_rows()]
    frags = lib.fragment.write_fragments(T.append_column("b", pa.array(range(300), pa.int64())), more)
    done = lib.LanceDataset.commit(more, lib.LanceOperation.Append(frags), read_version=more.version)
    seen += [done.version, done.count_rows(), done.to_table(columns=["a"]).num_rows]
    return seen


def test_a_handle_keeps_its_store_through_writes_and_maintenance() -> None:
    ours, theirs = _history(lance_format), _history(lance)
    assert ours == theirs
    assert theirs[-1] == 895


@LIBS
def test_two_handles_on_one_uri_do_not_see_each_other(lib: Any) -> None:
    uri = _uri()
    a = lib.write_dataset(T, uri)
    b = lib.write_dataset(T.slice(0, 10), uri)
    a.delete("a >= 100")
    assert (a.version, a.count_rows(), b.version, b.count_rows()) == (2, 100, 1, 10)


@LIBS
def test_file_reader_on_a_memory_uri_does_not_see_a_writers_file(lib: Any) -> None:
    uri = f"memory://f-{uuid.uuid4().hex[:8]}/f.lance"
    writer = lib.file.LanceFileWriter(uri, T.schema)
    writer.write_batch(T)
    writer.close()
    with pytest.raises((ValueError, OSError)):  # pylance: ValueError, ours: FileNotFoundError
        lib.file.LanceFileReader(uri).read_all()
