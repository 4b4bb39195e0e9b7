"""The vectorised INVERTED paths agree with the one-list-at-a-time reference code, and queries reuse opened segments."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.index.inverted import bulk, encode, postings
from lance_format.index.inverted.bm25 import FlatDocs
from lance_format.index.inverted.tokenizer import Analyzer, AnalyzerParams
from lance_format.index.store import IndexDir
from lance_format.search.fulltext import _exact_phrase, _phrase_at

pytestmark = pytest.mark.filterwarnings("ignore")
PIECES = ["Fox", "fox", "foxes", "running", "the", "Café", "cafe", "naïve", "x" * 45, "a1b2", "ÆON", "über",
          "don't", "e-mail", "42", "日本語", "ǅemal", ""]
SEPS = [" ", "  ", ",", "--", "\t", "\n", "._", "!? "]


def _texts(n: int, seed: int) -> list[str | None]:
    rng = random.Random(seed)
    out: list[str | None] = []
    for _ in range(n):
        k = rng.randint(0, 15)
        out.append("".join(rng.choice(PIECES) + rng.choice(SEPS) for _ in range(k)))
    out[1] = None
    out[2] = ""
    return out


@pytest.mark.parametrize("params", [{}, {"stem": False, "lower_case": False}, {"remove_stop_words": False,
                                    "ascii_folding": False, "max_token_length": 5}])
def test_bulk_tokenizing_gives_the_tokens_of_row_by_row_analysis(params: dict[str, object]) -> None:
    analyzer = Analyzer(AnalyzerParams.from_mapping(params))
    texts = _texts(500, 1)
    stream = bulk.tokenize_column(pa.array(texts, pa.string()), analyzer)
    got = [(int(r), stream.tokens[int(t)], int(p))
           for r, t, p in zip(stream.rows, stream.token_ids, stream.positions, strict=True)]
    want = [(i, tok, pos) for i, text in enumerate(texts) if text
            for tok, pos in analyzer.tokens_with_positions(text)]
    assert got == want
    first_seen = list(dict.fromkeys(tok for _, tok, _ in want))
    assert stream.tokens == first_seen


def test_flat_documents_hold_the_row_by_row_postings() -> None:
    analyzer = Analyzer(AnalyzerParams(with_position=True))
    texts = _texts(300, 2)
    flat = FlatDocs.build(analyzer, np.arange(300, dtype=np.uint64), pa.array(texts, pa.string()), True)
    want: dict[str, list[tuple[int, list[int]]]] = {}
    for i, text in enumerate(texts):
        per: dict[str, list[int]] = {}
        for tok, pos in analyzer.tokens_with_positions(text or ""):
            per.setdefault(tok, []).append(pos)
        for tok, plist in per.items():
            want.setdefault(tok, []).append((i, plist))
        assert flat.lengths[i] == sum(len(p) for p in per.values())
    assert set(flat.postings) == set(want)
    for tok, docs in want.items():
        ids, freqs = flat.postings[tok]
        assert ids.tolist() == [d for d, _ in docs]
        assert freqs.tolist() == [len(p) for _, p in docs]
        assert [p.tolist() for p in flat.positions[tok]] == [p for _, p in docs]


def test_partition_encoding_equals_the_per_list_encoders() -> None:
    rng = np.random.default_rng(3)
    num_docs = 9000
    doc_len = rng.integers(1, 300, num_docs).astype(np.uint32)
    sizes = [1, 5, 127, 128, 129, 300, 4096, 4097, 8500]
    tok, doc, freq = [], [], []
    for t, k in enumerate(sizes):
        d = np.sort(rng.choice(num_docs, k, replace=False)).astype(np.uint32)
        tok.append(np.full(k, t, np.int64))
        doc.append(d)
        freq.append(rng.integers(1, np.minimum(doc_len[d], 200) + 1).astype(np.uint32))
    tok_a, doc_a, freq_a = np.concatenate(tok), np.concatenate(doc), np.concatenate(freq)
    lens = doc_len[doc_a]
    scores = rng.random(tok_a.size).astype(np.float32)
    positions = [np.sort(rng.choice(int(ln) + 50, int(f), replace=False)).astype(np.uint32)
                 for f, ln in zip(freq_a, lens, strict=True)]
    bounds = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    got = encode.encode_partition(tok_a, bounds, doc_a, freq_a, lens, scores, np.concatenate(positions))
    for t in range(len(sizes)):
        a, b = int(bounds[t]), int(bounds[t + 1])
        block_scores = [float(scores[i:min(i + 128, b)].max()) for i in range(a, b, 128)]
        assert got[0][t] == postings.encode_posting(doc_a[a:b], freq_a[a:b], block_scores)
        assert got[1][t] == np.float32(max(block_scores))
        assert got[2][t] == postings.encode_impacts(doc_a[a:b], freq_a[a:b], lens[a:b])
        stream, offs = postings.encode_positions(positions[a:b])
        assert got[3][t] == stream and got[4][t].tolist() == offs
        ids, fr = encode.decode_full_blocks(pa.array(got[0][t][:(b - a) // 128], pa.large_binary()))
        full = (b - a) // 128 * 128
        assert ids.tolist() == doc_a[a:a + full].tolist() and fr.tolist() == freq_a[a:a + full].tolist()


def test_a_repeated_query_reads_no_index_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    texts = _texts(2000, 4)
    uri = str(tmp_path / "t.lance")
    ds = lance_format.write_dataset(pa.table({"id": range(2000), "text": pa.array(texts, pa.string())}), uri)
    ds.create_scalar_index("text", "INVERTED")
    ds = lance_format.dataset(uri)
    first = ds.to_table(full_text_query="fox cafe", columns=["id"], limit=20)
    opened: list[str] = []
    original = IndexDir.reader

    def counting(self: IndexDir, name: str, columns: list[str] | None = None):  # type: ignore[no-untyped-def]
        opened.append(name)
        return original(self, name, columns)

    monkeypatch.setattr(IndexDir, "reader", counting)
    again = lance_format.dataset(uri).to_table(full_text_query="fox cafe", columns=["id"], limit=20)
    assert again.equals(first)
    assert opened == []


@pytest.mark.parametrize(("tokens", "offs"), [(["a", "b"], [0, 1]), (["a", "a"], [0, 2]),
                                            (["a", "b", "a", "c"], [0, 1, 3, 4]), (["a", "b", "c"], [0, 2, 3])])
def test_exact_phrase_rows_hold_every_walk_match_and_equal_it_for_two_tokens(tokens: list[str],
                                                                          offs: list[int]) -> None:
    rng = np.random.default_rng(5)
    docs = {t: {r: np.unique(rng.integers(0, 12, rng.integers(1, 6))).astype(np.uint32) for r in range(1000)}
            for t in set(tokens)}

    class Stub:
        def position_pairs(self, token: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            per = docs[token]
            r = [np.full(len(per[int(x)]), x, np.uint64) for x in rows]
            return np.concatenate(r), np.concatenate([per[int(x)] for x in rows]).astype(np.int64)

    got = _exact_phrase(Stub(), tokens, offs, np.arange(1000, dtype=np.uint64)).tolist()  # type: ignore[arg-type]
    want = [r for r in range(1000) if _phrase_at([docs[t][r] for t in tokens], offs, 0)]
    assert want and set(want) <= set(got)
    if len(tokens) == 2:
        assert got == want
