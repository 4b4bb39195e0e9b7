"""NGRAM indices in pylance 14.0.2's format: our tokens and posting lists are pylance's (lower-case,
ASCII folding, alphanumeric trigrams, roaring treemaps without runs), and ``contains`` candidates
cover every matching row."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest

from lance_format.file.reader import LanceFileReader
from lance_format.index import ngram
from lance_format.index.store import IndexDir
from lance_format.storage import open_store

SPECIAL = ["café", "a1b2", "abc👍b!c24", "anstoß", "ABC", "ababab", "Ærøskøbing", "łódź", "ﬁle ﬂow", "Ελλάδα abc",
           "İstanbul", "Straße", "naïve résumé", "x²y³", "ŒUVRE", "Þórr", "ĳssel", None, "", "ab"]
WORDS = ["alpha", "Beta", "gamma42", "DELTA", "eps_ilon", "zeta-9", "éta", "θeta", "lambda", "Omega"]


def _texts(n: int = 3000) -> list[str | None]:
    rng = np.random.default_rng(0)
    return SPECIAL + [" ".join(rng.choice(WORDS, 5)) for _ in range(n)]


@pytest.fixture(scope="module")
def pylance_ngram(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, lance.LanceDataset]:
    uri = str(tmp_path_factory.mktemp("ng") / "ng.lance")
    ds = lance.write_dataset(pa.table({"t": pa.array(_texts())}), uri, max_rows_per_file=1000)
    ds.delete("t = 'ababab'")
    ds.create_scalar_index("t", "NGRAM")
    return uri, lance.dataset(uri)


def test_ngram_tokens_follow_upstreams_tokenizer() -> None:
    def grams(text: str) -> list[str]:
        toks, _ = ngram.tokenize(pa.array([text]), np.zeros(1, np.uint64))
        alpha = "0123456789abcdefghijklmnopqrstuvwxyz"
        return sorted("".join(alpha[(int(t) // 37**k) % 37 - 1] for k in (2, 1, 0)) for t in toks)

    # ngram.rs test_tokenizer (distinct, sorted)
    assert grams("café") == ["afe", "caf"]
    assert grams("a1b2") == ["1b2", "a1b"]
    assert grams("abc👍b!c24") == ["abc", "c24"]
    assert grams("anstoß") == ["ans", "nst", "oss", "sto", "tos"]
    assert grams("ABC") == ["abc"]


def test_ngram_file_holds_what_pylance_writes(pylance_ngram: tuple[str, lance.LanceDataset], tmp_path: object) -> None:
    uri, ds = pylance_ngram
    uuid = ds.list_indices()[0]["uuid"]
    data = ds.to_table(columns=["t"], with_row_id=True)
    tokens, postings = ngram.group_postings(*ngram.tokenize(data.column("t").combine_chunks(),
                                                             data.column("_rowid").to_numpy()))
    ngram.write_ngram(IndexDir(open_store(str(tmp_path)), "ours", "2.2"), tokens, postings)
    theirs = LanceFileReader(f"{uri}/_indices/{uuid}/{ngram.FILE}").read_all().to_table()
    ours = LanceFileReader(f"{tmp_path}/_indices/ours/{ngram.FILE}").read_all().to_table()
    assert theirs.equals(ours, check_metadata=True)


@pytest.mark.parametrize("needle", ["gamma4", "eta", "ta-9", "lambda Om", "caf", "café", "résumé", "STRA", "xyz"])
def test_ngram_contains_candidates_cover_every_matching_row(pylance_ngram: tuple[str, lance.LanceDataset],
                                                            needle: str) -> None:
    uri, ds = pylance_ngram
    index = ngram.NGramIndex(IndexDir(open_store(uri), ds.list_indices()[0]["uuid"]))
    cand = index.search_contains(needle)
    truth = ds.to_table(columns=[], filter=f"contains(t, '{needle}')", with_row_id=True).column("_rowid").to_numpy()
    if needle == "ta-9":  # no alphanumeric trigram: the index cannot tell
        assert cand is None
        return
    assert cand is not None
    assert np.isin(truth, cand).all()
    if needle == "xyz":
        assert cand.size == 0


def test_ngram_without_a_trigram_is_not_answered() -> None:
    assert ngram.query_tokens("ab") is None
    assert ngram.query_tokens("é!é") is None
    assert ngram.query_tokens("a b") is None


# --- the kind: per-task encode + write, remap -------------------------------------------------
from lance_format.index.kind import BuildContext, TrainingData  # noqa: E402
from lance_format.index.kinds import ngram as ngram_kind  # noqa: E402
from lance_format.index.predicates import Contains  # noqa: E402
from lance_format.index.remap import RowAddressMap  # noqa: E402


def test_ngram_kind_built_per_fragment_equals_pylances_file(pylance_ngram: tuple[str, lance.LanceDataset],
                                                            tmp_path: object) -> None:
    uri, ds = pylance_ngram
    ctx = BuildContext("t", pa.string(), {}, False, {})
    chunks = []
    for frag in ds.get_fragments():
        t = frag.to_table(columns=["t"], with_row_id=True)
        chunks.append(ngram_kind.KIND.encode(TrainingData(t.column("t").combine_chunks(),
                                                          t.column("_rowid").to_numpy()), None, ctx))
    out = IndexDir(open_store(str(tmp_path)), "ours", "2.2")
    ngram_kind.KIND.write(out, chunks, None, ctx)
    theirs = LanceFileReader(f"{uri}/_indices/{ds.list_indices()[0]['uuid']}/{ngram.FILE}").read_all().to_table()
    assert theirs.equals(LanceFileReader(f"{tmp_path}/_indices/ours/{ngram.FILE}").read_all().to_table())
    assert ngram_kind.KIND.answers(Contains("gamma")) and not ngram_kind.KIND.answers(Contains("ab"))


def test_ngram_kind_remap_moves_postings_and_drops_deleted_rows(tmp_path: object) -> None:
    ctx = BuildContext("t", pa.string(), {}, False, {})
    src = IndexDir(open_store(str(tmp_path)), "src", "2.2")
    ids = np.array([0, 1, 2, 1 << 32], np.uint64)
    ngram_kind.KIND.write(src, [ngram_kind.KIND.encode(
        TrainingData(pa.array(["hello", "yellow", None, "mellow"]), ids), None, ctx)], None, ctx)
    amap = RowAddressMap.from_arrays(ids, np.array([(7 << 32) + 0, 2**64 - 1, (7 << 32) + 1, (7 << 32) + 2], np.uint64))
    dst = IndexDir(open_store(str(tmp_path)), "dst", "2.2")
    ngram_kind.KIND.remap(src, dst, None, amap, {})  # type: ignore[arg-type]
    index = ngram.NGramIndex(dst)
    assert (index.search_contains("ello") == np.array([7 << 32, (7 << 32) + 2], np.uint64)).all()
    assert index.postings(np.array([0]))[0].tolist() == [(7 << 32) + 1]  # the null text, token 0
