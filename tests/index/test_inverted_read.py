"""pylance 14.0.2's INVERTED files decode here: fst token map, posting blocks, impacts, positions, analyzer."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

from lance_format.errors import NotSupportedError
from lance_format.file import LanceFileReader
from lance_format.index.inverted import fst
from lance_format.index.inverted.bm25 import doc_weight, idf
from lance_format.index.inverted.postings import (
    decode_positions,
    decode_posting,
    encode_impacts,
    encode_positions,
    encode_posting,
)
from lance_format.index.inverted.stemmer import stem
from lance_format.index.inverted.tokenizer import Analyzer, AnalyzerParams

WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "running", "runner", "runs", "cats", "cat", "café", "naïve", "Hello", "WORLD", "apple", "banana", "cherry", "data", "lance", "index", "search", "generously", "communication", "happily"]


def _texts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) for _ in range(n)]


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("inv") / "ds.lance"
    texts = _texts(3000)
    ds = lance.write_dataset(pa.table({"text": texts}), root, max_rows_per_file=1000)
    ds.create_scalar_index("text", "INVERTED", with_position=True)
    return root, texts


def _files(root: Path) -> dict[str, pa.Table]:
    seg = next((root / "_indices").iterdir())
    return {p.name: LanceFileReader(str(p)).read_all().to_table() for p in seg.iterdir()}


def test_fst_token_map_reads_and_our_map_round_trips(indexed: tuple[Path, list[str]]) -> None:
    files = _files(indexed[0])
    data = files["part_0_tokens.lance"]["_token_fst_bytes"][0].as_py()
    tokens = fst.read_map(data)
    assert len(tokens) == files["part_0_tokens.lance"]["_token_next_id"][0].as_py()
    assert sorted(tokens.values()) == list(range(len(tokens)))
    assert struct.unpack("<I", data[-4:])[0] == fst.masked_crc32c(data[:-4])
    assert fst.read_map(fst.write_map(tokens.items())) == tokens
    many = {f"tok{i:05d}{'x' * (i % 7)}": (i * 7919) % 5000 for i in range(5000)}
    assert fst.read_map(fst.write_map(many.items())) == many


def test_posting_blocks_impacts_and_positions_reencode_to_pylance_bytes(indexed: tuple[Path, list[str]]) -> None:
    files = _files(indexed[0])
    inv, docs = files["part_0_invert.lance"], files["part_0_docs.lance"]
    lens = docs["_num_tokens"].to_numpy()
    n = docs.num_rows
    avgdl = np.float32(int(docs.schema.metadata[b"total_tokens"])) / np.float32(n)
    assert max(inv["_length"].to_pylist()) > 256  # full BitPacker4x blocks and a varint tail
    for t in range(inv.num_rows):
        blocks = inv["_posting"][t].as_py()
        length = inv["_length"][t].as_py()
        ids, freqs = decode_posting(blocks, length)
        assert len(ids) == length and np.all(np.diff(ids.astype(np.int64)) > 0)
        scores = idf(length, n) * doc_weight(freqs, lens[ids], avgdl)
        assert inv["_max_score"][t].as_py() == pytest.approx(float(scores.max()), rel=1e-6)
        block_scores = [struct.unpack("<f", b[:4])[0] for b in blocks]
        assert encode_posting(ids, freqs, block_scores) == blocks
        assert encode_impacts(ids, freqs, lens[ids]) == inv["_impacts"][t].as_py()
        stream = inv["_compressed_position"][t].as_py()
        offsets = inv["_position_block_offset"][t].as_py()
        positions = decode_positions(stream, offsets, freqs)
        assert [len(p) for p in positions] == freqs.tolist()
        assert encode_positions(positions) == (stream, offsets)


def test_analyzer_gives_pylance_tokens_and_positions(indexed: tuple[Path, list[str]]) -> None:
    root, texts = indexed
    files = _files(root)
    tokens = fst.read_map(files["part_0_tokens.lance"]["_token_fst_bytes"][0].as_py())
    analyzer = Analyzer(AnalyzerParams.from_json(files["metadata.lance"].schema.metadata[b"params"].decode()))
    ours: dict[str, int] = {}
    for text in texts:
        for tok in analyzer.tokens(text):
            ours.setdefault(tok, len(ours))
    assert ours == tokens  # same tokens, ids in order of first appearance
    docs = files["part_0_docs.lance"]
    addrs = docs["_rowid"].to_numpy()
    by_addr = {(i // 1000) << 32 | (i % 1000): t for i, t in enumerate(texts)}
    assert [len(analyzer.tokens(by_addr[int(a)])) for a in addrs] == docs["_num_tokens"].to_pylist()
    inv = files["part_0_invert.lance"]
    tid = tokens["fox"]
    ids, freqs = decode_posting(inv["_posting"][tid].as_py(), inv["_length"][tid].as_py())
    positions = decode_positions(inv["_compressed_position"][tid].as_py(),
                                 inv["_position_block_offset"][tid].as_py(), freqs)
    for doc, pos in zip(ids[:50], positions[:50], strict=True):
        want = [p for t, p in analyzer.tokens_with_positions(by_addr[int(addrs[doc])]) if t == "fox"]
        assert pos.tolist() == want


@pytest.mark.parametrize("params", [
    {"stem": False, "remove_stop_words": False},
    {"base_tokenizer": "whitespace", "lower_case": False, "ascii_folding": False},
    {"base_tokenizer": "raw", "stem": False},
    {"base_tokenizer": "ngram", "stem": False, "remove_stop_words": False, "min_ngram_length": 2,
     "max_ngram_length": 4},
    {"max_token_length": 5},
])
def test_tokenizer_parameters_match_pylance(tmp_path: Path, params: dict[str, object]) -> None:
    texts = ["Straße café naïve Øresund résumé x123 42 foo_bar baz-qux it's don't",
             "The Quick brown FOX jumps over the lazy dog generously", "", "having been yourselves"]
    ds = lance.write_dataset(pa.table({"text": texts}), tmp_path / "t.lance")
    ds.create_scalar_index("text", "INVERTED", **params)
    files = _files(tmp_path / "t.lance")
    tokens = fst.read_map(files["part_0_tokens.lance"]["_token_fst_bytes"][0].as_py())
    analyzer = Analyzer(AnalyzerParams.from_json(files["metadata.lance"].schema.metadata[b"params"].decode()))
    ours: dict[str, int] = {}
    for text in texts:
        for tok in analyzer.tokens(text):
            ours.setdefault(tok, len(ours))
    assert ours == tokens


def test_porter2_stems_the_reference_vocabulary() -> None:
    cases = {"caresses": "caress", "ponies": "poni", "ties": "tie", "running": "run", "hopping": "hop",
             "generously": "generous", "communication": "communic", "happily": "happili",
             "relational": "relat", "conditional": "condit", "vietnamization": "vietnam",
             "hopefulness": "hope", "sensibiliti": "sensibl", "formalize": "formal", "adjustment": "adjust",
             "skies": "sky", "dying": "die", "succeeding": "succeed", "agreed": "agre", "crying": "cri",
             "consolingly": "consol", "knightly": "knight", "generate": "generat", "arsenal": "arsenal"}
    assert {w: stem(w) for w in cases} == cases


def test_language_model_tokenizers_are_refused() -> None:
    with pytest.raises(NotSupportedError, match="jieba"):
        Analyzer(AnalyzerParams(base_tokenizer="jieba/default"))
    with pytest.raises(NotSupportedError, match="French"):
        Analyzer(AnalyzerParams(language="French"))
