"""The fast paths compaction's rewrite and index remap run through give the bytes the reference paths give.

* ``encode.pack_many`` (every full INVERTED posting block of a partition at once, what the
  remap re-encodes) equals ``postings.pack_block`` (one block, the reference) for every width,
  and a partition's impacts (Pareto frontiers, found by marking cells when documents are
  short) equal ``postings.encode_impacts``;
* FSST pages of compaction-sized fragments decode one code at a time (no 65536-entry pair
  table built per page), and a pair table built already is still used; both equal the
  one-code path;
* a compaction's row-address map (every row of each rewritten fragment) translates index row
  ids by fragment offset, as the binary search over the whole map does;
* an INVERTED partition whose tokens all keep a document is remapped with its token map reused
  (one that lost a token gets a new map); pylance answers from both as from its own compaction.
"""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.file.v2_1 import fsst
from lance_format.index.inverted import builder, encode, postings
from lance_format.index.remap import RowAddressMap
from lance_format.index.rowset import fragment_of


def _blocks(rng: np.random.Generator) -> np.ndarray:
    rows = []
    for w in range(33):
        r = rng.integers(0, 1 << w, (4, 128), dtype=np.uint64).astype(np.uint32) if w else np.zeros((4, 128),
                                                                                                        np.uint32)
        if w:
            r[:, rng.integers(0, 128)] = (1 << w) - 1  # the width is reached
        rows.append(r)
    out = np.concatenate(rows)
    rng.shuffle(out)
    return out


def test_pack_many_equals_the_one_block_reference_for_every_width() -> None:
    rows = _blocks(np.random.default_rng(1))
    buf, offs = encode.pack_many(rows)
    assert offs.size == len(rows) + 1 and offs[-1] == buf.size
    for i, row in enumerate(rows):
        assert buf[offs[i]:offs[i + 1]].tobytes() == postings.pack_block(row)


def test_pack_many_round_trips_through_unpack_many(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(encode, "_BATCH", 7)  # several batches per width
    rows = _blocks(np.random.default_rng(2))
    buf, offs = encode.pack_many(rows)
    back = encode.unpack_many(buf, offs[:-1] + 1, buf[offs[:-1]].astype(np.int64))
    assert np.array_equal(back, rows)
    empty, eoffs = encode.pack_many(np.zeros((0, 128), np.uint32))
    assert empty.size == 0 and eoffs.tolist() == [0]


def _table_and_codes(n_codes: int) -> tuple[fsst.SymbolTable, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n_codes)
    n = 200
    lens = rng.integers(1, 9, n).astype(np.uint8)
    symbols = rng.integers(0, 255, (n, 8), dtype=np.uint8)
    head = ((0x46535354 << 32) | (1 << 24) | n).to_bytes(8, "little")
    table = fsst.SymbolTable(head + symbols.reshape(-1).tobytes() + lens.tobytes())
    codes = rng.integers(0, n, n_codes).astype(np.uint8)  # escape-free
    offsets = np.unique(np.r_[0, rng.integers(0, n_codes, n_codes // 7), n_codes]).astype(np.int64)
    return table, codes, offsets


def test_a_compaction_sized_fsst_page_builds_no_pair_table() -> None:
    table, codes, offsets = _table_and_codes(70_000)  # ~10k strings of the benchmark's text column
    want = fsst._decode(table, codes, offsets, False)
    got = fsst._decode(table, codes, offsets)
    assert not table.has_pairs(False)  # decoded without building one
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_a_built_pair_table_is_still_used_and_agrees() -> None:
    table, codes, offsets = _table_and_codes(70_001)
    want = fsst._decode(table, codes, offsets, False)
    table.pairs(False)
    twin = fsst.SymbolTable(bytes(_raw(table)))
    assert twin.has_pairs(False)  # found in the process-wide cache
    for t in (table, twin):
        got = fsst._decode(t, codes, offsets)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def _raw(table: fsst.SymbolTable) -> bytes:
    head = ((0x46535354 << 32) | (1 << 24) | table.n).to_bytes(8, "little")
    return head + table.symbols[:table.n].tobytes() + table.lens[:table.n].tobytes()


def _addr(frag: int, offsets: np.ndarray) -> np.ndarray:
    return (np.uint64(frag) << np.uint64(32)) + offsets.astype(np.uint64)


def test_row_address_map_of_whole_fragments_translates_as_the_search_does() -> None:
    """A compaction's map (every row of each fragment) is looked up by offset; same answer as the search."""
    rng = np.random.default_rng(5)
    old = np.concatenate([_addr(f, np.arange(n)) for f, n in ((2, 300), (3, 1), (7, 500))])
    new = _addr(9, np.arange(old.size))
    new[rng.random(old.size) < 0.2] = np.uint64(2**64 - 1)  # deleted before the compaction
    perm = rng.permutation(old.size)
    amap = RowAddressMap.from_arrays(old[perm], new[perm])
    assert amap._dense is not None
    ids = np.concatenate([old[rng.integers(0, old.size, 2000)],
                          _addr(4, np.arange(5)),  # a fragment the compaction did not touch: kept
                          _addr(2, np.arange(300, 305)),  # past a rewritten fragment's rows: dropped
                          _addr(8, np.arange(3))])
    rng.shuffle(ids)
    searched = RowAddressMap(amap.old, amap.new)
    searched.__dict__["_dense"] = None  # the general path
    got, want = amap.translate(ids), searched.translate(ids)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert not got[1][np.isin(ids, _addr(2, np.arange(300, 305)))].any()
    assert got[1][fragment_of(ids) == 4].all()


def test_row_address_map_with_gaps_uses_the_search() -> None:
    amap = RowAddressMap.of({int(_addr(1, np.array([0]))[0]): 5, int(_addr(1, np.array([2]))[0]): None})
    assert amap._dense is None
    got = amap.translate(_addr(1, np.arange(3)))
    assert got[0].tolist() == [5] and got[1].tolist() == [True, False, False]


def test_impacts_of_short_documents_equal_the_per_list_encoder() -> None:
    """Short documents (few distinct frequency/length pairs) take the marking path of the frontier."""
    rng = np.random.default_rng(8)
    num_docs = 20_000
    doc_len = rng.integers(1, 6, num_docs).astype(np.uint32)
    sizes = [1, 128, 129, 4097, 9000, 300]
    tok, doc, freq = [], [], []
    for t, k in enumerate(sizes):
        d = np.sort(rng.choice(num_docs, k, replace=False)).astype(np.uint32)
        tok.append(np.full(k, t, np.int64))
        doc.append(d)
        freq.append(rng.integers(1, doc_len[d] + 1).astype(np.uint32))
    tok_a, doc_a, freq_a = np.concatenate(tok), np.concatenate(doc), np.concatenate(freq)
    lens = doc_len[doc_a]
    scores = rng.random(tok_a.size).astype(np.float32)
    bounds = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    got = encode.encode_partition(tok_a, bounds, doc_a, freq_a, lens, scores, None)
    for t in range(len(sizes)):
        a, b = int(bounds[t]), int(bounds[t + 1])
        assert got[2][t] == postings.encode_impacts(doc_a[a:b], freq_a[a:b], lens[a:b])
        block_scores = [float(scores[i:min(i + 128, b)].max()) for i in range(a, b, 128)]
        assert got[0][t] == postings.encode_posting(doc_a[a:b], freq_a[a:b], block_scores)


def _text_table(n: int) -> pa.Table:
    rng = np.random.default_rng(9)
    words = np.array([f"w{i}" for i in range(40)])
    texts = [" ".join(words[rng.integers(0, 40, 3)]) for _ in range(n)]
    texts[5] = "rareword w1"  # the only document holding "rareword"
    return pa.table({"id": pa.array(np.arange(n), pa.int64()), "text": pa.array(texts)})


def _scores(uri: str, query: str) -> dict[int, float]:
    t = lance.dataset(uri).to_table(full_text_query=query, columns=["id"])
    return dict(zip(t["id"].to_pylist(), t["_score"].to_pylist(), strict=True))


@pytest.mark.parametrize("deleted", ["id % 7 = 1", "id % 7 = 1 OR id = 5"])
def test_inverted_remap_answers_as_pylance_compaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      deleted: str) -> None:
    ours, theirs = str(tmp_path / "ours.lance"), str(tmp_path / "theirs.lance")
    for uri in (ours, theirs):
        lance.write_dataset(_text_table(3000), uri, max_rows_per_file=300)
        lance.dataset(uri).create_scalar_index("text", "INVERTED")
        lance.dataset(uri).delete(deleted)
    built: list[int] = []
    write_map = builder.fst.write_map
    monkeypatch.setattr(builder.fst, "write_map", lambda items: built.append(1) or write_map(items))
    lance_format.dataset(ours).optimize.compact_files()
    monkeypatch.undo()
    assert bool(built) == ("id = 5" in deleted)  # a new token map only when "rareword" went
    lance.dataset(theirs).optimize.compact_files()
    ds = lance.dataset(ours)
    assert {f.fragment_id for f in ds.get_fragments()} <= set(ds.list_indices()[0]["fragment_ids"])
    for q in ("rareword", "w1", "w7 w30", "w39"):
        got, want = _scores(ours, q), _scores(theirs, q)
        assert set(got) == set(want)
        for k, v in want.items():
            assert got[k] == pytest.approx(v, rel=1e-5)
    assert (_scores(ours, "rareword") == {}) == ("id = 5" in deleted)
