"""The table layer's fast paths give the same results as the plain ones.

Covers: the trusted "latest version" of a commit going stale, decoded-fragment reuse
and per-object encoding, the batched delete (matches spanning evaluation chunks),
the per-handle deletion-vector cache and the cached ``versions()`` statistics.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_format
import lance_format.table.delete as delete_pipeline
from lance_format.storage import open_store
from lance_format.table.codec.fragments import fragment_bytes, fragment_to_pb, fragments_from_pb
from lance_format.table.codec.manifest import (
    decode_manifest,
    encode_manifest_decoded,
    manifest_message,
    version_info,
)
from lance_format.table.commit import commit_transaction
from lance_format.table.naming import NamingScheme
from lance_format.table.transaction import LanceOperation, Transaction
from lance_format.table.versions import find_latest, load_manifest


def _table(start: int, rows: int) -> pa.Table:
    ids = np.arange(start, start + rows, dtype=np.int64)
    return pa.table({"id": ids, "s": pa.array([f"r{i}" for i in ids])})


def _dataset(path: Path, frags: int, rows: int) -> str:
    uri = str(path / "t.lance")
    lance_format.write_dataset(_table(0, rows), uri, mode="create")
    for i in range(1, frags):
        lance_format.write_dataset(_table(i * rows, rows), uri, mode="append")
    return uri


def test_stale_observed_latest_retries_and_checks_conflicts(tmp_path: Path) -> None:
    uri = _dataset(tmp_path, 2, 5)
    store = open_store(uri)
    base = load_manifest(store, 2)
    frags = lance_format.write_fragments(_table(100, 5), uri)
    # Someone else commits version 3 after we looked.
    lance_format.write_dataset(_table(200, 5), uri, mode="append")
    txn = Transaction(2, LanceOperation.Append(frags))
    found = find_latest(store)
    assert found is not None and found[0] == 3
    manifest = commit_transaction(store, txn, base=base, observed=(2, found[2]))
    assert manifest.version == 4
    ds = lance_format.dataset(uri)
    assert ds.version == 4
    assert sorted(ds.to_table()["id"].to_pylist()) == sorted([*range(10), *range(100, 105), *range(200, 205)])
    assert [f.fragment_id for f in ds.get_fragments()] == [0, 1, 2, 3]


def test_observed_scheme_is_used_for_the_first_attempt(tmp_path: Path) -> None:
    uri = str(tmp_path / "v1.lance")
    lance_format.write_dataset(_table(0, 3), uri, mode="create", enable_v2_manifest_paths=False)
    lance_format.write_dataset(_table(3, 3), uri, mode="append")
    names = sorted(p.name for p in (tmp_path / "v1.lance" / "_versions").glob("*.manifest"))
    assert names == ["1.manifest", "2.manifest"]
    assert find_latest(open_store(uri)) is not None
    assert find_latest(open_store(uri))[2] is NamingScheme.V1  # type: ignore[index]


def test_decoded_fragments_are_shared_and_equal(tmp_path: Path) -> None:
    uri = _dataset(tmp_path, 3, 4)
    store = open_store(uri)
    a = load_manifest(store, 2)
    b = load_manifest(store, 3)
    assert a.fragments[0] is b.fragments[0]  # same bytes -> same model
    fresh = fragments_from_pb(manifest_message(store.read(find_latest(store)[1]), "x")[0].fragments, "x")  # type: ignore[index]
    assert fresh == b.fragments
    for frag in b.fragments:
        assert fragment_bytes(frag) == fragment_to_pb(frag).SerializeToString()
        assert fragment_bytes(frag) is fragment_bytes(frag)
        clone = pickle.loads(pickle.dumps(frag))
        assert clone == frag and "_wire" not in clone.__dict__


def test_manifest_round_trip_with_cached_encodings(tmp_path: Path) -> None:
    uri = _dataset(tmp_path, 3, 4)
    m = load_manifest(open_store(uri))
    data, _decoded = encode_manifest_decoded(m, b"")
    again = decode_manifest(data, "x")
    assert again.fragments == m.fragments
    assert version_info(data, "x").summary == m.summary()


@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 20])
def test_batched_delete_matches_per_fragment_delete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     chunk: int) -> None:
    monkeypatch.setattr(delete_pipeline, "DELETE_CHUNK_ROWS", chunk)
    uri = _dataset(tmp_path, 4, 10)
    ds = lance_format.dataset(uri)
    ds.delete("id % 4 = 0")
    # Fragment 2 loses every row; others keep some.
    out = ds.delete("id % 3 = 0 OR (id >= 20 AND id < 30)")
    expected = [i for i in range(40) if i % 4 and i % 3 and not 20 <= i < 30]
    assert out["num_deleted_rows"] == 30 - len(expected)
    fresh = lance_format.dataset(uri)
    assert fresh.to_table()["id"].to_pylist() == expected
    assert [f.fragment_id for f in fresh.get_fragments()] == [0, 1, 3]


def test_batched_delete_by_row_id(tmp_path: Path) -> None:
    uri = _dataset(tmp_path, 3, 5)
    ds = lance_format.dataset(uri)
    addr = (1 << 32) + 2
    assert ds.delete(f"_rowid = {addr} OR id = 0")["num_deleted_rows"] == 2
    assert lance_format.dataset(uri).to_table()["id"].to_pylist() == [i for i in range(15) if i not in (0, 7)]


def test_deletion_vectors_cached_per_handle(tmp_path: Path) -> None:
    uri = _dataset(tmp_path, 2, 10)
    lance_format.dataset(uri).delete("id % 2 = 1")
    ds = lance_format.dataset(uri)
    first = ds.to_table()
    frag = ds.manifest.fragments[0]
    vec = ds._ctx.deleted_offsets(frag)
    assert vec is ds._ctx.deleted_offsets(frag)
    assert not vec.flags.writeable
    assert ds.to_table().equals(first)
    assert ds.take([0, 5]).column("id").to_pylist() == [0, 10]


def test_decoded_models_have_every_field(tmp_path: Path) -> None:
    import dataclasses

    from lance_format.table.models import DataFile, DeletionFile, FragmentMetadata

    uri = _dataset(tmp_path, 2, 4)
    lance_format.dataset(uri).delete("id = 1")
    m = load_manifest(open_store(uri))
    frag = next(f for f in m.fragments if f.deletion_file is not None)
    for obj, cls in ((frag, FragmentMetadata), (frag.files[0], DataFile), (frag.deletion_file, DeletionFile)):
        names = {f.name for f in dataclasses.fields(cls)}
        assert names <= set(vars(obj)), f"{cls.__name__} decoder misses {names - set(vars(obj))}"
        assert obj == dataclasses.replace(obj)  # type: ignore[type-var]


def test_pickled_manifest_encodes_the_same(tmp_path: Path) -> None:
    uri = _dataset(tmp_path, 3, 4)
    m = load_manifest(open_store(uri))
    clone = pickle.loads(pickle.dumps(m))
    assert encode_manifest_decoded(clone, b"t")[0] == encode_manifest_decoded(m, b"t")[0]
    import dataclasses

    plain = m.replace(fragments=tuple(dataclasses.replace(f) for f in m.fragments))  # no cached encodings
    assert encode_manifest_decoded(plain, b"t")[0] == encode_manifest_decoded(m, b"t")[0]


def test_written_manifest_reuse_is_exact_and_checks_bytes(tmp_path: Path) -> None:
    from lance_format.table.versions import read_manifest

    uri = _dataset(tmp_path, 3, 4)
    store = open_store(uri)
    found = find_latest(store)
    assert found is not None
    data = store.read(found[1])
    reused = read_manifest(store, found[1])
    fresh = decode_manifest(data, "x")
    assert reused == fresh
    assert reused.transaction_bytes == fresh.transaction_bytes
    assert encode_manifest_decoded(reused, b"t")[0] == encode_manifest_decoded(fresh, b"t")[0]
    # Different bytes at the same key (a dataset recreated elsewhere and copied in): decoded anew.
    other = _dataset(tmp_path / "o", 1, 2)
    other_store = open_store(other)
    other_found = find_latest(other_store)
    assert other_found is not None
    (tmp_path / "t.lance" / found[1]).write_bytes(other_store.read(other_found[1]))
    assert len(read_manifest(store, found[1]).fragments) == 1


def test_commit_results_match_a_fresh_decode(tmp_path: Path) -> None:
    import dataclasses

    from lance_format.table.versions import read_manifest

    uri = _dataset(tmp_path, 2, 4)
    ds = lance_format.dataset(uri)
    [frag] = lance_format.write_fragments(_table(50, 3), uri)
    # A size of 0 means "unknown": decoding turns it into None; the reused manifest must too.
    odd = dataclasses.replace(frag, files=(dataclasses.replace(frag.files[0], file_size_bytes=0),))
    ds = lance_format.LanceDataset.commit(ds, LanceOperation.Append([odd]), read_version=ds.version)
    ds.delete("id = 1")  # commits again from the handle's (committed, not decoded) manifest
    store = open_store(uri)
    found = find_latest(store)
    assert found is not None and found[0] == 4
    reused = read_manifest(store, found[1])
    assert reused == decode_manifest(store.read(found[1]), "x")
    assert [f.files[0].file_size_bytes is None for f in reused.fragments] == [False, False, True]
    assert sorted(lance_format.dataset(uri).to_table()["id"].to_pylist()) == [0, 2, 3, 4, 5, 6, 7, 50, 51, 52]
