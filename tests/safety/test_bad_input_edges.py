"""Bad input at every public API edge: a LanceError naming the argument, and nothing written.

One table of calls, each run on a fresh dataset by lance_format and by pylance 14.0.2:

* a case with an ``arg`` is bad input. pylance refuses it (checked here, so the table stays
  honest); ours must raise a :class:`LanceError` subclass whose message contains ``arg``
  (never a bare ``TypeError``/``ValueError``/``OverflowError``/``ArrowInvalid``, even though
  some ``LanceError`` subclasses also derive from builtins), and leave every file and
  directory as it was;
* a case in :data:`STRICTER` is one pylance accepts but ignores, misreads or breaks on (the
  reason is given); ours refuses it as above;
* a case without ``arg`` is an edge pylance accepts (``limit=2**63-1``, a struct merge key,
  an OR chain of 20,000 terms, ``file://`` URLs with trailing control characters): ours
  accepts it too, with the same result and the same dataset afterwards.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format as lf
from lance_format.errors import LanceError

N = 10
STRUCT = pa.struct([("x", pa.int64()), ("y", pa.string())])
T = pa.table({
    "id": pa.array(range(N), pa.int64()),
    "s": pa.array([f"a{i}" for i in range(N)]),
    "f": pa.array([i / 2 for i in range(N)], pa.float64()),
    "st": pa.array([{"x": i, "y": f"y{i}"} for i in range(N)], STRUCT),
})
SRC = pa.table({"id": pa.array([1, 20], pa.int64()), "s": ["new1", "new20"], "f": pa.array([0.5, 9.5]),
                "st": pa.array([{"x": 1, "y": "n"}, {"x": 20, "y": "m"}], STRUCT)})


@dataclass(frozen=True)
class Case:
    """One call; ``target`` is what it gets besides the module: an open dataset (``"ds"``),
    the dataset's path (``"uri"``) or a path where no dataset exists yet (``"new"``)."""

    id: str
    call: Callable[[Any, Any], Any]
    arg: str  # text our error must contain; "" = pylance accepts the call
    target: str = "ds"


CASES: list[Case] = []


def add(id: str, call: Callable[[Any, Any], Any], arg: str, target: str = "ds") -> None:
    CASES.append(Case(id, call, arg, target))


def read(kind: str, **kw: Any) -> Callable[[Any, Any], Any]:
    def run(m: Any, d: Any) -> Any:
        if kind == "to_table":
            return d.to_table(**kw)
        if kind == "scanner":
            return d.scanner(**kw).to_table()
        if kind == "to_batches":
            return list(d.to_batches(**kw))
        assert kind == "count_rows"
        return d.count_rows(**kw)
    return run


def double_id(batch: pa.RecordBatch) -> pa.RecordBatch:
    return pa.record_batch([pc.multiply(batch.column(0), 2)], names=["dbl"])


def wopt(**kw: Any) -> Callable[[Any, Any], Any]:
    return lambda m, u: m.write_dataset(T, u, **kw)


def aopt(**kw: Any) -> Callable[[Any, Any], Any]:
    return lambda m, u: m.write_dataset(T, u, mode="append", **kw)


def quiet(call: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """The call, returning None (ours returns the dataset where pylance returns None)."""
    return lambda m, d: (call(m, d), None)[1]


# --- limit / offset / batch_size on every reading verb ---------------------------------------
for verb in ("to_table", "scanner", "to_batches"):
    for name, val in (("str", "5"), ("float", 5.0), ("neg", -1), ("u64", 2**64), ("i64max-plus-1", 2**63),
                      ("list", [5])):
        add(f"{verb}-limit-{name}", read(verb, limit=val), "limit")
    add(f"{verb}-limit-bool", read(verb, limit=True), "")
    for name, val in (("str", "5"), ("float", 1.0), ("neg", -1), ("u64", 2**64), ("i64max-plus-1", 2**63)):
        add(f"{verb}-offset-{name}", read(verb, offset=val), "offset")
    for name, val in (("zero", 0), ("neg", -1), ("str", "5"), ("float", 2.5), ("u64", 2**64)):
        add(f"{verb}-batch_size-{name}", read(verb, batch_size=val), "batch_size")
add("limit-numpy-int", read("to_table", limit=np.int64(3)), "")
add("limit-i64-max", read("to_table", limit=2**63 - 1), "")
add("offset-i64-max", read("to_table", offset=2**63 - 1), "")
add("limit-zero", read("to_table", limit=0), "")
add("batch_size-u32-max", read("to_table", batch_size=2**32 - 1), "")
add("batch_size-u32-max-plus-1", read("to_table", batch_size=2**32), "batch_size")
add("with_row_id-str", read("to_table", with_row_id="yes"), "with_row_id")
add("with_row_id-int", read("to_table", with_row_id=1), "with_row_id")
add("count_rows-limit-str", read("count_rows", limit="5"), "limit")
add("count_rows-offset-u64", read("count_rows", offset=2**64), "offset")
add("head-str", lambda m, d: d.head("5"), "num_rows")
add("head-neg", lambda m, d: d.head(-1), "num_rows")
add("head-u64", lambda m, d: d.head(2**64), "num_rows")
add("sample-neg", lambda m, d: d.sample(-1), "num_rows")
add("sample-too-many", lambda m, d: d.sample(N + 1), "num_rows")
add("sample-str", lambda m, d: d.sample("3"), "num_rows")

# --- columns -------------------------------------------------------------------------------
for verb in ("to_table", "scanner", "to_batches"):
    for name, val, arg in (("int", 5, "column"), ("str", "id", "column"), ("unknown", ["nope"], "nope"),
                           ("int-item", [5], "column"), ("dup", ["id", "id"], "column"),
                           ("none-item", [None], "column"), ("bytes", [b"id"], "column"),
                           ("dict-int", {"x": 5}, "column"), ("dict-bad-sql", {"x": "id  +"}, "id  +"),
                           ("dict-unknown", {"x": "nope + 1"}, "nope"), ("bad-path", ["st.nope"], "nope"),
                           ("set", {"id"}, "column")):
        add(f"{verb}-columns-{name}", read(verb, columns=val), arg)
add("count_rows-columns-int", read("count_rows", columns=5), "column")
for name, val in (("int", 5), ("str", "id"), ("unknown", ["nope"]), ("int-item", [5]), ("dup", ["id", "id"]),
                  ("dict-int", {"x": 5})):
    add(f"take-columns-{name}", (lambda v: lambda m, d: d.take([0], columns=v))(val), "column")
add("take-columns-tuple", lambda m, d: d.take([0], columns=("id",)), "")

# --- filters -------------------------------------------------------------------------------
FILTERS = (("int", 5, "filter"), ("bytes", b"id = 1", "filter"), ("list", ["id = 1"], "filter"),
           ("1e999", "id = 1e999", "1e999"), ("neg-1e999", "f > -1e999", ""),
           ("int-overflow", "id = 99999999999999999999999", "99999999999999999999999"),
           ("dangling", "id =", "filter"), ("unknown-col", "nope = 1", "nope"), ("empty", "", "filter"),
           ("blank", "   ", "filter"), ("nul", "s = 'a\x00'", ""), ("garbage", "id = = 1", "filter"),
           ("unclosed", "s = 'a", "filter"), ("not-bool", "id + 1", "filter"), ("dict", {"id": 1}, "filter"),
           ("float-col-1e999", "f = 1e999", ""), ("in-1e999", "id IN (1, 1e999)", "1e999"))
for verb in ("to_table", "scanner", "count_rows"):
    for name, val, arg in FILTERS:
        add(f"{verb}-filter-{name}", read(verb, filter=val), arg)
add("filter-or-chain-20000", read("count_rows", filter=" OR ".join(f"id = {i}" for i in range(20_000))), "")
add("filter-int-plus-1e999", read("to_table", filter="id + 1e999 > 0"), "")
add("filter-float-lt-1e999", read("to_table", filter="f < 1e999"), "")
add("filter-between-1e999", read("to_table", filter="id BETWEEN 0 AND 1e999"), "1e999")
add("filter-struct-field-1e999", read("to_table", filter="st.x = 1e999"), "1e999")
add("filter-not-in-neg-1e999", read("count_rows", filter="id NOT IN (-1e999)"), "1e999")
for name, val, arg in FILTERS[:10]:
    add(f"delete-{name}", (lambda v: lambda m, d: d.delete(v))(val), arg)
add("delete-none", lambda m, d: d.delete(None), "predicate")
add("delete-conflict_retries-str", lambda m, d: d.delete("id = 1", conflict_retries="x"), "conflict_retries")
add("delete-conflict_retries-neg", lambda m, d: d.delete("id = 1", conflict_retries=-1), "conflict_retries")
add("delete-matches-nothing", lambda m, d: d.delete("id > 100"), "")

# --- take ----------------------------------------------------------------------------------
for name, val in (("str", "x"), ("int", 5), ("none", None), ("u64", [2**64]), ("neg", [-1]),
                  ("out-of-range", [N]), ("float", [1.5]), ("float-array", np.array([1.0])),
                  ("str-items", ["1"]), ("nested", [[0]]), ("none-item", [None]), ("huge", [2**63])):
    add(f"take-indices-{name}", (lambda v: lambda m, d: d.take(v))(val), "ind")
add("take-tuple", lambda m, d: d.take((0, 1)), "")

# --- fragments, order_by, get_fragment --------------------------------------------------------
add("scanner-fragments-int", read("scanner", fragments=5), "fragments")
add("scanner-fragments-int-items", read("scanner", fragments=[5]), "fragments")
add("scanner-fragments-str", read("scanner", fragments="x"), "fragments")
add("scanner-order_by-int", read("to_table", order_by=5), "order_by")
add("scanner-order_by-unknown", read("to_table", order_by=["nope"]), "nope")
add("scanner-order_by-int-item", read("to_table", order_by=[5]), "order_by")
add("get_fragment-str", lambda m, d: d.get_fragment("x"), "fragment_id")
add("get_fragment-u64", lambda m, d: d.get_fragment(2**64), "fragment_id")
add("get_fragment-neg", lambda m, d: d.get_fragment(-1), "fragment_id")
add("fragment-limit-str", lambda m, d: d.get_fragments()[0].to_table(limit="5"), "limit")
add("fragment-offset-u64", lambda m, d: d.get_fragments()[0].to_table(offset=2**64), "offset")
add("fragment-filter-int", lambda m, d: d.get_fragments()[0].to_table(filter=5), "filter")
add("fragment-filter-1e999", lambda m, d: d.get_fragments()[0].to_table(filter="id = 1e999"), "1e999")
add("fragment-columns-int", lambda m, d: d.get_fragments()[0].to_table(columns=5), "column")
add("fragment-count-filter-unknown", lambda m, d: d.get_fragments()[0].count_rows("nope = 1"), "nope")
add("fragment-head-str", lambda m, d: d.get_fragments()[0].head("3"), "num_rows")
add("fragment-batch_size-zero", lambda m, d: list(d.get_fragments()[0].to_batches(batch_size=0)), "batch_size")
add("fragment-delete-unknown", lambda m, d: d.get_fragments()[0].delete("nope = 1"), "nope")

# --- versions --------------------------------------------------------------------------------
for name, val, arg in (("missing-tag", "nope-tag", "nope-tag"), ("float", 1.5, "version"), ("list", [1], "version"),
                       ("none", None, "version"), ("neg", -1, "version"), ("u64", 2**64, "version"),
                       ("bad-tuple", ("main",), "tuple"), ("tuple-types", (5, 1), "branch")):
    add(f"checkout_version-{name}", (lambda v: lambda m, d: d.checkout_version(v))(val), arg)
add("dataset-version-list", lambda m, u: m.dataset(u, version=[1]), "version", "uri")
add("dataset-version-bad-tag", lambda m, u: m.dataset(u, version="no such/tag"), "tag", "uri")
add("dataset-asof-garbage", lambda m, u: m.dataset(u, asof="garbage"), "asof", "uri")
add("dataset-asof-list", lambda m, u: m.dataset(u, asof=[1]), "asof", "uri")
add("dataset-asof-before-first", lambda m, u: m.dataset(u, asof=dt.datetime(1990, 1, 1)), "version", "uri")

# --- URIs and storage_options ------------------------------------------------------------------
for name, val in (("str", "x"), ("int", 5), ("list", ["a"]), ("int-value", {"timeout": 5}),
                  ("int-key", {5: "a"}), ("none-value", {"timeout": None}), ("pairs", [("a", "b")])):
    add(f"dataset-storage_options-{name}", (lambda v: lambda m, u: m.dataset(u, storage_options=v))(val),
        "storage_options", "uri")
    add(f"write-storage_options-{name}", wopt(storage_options=val), "storage_options", "new")
add("dataset-storage_options-empty", lambda m, u: m.dataset(u, storage_options={}), "", "uri")
add("append-storage_options-str", aopt(storage_options="x"), "storage_options", "uri")
add("dataset-uri-nul", lambda m, u: m.dataset(u + "\x00x"), "NUL", "uri")
add("dataset-uri-leading-nul", lambda m, u: m.dataset("\x00" + u), "NUL", "uri")
add("dataset-uri-plain-tab", lambda m, u: m.dataset(u + "\t"), "U+0009", "uri")
add("dataset-uri-file-nul-inside", lambda m, u: m.dataset("file://" + u[:-1] + "\x00" + u[-1]), "NUL", "uri")
add("dataset-uri-file-trailing-nul", lambda m, u: m.dataset("file://" + u + "\x00"), "", "uri")
add("dataset-uri-file-trailing-newline", lambda m, u: m.dataset("file://" + u + "\n"), "", "uri")
add("dataset-uri-file-leading-space", lambda m, u: m.dataset(" file://" + u), "", "uri")
add("dataset-uri-file-tab-inside", lambda m, u: m.dataset("file://" + u[:-1] + "\t" + u[-1]), "", "uri")
add("dataset-uri-int", lambda m, u: m.dataset(5), "uri", "uri")
add("dataset-uri-bytes", lambda m, u: m.dataset(u.encode()), "uri", "uri")
add("dataset-uri-none", lambda m, u: m.dataset(None), "uri", "uri")
add("dataset-uri-unknown-scheme", lambda m, u: m.dataset("nope://bucket/x"), "nope", "uri")
add("write-uri-nul", lambda m, u: m.write_dataset(T, u + "\x00x"), "NUL", "new")
add("write-uri-nul-mid", lambda m, u: m.write_dataset(T, u.replace("new", "ne\x00w")), "NUL", "new")
add("write-uri-memory-nul", lambda m, u: m.write_dataset(T, "memory://x\x00y"), "NUL", "new")
add("write-uri-int", lambda m, u: m.write_dataset(T, 5), "uri", "new")
add("write-uri-bytes", lambda m, u: m.write_dataset(T, u.encode()), "uri", "new")
add("write-uri-long-component", lambda m, u: m.write_dataset(T, u + "/" + "x" * 300), "x" * 20, "new")
add("write-uri-unknown-scheme", lambda m, u: m.write_dataset(T, "nope://bucket/x"), "nope", "new")

# --- write_dataset arguments -------------------------------------------------------------------
for name, val in (("bogus", "bogus"), ("int", 5)):
    add(f"write-mode-{name}", wopt(mode=val), "mode", "new")
add("write-mode-none", wopt(mode=None), "", "new")
add("write-mode-upper", wopt(mode="APPEND"), "", "new")
for arg in ("max_rows_per_file", "max_rows_per_group", "max_bytes_per_file"):
    for name, val in (("zero", 0), ("neg", -1), ("str", "10"), ("float", 1.5), ("u64", 2**64)):
        add(f"write-{arg}-{name}", wopt(**{arg: val}), arg, "new")
for name, val in (("unknown", "9.9"), ("int", 5), ("float", 2.1)):
    add(f"write-data_storage_version-{name}", wopt(data_storage_version=val), "data_storage_version", "new")
add("write-data-none", lambda m, u: m.write_dataset(None, u), "data", "new")
add("write-data-int", lambda m, u: m.write_dataset(5, u), "data", "new")
add("write-data-str", lambda m, u: m.write_dataset("abc", u), "input", "new")
add("write-schema-str", wopt(schema="x"), "schema", "new")
add("write-schema-mismatch", wopt(schema=pa.schema([("zz", pa.int64())])), "schema", "new")
add("write-commit_message-int", wopt(commit_message=5), "commit_message", "new")
add("write-transaction_properties-str", wopt(transaction_properties="x"), "transaction_properties", "new")
add("write-transaction_properties-int-value", wopt(transaction_properties={"a": 5}), "transaction_properties", "new")
add("append-mode-bogus", lambda m, u: m.write_dataset(T, u, mode="bogus"), "mode", "uri")
add("append-max_rows_per_file-zero", aopt(max_rows_per_file=0), "max_rows_per_file", "uri")
add("append-max_rows_per_file-str", aopt(max_rows_per_file="5"), "max_rows_per_file", "uri")
add("append-data-int", lambda m, u: m.write_dataset(5, u, mode="append"), "data", "uri")
add("append-wrong-schema", lambda m, u: m.write_dataset(pa.table({"id": ["x"]}), u, mode="append"), "id", "uri")

# --- update --------------------------------------------------------------------------------------
add("update-str", lambda m, d: d.update("id = 1"), "updates")
add("update-list", lambda m, d: d.update([("id", "1")]), "updates")
add("update-empty", lambda m, d: d.update({}), "updates")
add("update-unknown-col", lambda m, d: d.update({"nope": "1"}), "nope")
add("update-int-key", lambda m, d: d.update({5: "1"}), "updates")
add("update-int-value", lambda m, d: d.update({"id": 5}), "id")
add("update-bad-sql", lambda m, d: d.update({"id": "id +"}), "id +")
add("update-unknown-ref", lambda m, d: d.update({"id": "nope + 1"}), "nope")
add("update-string-into-int", lambda m, d: d.update({"id": "'x'"}), "id")
add("update-float-1e999", lambda m, d: d.update({"f": "1e999"}), "")
add("update-where-int", lambda m, d: d.update({"id": "1"}, where=5), "where")
add("update-where-bytes", lambda m, d: d.update({"id": "1"}, where=b"id = 1"), "where")
add("update-where-unknown", lambda m, d: d.update({"id": "1"}, where="nope = 1"), "nope")
add("update-where-1e999", lambda m, d: d.update({"id": "1"}, where="id = 1e999"), "1e999")
add("update-where-empty", lambda m, d: d.update({"id": "1"}, where=""), "where")
add("update-struct-field", lambda m, d: d.update({"st.x": "1"}), "st.x")
add("update-conflict_retries-neg", lambda m, d: d.update({"id": "1"}, conflict_retries=-1), "conflict_retries")
add("update-conflict_retries-str", lambda m, d: d.update({"id": "1"}, conflict_retries="x"), "conflict_retries")
add("update-all-rows", lambda m, d: d.update({"id": "id + 100"}), "")


# --- merge_insert -------------------------------------------------------------------------------
def upsert(on: Any, data: Any = SRC, **kw: Any) -> Callable[[Any, Any], Any]:
    return lambda m, d: d.merge_insert(on).when_matched_update_all().when_not_matched_insert_all().execute(data, **kw)


add("merge_insert-on-int", upsert(5), "on")
add("merge_insert-on-unknown", upsert("nope"), "nope")
add("merge_insert-on-empty", upsert([]), "on")
add("merge_insert-on-int-item", upsert([5]), "on")
add("merge_insert-on-bytes", upsert(b"id"), "on")
add("merge_insert-on-none", upsert(None), "on")
add("merge_insert-on-struct-field", upsert("st.x"), "st.x")
add("merge_insert-on-struct", upsert("st"), "")
add("merge_insert-on-struct-match", upsert("st", pa.table({"st": pa.array([{"x": 1, "y": "y1"}, None], STRUCT),
                                                           "s": ["upd", "n"]})), "")
add("merge_insert-on-dup", upsert(["id", "id"]), "")
add("merge_insert-on-tuple", upsert(("id",)), "")
add("merge_insert-no-when", lambda m, d: d.merge_insert("id").execute(SRC), "when_")
add("merge_insert-string-keys", lambda m, d: d.merge_insert("id").when_matched_update_all().execute(
    pa.table({"id": ["1", "2"]})), "id")
add("merge_insert-string-keys-insert", upsert("id", pa.table({"id": ["1", "30"], "s": ["x", "y"]})), "id")
add("merge_insert-float-keys", upsert("id", pa.table({"id": [1.5, 2.0]})), "id")
add("merge_insert-int32-keys", upsert("id", pa.table({"id": pa.array([1, 2], pa.int32())})), "int32")
add("merge_insert-uint64-keys", upsert("id", pa.table({"id": pa.array([1], pa.uint64())})), "uint64")
add("merge_insert-large-string", upsert("id", pa.table({"id": pa.array([1], pa.int64()),
                                                        "s": pa.array(["q"], pa.large_string())})), "large_string")
add("merge_insert-float32-value", upsert("id", pa.table({"id": pa.array([1], pa.int64()),
                                                         "f": pa.array([1.0], pa.float32())})), "f")
add("merge_insert-reordered-columns", upsert("id", pa.table({"s": ["q"], "id": pa.array([1], pa.int64())})), "")
add("merge_insert-data-none", upsert("id", None), "data")
add("merge_insert-data-int", upsert("id", 5), "data")
add("merge_insert-source-no-key", upsert("id", pa.table({"s": ["x"]})), "id")
add("merge_insert-source-extra-col", upsert("id", pa.table({"id": [1], "zz": [1]})), "zz")
add("merge_insert-schema-str", upsert("id", schema="x"), "schema")
add("merge_insert-dup-source-keys", upsert("id", pa.table({"id": [1, 1], "s": ["p", "q"]})), "id = 1")
add("merge_insert-insert-null-key", lambda m, d: d.merge_insert("id").when_not_matched_insert_all().execute(
    pa.table({"id": pa.array([None], pa.int64())})), "")
add("merge_insert-insert-null-key-with-col", lambda m, d: d.merge_insert("id").when_not_matched_insert_all()
    .execute(pa.table({"id": pa.array([None, 5], pa.int64()), "s": ["p", "q"]})), "")
add("merge_insert-empty-source", lambda m, d: d.merge_insert("id").when_not_matched_insert_all().execute(
    pa.table({"id": pa.array([], pa.int64())})), "")
add("merge_insert-only-delete-by-source", lambda m, d: d.merge_insert("id").when_not_matched_by_source_delete()
    .execute(SRC), "")
add("merge_insert-matched-fail", lambda m, d: d.merge_insert("id").when_matched_fail().execute(SRC), "id = 1")
add("merge_insert-condition-int", lambda m, d: d.merge_insert("id").when_matched_update_all(5).execute(SRC),
    "condition")
add("merge_insert-condition-unknown", lambda m, d: d.merge_insert("id").when_matched_update_all(
    "source.nope = 1").execute(SRC), "nope")
add("merge_insert-condition-bad-sql", lambda m, d: d.merge_insert("id").when_matched_update_all(
    "source.id =").execute(SRC), "source.id =")
add("merge_insert-delete-expr-int", lambda m, d: d.merge_insert("id").when_not_matched_by_source_delete(5)
    .execute(SRC), "filter")
add("merge_insert-delete-expr-unknown", lambda m, d: d.merge_insert("id").when_not_matched_by_source_delete(
    "nope = 1").execute(SRC), "nope")
add("merge_insert-conflict_retries-neg", lambda m, d: d.merge_insert("id").when_not_matched_insert_all()
    .conflict_retries(-1).execute(SRC), "max_retries")
add("merge_insert-conflict_retries-str", lambda m, d: d.merge_insert("id").when_not_matched_insert_all()
    .conflict_retries("x").execute(SRC), "max_retries")

# --- add / alter / drop columns ------------------------------------------------------------------
add("add_columns-int", lambda m, d: d.add_columns(5), "transforms")
add("add_columns-str", lambda m, d: d.add_columns("x"), "transforms")
add("add_columns-empty-dict", lambda m, d: d.add_columns({}), "")
add("add_columns-empty-list", lambda m, d: d.add_columns([]), "transforms")
add("add_columns-existing", lambda m, d: d.add_columns({"id": "1"}), "id")
add("add_columns-bad-sql", lambda m, d: d.add_columns({"x": "id +"}), "id +")
add("add_columns-unknown-ref", lambda m, d: d.add_columns({"x": "nope + 1"}), "nope")
add("add_columns-int-value", lambda m, d: d.add_columns({"x": 5}), "x")
add("add_columns-int-key", lambda m, d: d.add_columns({5: "1"}), "transforms")
add("add_columns-empty-name", lambda m, d: d.add_columns({"": "1"}), "name")
add("add_columns-1e999", lambda m, d: d.add_columns({"x": "1e999"}), "")
add("add_columns-nonnull-field", lambda m, d: d.add_columns(pa.field("x", pa.int64(), nullable=False)), "x")
add("add_columns-field-existing", lambda m, d: d.add_columns(pa.field("id", pa.int64())), "id")
add("add_columns-read_columns-str", lambda m, d: d.add_columns(double_id, read_columns="id"), "read_columns")
add("add_columns-read_columns-int", lambda m, d: d.add_columns(double_id, read_columns=5), "read_columns")
add("add_columns-read_columns-unknown", lambda m, d: d.add_columns(double_id, read_columns=["nope"]), "nope")
for name, val in (("zero", 0), ("neg", -1), ("str", "5")):
    add(f"add_columns-batch_size-{name}",
        (lambda v: lambda m, d: d.add_columns(double_id, read_columns=["id"], batch_size=v))(val), "batch_size")
add("add_columns-sql-batch_size-zero", lambda m, d: d.add_columns({"x": "1"}, batch_size=0), "batch_size")
add("add_columns-udf-wrong-rows", lambda m, d: d.add_columns(
    lambda b: pa.record_batch([pa.array([1])], names=["q"]), read_columns=["id"]), "rows")
add("add_columns-udf-returns-int", lambda m, d: d.add_columns(lambda b: 5, read_columns=["id"]), "RecordBatch")
add("alter-unknown", lambda m, d: d.alter_columns({"path": "nope", "name": "x"}), "nope")
add("alter-path-int", lambda m, d: d.alter_columns({"path": 5, "name": "x"}), "path")
add("alter-no-path", lambda m, d: d.alter_columns({"name": "x"}), "path")
add("alter-not-dict", lambda m, d: d.alter_columns(5), "alter")
add("alter-str", lambda m, d: d.alter_columns("id"), "alter")
add("alter-none", lambda m, d: d.alter_columns(None), "alter")
add("alter-name-int", lambda m, d: d.alter_columns({"path": "id", "name": 5}), "name")
add("alter-name-none", lambda m, d: d.alter_columns({"path": "id", "name": None}), "name")
add("alter-name-empty", lambda m, d: d.alter_columns({"path": "id", "name": ""}), "name")
add("alter-name-clash", lambda m, d: d.alter_columns({"path": "id", "name": "s"}), "s")
add("alter-same-name", lambda m, d: d.alter_columns({"path": "id", "name": "id"}), "")
add("alter-data_type-str", lambda m, d: d.alter_columns({"path": "id", "data_type": "int32"}), "data_type")
add("alter-data_type-int", lambda m, d: d.alter_columns({"path": "id", "data_type": 5}), "data_type")
add("alter-data_type-none", lambda m, d: d.alter_columns({"path": "id", "data_type": None}), "data_type")
add("alter-cast-string-to-int", lambda m, d: d.alter_columns({"path": "s", "data_type": pa.int64()}), "s")
add("alter-nullable-str", lambda m, d: d.alter_columns({"path": "id", "nullable": "no"}), "nullable")
add("alter-nullable-int", lambda m, d: d.alter_columns({"path": "id", "nullable": 1}), "nullable")
add("alter-nullable-none", lambda m, d: d.alter_columns({"path": "id", "nullable": None}), "nullable")
add("alter-unknown-key", lambda m, d: d.alter_columns({"path": "id", "bogus": 1}), "bogus")
add("alter-nested-unknown", lambda m, d: d.alter_columns({"path": "st.nope", "name": "x"}), "st.nope")
add("alter-nothing", lambda m, d: d.alter_columns(), "")
add("drop-str", lambda m, d: d.drop_columns("s"), "columns")
add("drop-int", lambda m, d: d.drop_columns(5), "columns")
add("drop-none", lambda m, d: d.drop_columns(None), "columns")
add("drop-int-item", lambda m, d: d.drop_columns([5]), "columns")
add("drop-unknown", lambda m, d: d.drop_columns(["nope"]), "nope")
add("drop-nested-unknown", lambda m, d: d.drop_columns(["st.nope"]), "st.nope")
add("drop-all", lambda m, d: d.drop_columns(["id", "s", "f", "st"]), "column")
add("drop-empty", lambda m, d: d.drop_columns([]), "")
add("drop-dup", lambda m, d: d.drop_columns(["s", "s"]), "")
add("drop-tuple", lambda m, d: d.drop_columns(("s",)), "")

# --- tags and branches ---------------------------------------------------------------------------
add("tag-create-300-chars", lambda m, d: d.tags.create("t" * 300, 1), "tag")
add("tag-create-empty", lambda m, d: d.tags.create("", 1), "tag")
add("tag-create-slash", lambda m, d: d.tags.create("a/b", 1), "tag")
add("tag-create-nul", lambda m, d: d.tags.create("a\x00b", 1), "tag")
add("tag-create-int-name", lambda m, d: d.tags.create(5, 1), "tag")
add("tag-create-missing-version", lambda m, d: d.tags.create("t", 99), "99")
add("tag-create-str-version", lambda m, d: d.tags.create("t", "1"), "tag '1'")  # a str reference names a tag (pylance 14)
add("tag-create-zero-version", lambda m, d: d.tags.create("t", 0), "version")
add("tag-create-u64-version", lambda m, d: d.tags.create("t", 2**64), "version")
add("tag-create-dotdot", lambda m, d: d.tags.create("a..b", 1), "tag")
add("tag-create-lock", lambda m, d: d.tags.create("a.lock", 1), "tag")
add("tag-create-space", lambda m, d: d.tags.create("a b", 1), "tag")
add("tag-update-missing", lambda m, d: d.tags.update("nope", 1), "nope")
add("tag-update-300-chars", lambda m, d: d.tags.update("t" * 300, 1), "tag")
add("tag-update-int-name", lambda m, d: d.tags.update(5, 1), "tag")
add("tag-delete-missing", lambda m, d: d.tags.delete("nope"), "nope")
add("tag-delete-300-chars", lambda m, d: d.tags.delete("t" * 300), "tag")
add("tag-delete-int", lambda m, d: d.tags.delete(5), "tag")
add("tag-delete-empty", lambda m, d: d.tags.delete(""), "tag")
add("tag-get_version-missing", lambda m, d: d.tags.get_version("nope"), "nope")
add("tag-get_version-300-chars", lambda m, d: d.tags.get_version("t" * 300), "tag")
add("dataset-version-300-char-tag", lambda m, u: m.dataset(u, version="t" * 300), "tag", "uri")
add("checkout-300-char-tag", lambda m, d: d.checkout_version("t" * 300), "tag")
add("branch-create-dotdot", lambda m, d: d.create_branch("../x"), "branch")
add("branch-create-missing-version", lambda m, d: d.create_branch("b", 99), "99")
add("branch-create-int", lambda m, d: d.create_branch(5), "branch")
add("branch-create-300-chars", lambda m, d: d.create_branch("b" * 300), "branch")
add("branch-checkout-missing", lambda m, d: d.checkout_branch("nope"), "nope")

# --- indices -------------------------------------------------------------------------------------
add("index-column-int", lambda m, d: d.create_scalar_index(5, "BTREE"), "column")
add("index-column-unknown", lambda m, d: d.create_scalar_index("nope", "BTREE"), "nope")
add("index-column-two", lambda m, d: d.create_scalar_index(["id", "s"], "BTREE"), "column")
add("index-column-list", quiet(lambda m, d: d.create_scalar_index(["id"], "BTREE")), "")
add("index-column-tuple", quiet(lambda m, d: d.create_scalar_index(("id",), "BTREE")), "")
add("index-type-lowercase", quiet(lambda m, d: d.create_scalar_index("id", "btree")), "")
add("index-type-bogus", lambda m, d: d.create_scalar_index("id", "BOGUS"), "BOGUS")
add("index-type-int", lambda m, d: d.create_scalar_index("id", 5), "index_type")
add("index-name-int", lambda m, d: d.create_scalar_index("id", "BTREE", name=5), "name")
add("index-struct", lambda m, d: d.create_scalar_index("st", "BTREE"), "st")
add("drop_index-missing", lambda m, d: d.drop_index("nope"), "nope")

# --- maintenance ---------------------------------------------------------------------------------
for arg, vals in (("target_rows_per_fragment", (0, -1, "5", 2**64)), ("max_rows_per_group", (0, -1, "5")),
                  ("materialize_deletions_threshold", ("x",)), ("num_threads", (0, -1, "2")),
                  ("batch_size", (0, -1, "5")), ("max_bytes_per_file", (0, -1, "5"))):
    for v in vals:
        add(f"compact-{arg}-{v!r}", (lambda a, x: lambda m, d: d.optimize.compact_files(**{a: x}))(arg, v), arg)
for v in (-0.5, 2.0):
    add(f"compact-materialize_deletions_threshold-{v!r}",
        (lambda x: lambda m, d: d.optimize.compact_files(materialize_deletions_threshold=x))(v), "")
add("compact-materialize_deletions-str", lambda m, d: d.optimize.compact_files(materialize_deletions="x"),
    "materialize_deletions")
add("compact-target-none", lambda m, d: d.optimize.compact_files(target_rows_per_fragment=None), "")
add("cleanup-older_than-str", lambda m, d: d.cleanup_old_versions(older_than="1d"), "older_than")
add("cleanup-older_than-int", lambda m, d: d.cleanup_old_versions(older_than=5), "older_than")
add("cleanup-older_than-neg", lambda m, d: d.cleanup_old_versions(older_than=dt.timedelta(days=-1)), "older_than")
add("cleanup-retain-zero", lambda m, d: d.cleanup_old_versions(retain_versions=0), "retain_versions")
add("cleanup-retain-neg", lambda m, d: d.cleanup_old_versions(retain_versions=-1), "retain_versions")
add("cleanup-retain-str", lambda m, d: d.cleanup_old_versions(retain_versions="2"), "retain_versions")
add("cleanup-retain-true", lambda m, d: d.cleanup_old_versions(retain_versions=True), "")

#: Calls pylance accepts that ours refuses, and why.
STRICTER = {
    "count_rows-limit-str": "pylance's count_rows(str filter) drops its keyword arguments; ours applies "
                            "them as scanner options, so they are checked as the scanner checks them",
    "count_rows-offset-u64": "as count_rows-limit-str",
    "count_rows-columns-int": "as count_rows-limit-str",
    "take-columns-dup": "a column asked for twice is refused (tests/safety/test_bad_public_input.py); "
                        "pylance returns it once",
    "to_table-filter-dict": "pylance reads a dict filter as a query object and returns every row",
    "scanner-filter-dict": "as to_table-filter-dict",
    "fragment-columns-int": "pylance's LanceFragment.scanner drops a columns= that is neither list nor dict",
    "write-max_rows_per_group-zero": "pylance panics in a writer thread (remainder by zero) and goes on",
    "write-max_bytes_per_file-zero": "a zero byte budget cannot hold a row",
    "write-schema-str": "pylance ignores schema= when the data is a Table",
    "write-schema-mismatch": "as write-schema-str",
    "merge_insert-schema-str": "as write-schema-str",
    "alter-name-empty": "pylance commits a schema it cannot open again (\"No field named .\")",
    "compact-target_rows_per_fragment-0": "CompactionOptions refuses 0 (pylance takes it while there is nothing "
                                          "to compact)",
    "compact-max_rows_per_group-0": "as compact-target_rows_per_fragment-0",
    "compact-num_threads-0": "as compact-target_rows_per_fragment-0",
    "compact-batch_size-0": "as compact-target_rows_per_fragment-0",
    "compact-max_bytes_per_file-0": "as compact-target_rows_per_fragment-0",
    "cleanup-older_than-neg": "cleanup refuses an age below zero (pylance reads it as 'before tomorrow')",
}

@dataclass
class Outcome:
    result: Any
    error: BaseException | None
    before: dict[str, tuple[int, int]]
    after: dict[str, tuple[int, int]]
    state: Any


def _files(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory under ``root`` with its size and modification time."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            out[os.path.relpath(path, root)] = (st.st_size if name in filenames else -1, st.st_mtime_ns)
    return out


def _norm(result: Any) -> Any:
    if isinstance(result, list) and result and isinstance(result[0], pa.RecordBatch):
        result = pa.Table.from_batches(result)
    if isinstance(result, pa.Table):
        return ("table", result.column_names, result.to_pylist())
    if isinstance(result, (lf.LanceDataset, lance.LanceDataset)):
        return ("dataset", result.version, result.to_table().to_pylist())
    if hasattr(result, "fragments_removed"):  # CompactionMetrics
        return ("compaction", result.fragments_removed, result.fragments_added, result.files_removed,
                result.files_added)
    if hasattr(result, "old_versions"):  # CleanupStats
        return ("cleanup", result.old_versions)
    if hasattr(result, "items"):  # result mappings; pylance adds attempt counts
        return ("map", {k: v for k, v in dict(result.items()).items() if k != "num_attempts"})
    return ("value", result)


def _run(module: Any, case: Case, base: Path) -> Outcome:
    base.mkdir()
    uri = str(base / "ds")
    module.write_dataset(T, uri)
    target = {"ds": module.dataset(uri), "uri": uri, "new": str(base / "new")}[case.target]
    before = _files(base)
    result: Any = None
    error: BaseException | None = None
    try:
        result = _norm(case.call(module, target))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - pylance panics are BaseExceptions; all refusals count
        error = exc
    after = _files(base)
    try:
        ds = module.dataset(uri)
        state: Any = (len(ds.versions()), ds.to_table().to_pylist())
    except Exception as exc:  # noqa: BLE001 - pylance can leave a dataset it cannot read (alter-name-empty)
        state = ("unreadable", type(exc).__name__)
    return Outcome(result, error, before, after, state)


def _params(refused: bool) -> list[Any]:
    out = []
    for case in CASES:
        if bool(case.arg) != refused:
            continue
        out.append(pytest.param(case, id=case.id))
    return out


@pytest.fixture(autouse=True)
def _scratch_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A URI that is not a string could turn into a relative path: never under the repository.
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("case", _params(refused=True))
def test_bad_input_is_a_lance_error_naming_it_and_writes_nothing(case: Case, tmp_path: Path) -> None:
    theirs = _run(lance, case, tmp_path / "pylance")
    if case.id in STRICTER:
        assert theirs.error is None, f"pylance now refuses it ({theirs.error!r}): move it out of STRICTER"
    else:
        assert theirs.error is not None, f"pylance accepts it: {theirs.result!r:.300}"
    ours = _run(lf, case, tmp_path / "ours")
    assert ours.error is not None, f"accepted: {ours.result!r:.300}"
    assert isinstance(ours.error, LanceError), f"bare {type(ours.error).__name__}: {ours.error}"
    assert case.arg in str(ours.error), f"{type(ours.error).__name__} does not name {case.arg!r}: {ours.error}"
    assert ours.after == ours.before, "files were written or changed"
    assert ours.state[0] == 1


@pytest.mark.parametrize("case", _params(refused=False))
def test_what_pylance_accepts_is_accepted_with_its_result(case: Case, tmp_path: Path) -> None:
    theirs = _run(lance, case, tmp_path / "pylance")
    assert theirs.error is None, f"pylance refuses it: {theirs.error!r}"
    ours = _run(lf, case, tmp_path / "ours")
    assert ours.error is None, f"refused: {ours.error!r}"
    assert ours.result == theirs.result
    assert ours.state == theirs.state


def test_the_table_is_broad() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    assert len(ids) >= 400
    assert set(STRICTER) <= set(ids)
    assert all(CASES[ids.index(i)].arg for i in STRICTER)
