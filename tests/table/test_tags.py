"""Tag files: name rules, JSON layout, CRUD, and pylance 14.0.2 interop both ways."""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import warnings
from pathlib import Path

import pyarrow as pa
import pytest

from lance_format.errors import CorruptFileError, TagError, TagNotFoundError
from lance_format.storage import open_store
from lance_format.table.tags import (
    Tag,
    delete_tag,
    format_timestamp_ns,
    list_tags,
    parse_tag,
    parse_timestamp,
    read_tag,
    update_tag,
    validate_tag_name,
    write_tag,
)

U64_MAX = 2**64 - 1


@pytest.mark.parametrize("name", ["t1", "v1.0.0", "release_2024-01", "A", "ünï", "x.y", "a-b_c.d"])
def test_valid_names(name: str) -> None:
    validate_tag_name(name)


@pytest.mark.parametrize(
    "name", ["", ".a", "a.", "a..b", "x.lock", "a/b", "a b", "a\\b", "../x", "tag!", "a\x00"]
)
def test_invalid_names(name: str) -> None:
    with pytest.raises(TagError):
        validate_tag_name(name)


def test_timestamp_format() -> None:
    assert format_timestamp_ns(1_795_294_829_714_024_386) == "2026-11-21T21:00:29.714024386Z"
    assert format_timestamp_ns(0) == "1970-01-01T00:00:00.000000000Z"
    parsed = parse_timestamp("2026-11-21T20:40:29.714024386Z", "x")
    assert parsed == dt.datetime(2026, 11, 21, 20, 40, 29, 714024, tzinfo=dt.UTC)
    assert parse_timestamp("2026-11-21T21:40:29+01:00", "x") == dt.datetime(
        2026, 11, 21, 20, 40, 29, tzinfo=dt.UTC
    )
    with pytest.raises(CorruptFileError, match="where"):
        parse_timestamp("yesterday", "where")


def test_write_layout(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    tag = write_tag(store, "t1", 3, 776)
    raw = (tmp_path / "_refs/tags/t1.json").read_text()
    obj = json.loads(raw)
    assert list(obj) == ["branch", "version", "createdAt", "updatedAt", "manifestSize", "metadata"]
    assert obj["branch"] is None and obj["version"] == 3 and obj["manifestSize"] == 776
    assert obj["metadata"] == {} and obj["createdAt"] == obj["updatedAt"]
    assert len(obj["createdAt"]) == len("2026-11-21T20:40:29.714024386Z") and obj["createdAt"].endswith("Z")
    assert raw == json.dumps(obj, indent=2) and not raw.endswith("\n")
    assert tag == read_tag(store, "t1")
    assert tag.created_at is not None and abs(tag.created_at - dt.datetime.now(dt.UTC)) < dt.timedelta(
        minutes=1
    )


def test_crud(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    write_tag(store, "b", 1, 100, branch="feature/x", metadata={"k": "v"})
    write_tag(store, "a", 2, 200)
    with pytest.raises(TagError, match="already exists"):
        write_tag(store, "a", 3, 300)
    assert read_tag(store, "a").version == 2
    replaced = write_tag(store, "a", 3, 300, must_not_exist=False)
    assert replaced.version == 3
    tags = list_tags(store)
    assert list(tags) == ["a", "b"]
    assert tags["b"].branch == "feature/x" and tags["b"].metadata == {"k": "v"}
    before = (tmp_path / "_refs/tags/b.json").read_text()
    moved = update_tag(store, "b", 5, 555)
    after = json.loads((tmp_path / "_refs/tags/b.json").read_text())
    assert moved.version == 5 and moved.manifest_size == 555 and moved.branch is None
    assert after["createdAt"] == json.loads(before)["createdAt"]  # kept verbatim
    assert after["metadata"] == {"k": "v"}
    with pytest.raises(TagNotFoundError):
        update_tag(store, "nope", 1, 1)
    delete_tag(store, "a")
    with pytest.raises(TagNotFoundError):
        delete_tag(store, "a")
    with pytest.raises(TagNotFoundError):
        read_tag(store, "a")
    assert list(list_tags(store)) == ["b"]


def test_bad_args(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    for version, size in ((0, 1), (-1, 1), (1, 0), (True, 5)):
        with pytest.raises(TagError):
            write_tag(store, "t", version, size)
    with pytest.raises(TagError):
        write_tag(store, "../escape", 1, 1)
    assert list(store.list()) == []


def test_list_ignores_junk(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    write_tag(store, "good", 1, 10)
    store.write("_refs/tags/readme.txt", b"x")
    store.write("_refs/tags/sub/x.json", b"{}")
    store.write("_refs/tags/.hidden.json", b"{}")
    assert list(list_tags(store)) == ["good"]
    assert list_tags(open_store(str(tmp_path / "empty"))) == {}


def test_old_style_and_corrupt(tmp_path: Path) -> None:
    old = parse_tag("o", b'{"branch": null, "version": 5, "manifestSize": 776}', "f")
    assert old == Tag("o", 5, 776, None, None, None, {})
    for bad, match in [
        (b"not json", "not valid JSON"),
        (b"[]", "JSON object"),
        (b'{"version": 1}', "manifestSize"),
        (b'{"version": -1, "manifestSize": 3}', "version"),
        (b'{"version": "1", "manifestSize": 3}', "version"),
        (b'{"version": 1, "manifestSize": 3, "branch": 7}', "branch"),
        (b'{"version": 1, "manifestSize": 3, "createdAt": "bad"}', "createdAt"),
        (b'{"version": 1, "manifestSize": 3, "metadata": {"a": 1}}', "metadata"),
        (b"\xff\xfe", "not valid JSON"),
    ]:
        with pytest.raises(CorruptFileError, match=match) as info:
            parse_tag("x", bad, "_refs/tags/x.json")
        assert "_refs/tags/x.json" in str(info.value)
    store = open_store(str(tmp_path))
    store.write("_refs/tags/broken.json", b"{")
    with pytest.raises(CorruptFileError, match="broken.json"):
        read_tag(store, "broken")


def test_concurrent_create(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    wins: list[int] = []
    barrier = threading.Barrier(8)

    def go(i: int) -> None:
        barrier.wait()
        try:
            write_tag(store, "race", i + 1, 10)
            wins.append(i)
        except TagError:
            pass

    threads = [threading.Thread(target=go, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and read_tag(store, "race").version == wins[0] + 1


# -- interop with pylance 14.0.2 ------------------------------------------------

lance = pytest.importorskip("lance")


def _manifest_size(uri: str, version: int) -> int:
    return os.path.getsize(f"{uri}/_versions/{U64_MAX - version:020d}.manifest")


@pytest.fixture
def dataset(tmp_path: Path) -> str:
    uri = str(tmp_path / "ds")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lance.write_dataset(pa.table({"a": [1, 2, 3]}), uri)
        lance.write_dataset(pa.table({"a": [4, 5]}), uri, mode="append")
    return uri


def test_read_pylance_tag(dataset: str) -> None:
    lance.dataset(dataset).tags.create("t1", 1)
    tag = read_tag(open_store(dataset), "t1")
    theirs = lance.dataset(dataset).tags.list()["t1"]
    assert tag.version == 1 and tag.branch is None and tag.metadata == {}
    assert tag.manifest_size == theirs["manifest_size"] == _manifest_size(dataset, 1)
    assert tag.created_at == theirs["created_at"] and tag.updated_at == theirs["updated_at"]
    lance.dataset(dataset).tags.update("t1", 2)
    assert read_tag(open_store(dataset), "t1").version == 2


def test_pylance_reads_our_tag(dataset: str) -> None:
    store = open_store(dataset)
    write_tag(store, "ours", 1, _manifest_size(dataset, 1))
    write_tag(store, "ours2", 2, _manifest_size(dataset, 2), metadata={"who": "us"})
    listed = lance.dataset(dataset).tags.list()
    assert listed["ours"]["version"] == 1 and listed["ours"]["manifest_size"] == _manifest_size(dataset, 1)
    assert listed["ours"]["created_at"] == read_tag(store, "ours").created_at
    assert lance.dataset(dataset, version="ours").to_table().num_rows == 3
    assert lance.dataset(dataset, version="ours2").to_table().num_rows == 5
    # pylance can move and delete our tags, and we see the result.
    lance.dataset(dataset).tags.update("ours", 2)
    assert read_tag(store, "ours").version == 2
    lance.dataset(dataset).tags.delete("ours2")
    assert list(list_tags(store)) == ["ours"]


def test_pylance_reads_our_old_style_compatible_update(dataset: str) -> None:
    store = open_store(dataset)
    store.write(
        "_refs/tags/old.json",
        json.dumps({"branch": None, "version": 1, "manifestSize": _manifest_size(dataset, 1)}).encode(),
    )
    assert read_tag(store, "old").created_at is None
    update_tag(store, "old", 2, _manifest_size(dataset, 2))
    assert lance.dataset(dataset, version="old").version == 2
