"""Small API differences closed against pylance 14.0.2: DeletionFile.asdict/json/from_json,
LanceFileReader row counts, merge_insert retry_timeout / explain_plan, Tags.create/update(tag, reference).
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lance
import lance.file
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import CommitConflictError, InvalidInputError, RetryableCommitConflictError
from lance_format.evolution.merge_insert import MergeInsertBuilder
from lance_format.file import LanceFileReader

TABLE = pa.table({"id": [1, 2, 3, 4], "v": ["a", "b", "c", "d"]})


# --- DeletionFile ---------------------------------------------------------------------------


def test_deletion_file_asdict_and_json_equal_pylance(tmp_path: Path) -> None:
    uri = str(tmp_path / "d.lance")
    lance.write_dataset(TABLE, uri).delete("id < 3")
    theirs = lance.dataset(uri).get_fragments()[0].metadata.deletion_file
    ours = lance_format.dataset(uri).get_fragments()[0].metadata.deletion_file
    assert ours.asdict() == theirs.asdict()
    assert list(ours.asdict()) == list(theirs.asdict())
    assert ours.json() == theirs.json()
    assert type(ours).from_json(theirs.json()) == ours
    assert sys.modules["lance.fragment"].DeletionFile.from_json(ours.json()).asdict() == theirs.asdict()


# --- LanceFileReader ------------------------------------------------------------------------


def test_file_reader_row_count_equals_pylance(tmp_path: Path) -> None:
    """pylance's ``num_rows()`` is a method, ours a property (documented on the compatibility page);
    ``metadata().num_rows`` reads the same on both."""
    uri = str(tmp_path / "f.lance")
    lance.write_dataset(TABLE, uri)
    path = next((Path(uri) / "data").glob("*.lance"))
    theirs = lance.file.LanceFileReader(str(path))
    ours = LanceFileReader(str(path))
    assert ours.num_rows == theirs.num_rows() == 4
    assert ours.metadata().num_rows == theirs.metadata().num_rows


# --- merge_insert ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["x", 5, dt.timedelta(seconds=-1)], ids=["str", "int", "negative"])
def test_retry_timeout_refuses_what_pylance_refuses(tmp_path: Path, bad: Any) -> None:
    for lib in (lance, lance_format):
        ds = lib.write_dataset(TABLE, str(tmp_path / f"{lib.__name__}.lance"))
        builder = ds.merge_insert("id")
        assert builder.retry_timeout(dt.timedelta(seconds=5)) is not None
        expected = TypeError if not isinstance(bad, dt.timedelta) else ValueError
        with pytest.raises(expected):
            builder.retry_timeout(bad)


def test_retry_timeout_stops_retries_once_passed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first attempt always runs; a retry after a conflict only while the timeout lasts."""
    ds = lance_format.write_dataset(TABLE, str(tmp_path / "t.lance"))
    real = MergeInsertBuilder._run
    calls = []

    def conflict_once(self: MergeInsertBuilder, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise RetryableCommitConflictError("commit conflict: injected")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(MergeInsertBuilder, "_run", conflict_once)
    src = pa.table({"id": [4, 5], "v": ["x", "y"]})
    with pytest.raises(CommitConflictError, match="retry_timeout"):
        ds.merge_insert("id").when_not_matched_insert_all().retry_timeout(dt.timedelta(0)).execute(src)
    assert len(calls) == 1 and ds.version == 1
    calls.clear()
    result = ds.merge_insert("id").when_not_matched_insert_all().retry_timeout(dt.timedelta(seconds=30)).execute(src)
    assert len(calls) == 2 and result["num_inserted_rows"] == 1


CLAUSES: dict[str, Callable[[Any], Any]] = {
    "upsert": lambda b: b.when_matched_update_all().when_not_matched_insert_all(),
    "update_if": lambda b: b.when_matched_update_all("source.v = 'x'"),
    "delete_only": lambda b: b.when_matched_delete(),
    "delete_insert": lambda b: b.when_matched_delete().when_not_matched_insert_all(),
    "delete_by_source": lambda b: b.when_matched_delete().when_not_matched_by_source_delete(),
    "fail_insert": lambda b: b.when_matched_fail().when_not_matched_insert_all(),
    "by_source_if": lambda b: b.when_matched_update_all().when_not_matched_by_source_delete("v = 'a'"),
    "insert_only": lambda b: b.when_not_matched_insert_all(),
}


@pytest.mark.parametrize("keys", [["id"], ["id", "v"]], ids=["one_key", "two_keys"])
@pytest.mark.parametrize("clauses", list(CLAUSES), ids=list(CLAUSES))
def test_explain_plan_headline_equals_pylance(tmp_path: Path, clauses: str, keys: list[str]) -> None:
    heads = []
    for lib in (lance, lance_format):
        ds = lib.write_dataset(TABLE, str(tmp_path / f"{lib.__name__}.lance"))
        plan = CLAUSES[clauses](ds.merge_insert(keys)).explain_plan()
        assert isinstance(plan, str) and plan.endswith("\n")
        heads.append(plan.splitlines()[0])
        assert lib.dataset(ds.uri).version == 1  # nothing written
    assert heads[1] == heads[0]


def test_explain_plan_with_a_source_schema(tmp_path: Path) -> None:
    source = pa.schema([("id", pa.int64())])
    for lib in (lance, lance_format):
        ds = lib.write_dataset(TABLE, str(tmp_path / f"{lib.__name__}.lance"))
        plan = ds.merge_insert("id").when_matched_update_all().explain_plan(source, verbose=True)
        assert plan.startswith("MergeInsert: on=[id], when_matched=UpdateAll")


@pytest.mark.parametrize(("call", "error"), [
    (lambda ds: ds.merge_insert("id").explain_plan(), ValueError),
    (lambda ds: ds.merge_insert("id").when_not_matched_insert_all().explain_plan("x"), TypeError),
    (lambda ds: ds.merge_insert("id").when_not_matched_insert_all().explain_plan(pa.schema([("v", pa.string())])),
     OSError),
    (lambda ds: ds.merge_insert("id").when_not_matched_insert_all().explain_plan(
        pa.schema([("id", pa.int32()), ("v", pa.string())])), OSError),
], ids=["no_clause", "not_a_schema", "no_key", "other_type"])
def test_explain_plan_refuses_what_pylance_refuses(tmp_path: Path, call: Callable[[Any], Any],
                                                   error: type[Exception]) -> None:
    for lib in (lance, lance_format):
        ds = lib.write_dataset(TABLE, str(tmp_path / f"{lib.__name__}.lance"))
        with pytest.raises(error):
            call(ds)


# --- Tags -----------------------------------------------------------------------------------


def _tags(ds: Any) -> list[tuple[str, int, str | None]]:
    out = []
    for name, t in ds.tags.list().items():
        version, branch = (t["version"], t.get("branch")) if isinstance(t, dict) else (t.version, t.branch)
        out.append((name, version, branch))
    return sorted(out)


def _three_versions(lib: Any, uri: str) -> Any:
    lib.write_dataset(TABLE, uri)
    lib.write_dataset(TABLE, uri, mode="append")
    lib.write_dataset(TABLE, uri, mode="append")
    return lib.dataset(uri, version=1)


def test_tag_references_equal_pylance(tmp_path: Path) -> None:
    states = []
    for lib in (lance, lance_format):
        ds = _three_versions(lib, str(tmp_path / f"{lib.__name__}.lance"))
        ds.tags.create("t_none")                # the checked-out version
        ds.tags.create("t1", 1)
        ds.tags.create("t_str", "t1")           # another tag's version
        ds.tags.create("t_main", ("main", 2))
        ds.tags.create("t_latest", (None, None))
        ds.tags.create(tag="t_kw", reference=2)
        before = _tags(ds)
        ds.tags.update("t1")
        ds.tags.update("t_str", "t_main")
        ds.tags.update("t_kw", reference=3)
        states.append((before, _tags(ds)))
    assert states[1] == states[0]


@pytest.mark.parametrize("call", [
    lambda ds: ds.tags.create("x", "nope"),
    lambda ds: ds.tags.create("y", 1.5),
    lambda ds: ds.tags.create("z", ("nob", 1)),
    lambda ds: ds.tags.create("w", 99),
], ids=["missing_tag", "float", "missing_branch", "missing_version"])
def test_bad_tag_references_raise_what_pylance_raises(tmp_path: Path, call: Callable[[Any], Any]) -> None:
    for lib in (lance, lance_format):
        ds = _three_versions(lib, str(tmp_path / f"{lib.__name__}.lance"))
        with pytest.raises(Exception) as theirs_or_ours:
            call(ds)
        if lib is lance:
            expected = type(theirs_or_ours.value)
        else:
            assert isinstance(theirs_or_ours.value, expected)


def test_version_keyword_is_kept_as_an_alias(tmp_path: Path) -> None:
    ds = _three_versions(lance_format, str(tmp_path / "t.lance"))
    ds.tags.create("a", version=2)
    ds.tags.update("a", version=3)
    assert ds.tags.get_version("a") == 3
    with pytest.raises(InvalidInputError, match="twice"):
        ds.tags.create("b", 1, version=2)
