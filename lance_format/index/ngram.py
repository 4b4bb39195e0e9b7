"""NGRAM scalar index files, written and read as pylance 14.0.2 does.

Layout (``NGramIndexBuilder``, ``rust/lance-index/src/scalar/ngram.rs``; verified on files
pylance 14.0.2 writes): one file ``ngram_postings.lance`` with a row per trigram, sorted by
token: ``tokens`` (``uint32``) and ``posting_list`` (binary, field metadata
``lance-encoding:compression`` = ``none``: the row ids holding the trigram as a standard
64-bit roaring treemap). Rows whose text is null are the posting list of token 0.

Tokens: the text is lower-cased, folded to ASCII (tantivy's ``LowerCaser`` and
``AsciiFoldingFilter``), cut into every run of three characters, and a trigram is kept
only if all three are ASCII letters or digits; ``0-9`` count 1..10 and ``a-z`` 11..36, and
the token is ``c0 * 37**2 + c1 * 37 + c2``.

``contains(col, s)`` reads the posting lists of ``s``'s trigrams and intersects them: a
superset of the matching rows (the scan re-applies the filter). Only trigrams made of
ASCII characters of ``s`` are used, so the answer never depends on how a non-ASCII
character folds; a string with no such trigram is not answered by the index.
"""

from __future__ import annotations

import array
import struct
import unicodedata
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap, BitMap64

from lance_format.errors import CorruptFileError
from lance_format.index.rowset import RowDomain, fragment_of, split_by_fragment
from lance_format.index.store import IndexDir
from lance_format.table.index_metadata import IndexFile

FILE = "ngram_postings.lance"
U64 = npt.NDArray[np.uint64]
U32 = npt.NDArray[np.uint32]
#: Serialized posting lists an opened segment keeps for later queries.
POSTING_CACHE_BYTES = 16 * 1024 * 1024
#: What an opened segment holds besides its arrays (file reader, metadata), for cache accounting.
OPEN_READER_BYTES = 64 * 1024
#: Texts tokenized per vectorised pass.
_CHUNK_ROWS = 65536
SCHEMA = pa.schema([pa.field("tokens", pa.uint32()),
                    pa.field("posting_list", pa.binary(), False, metadata={"lance-encoding:compression": "none"})])

# byte -> trigram digit (1..36), 0 for anything that is not an ASCII letter or digit (after lower-casing)
_CODE = np.zeros(256, np.uint32)
_CODE[np.frombuffer(b"0123456789", np.uint8)] = np.arange(1, 11, dtype=np.uint32)
_CODE[np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", np.uint8)] = np.arange(11, 37, dtype=np.uint32)
_CODE[np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", np.uint8)] = np.arange(11, 37, dtype=np.uint32)
_CODE16 = _CODE.astype(np.uint16)

#: Letters the Unicode decomposition does not reduce to ASCII but tantivy's folding does.
_SPECIAL = {"ß": "ss", "æ": "ae", "œ": "oe", "ø": "o", "đ": "d", "ð": "d", "ł": "l", "þ": "th", "ı": "i",
            "ŀ": "l", "ħ": "h", "ŧ": "t", "ĸ": "q", "ŉ": "'n", "ſ": "s", "ƀ": "b", "ɨ": "i", "ʉ": "u",
            "ĳ": "ij", "ǆ": "dz", "ǉ": "lj", "ǌ": "nj", "ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi",
            "ﬄ": "ffl", "ﬅ": "st", "ﬆ": "st"}


def _fold_char(ch: str) -> str:
    if ch in _SPECIAL:
        return _SPECIAL[ch]
    base = "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
    # A character that does not fold to ASCII stays one non-alphanumeric place in the text.
    return base if base and base.isascii() else "\x00"


def fold(text: str) -> bytes:
    """``text`` lower-cased and folded to ASCII; characters without an ASCII form become ``\\x00``."""
    low = text.lower()
    return "".join(c if c.isascii() else _fold_char(c) for c in low).encode("ascii", "replace")


def _trigrams(data: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64]) -> tuple[U32, npt.NDArray[np.int64]]:
    """``(token, string index)`` of every alphanumeric trigram of the strings ``data[offsets[i]:offsets[i+1]]``.

    Pairs come in text order (string index non-decreasing).
    """
    n = offsets.size - 1
    if data.size < 3 or n <= 0:
        return np.empty(0, np.uint32), np.empty(0, np.int64)
    code = _CODE16[data]  # 16-bit arithmetic: the largest token, 37**3 - 1, fits
    ok = (code[:-2] > 0) & (code[1:-1] > 0) & (code[2:] > 0)
    # A trigram starting one or two bytes before a string's end runs into the next string.
    for back in (1, 2):
        cross = offsets[1:] - back
        ok[cross[(cross >= 0) & (cross < ok.size)]] = False
    # Computed at every position, then masked: three contiguous passes beat three gathers.
    every = code[:-2] * np.uint16(37 * 37) + code[1:-1] * np.uint16(37) + code[2:]
    owner = np.repeat(np.arange(n, dtype=np.int32), np.diff(offsets))[:-2]  # string holding each byte
    return every[ok].astype(np.uint32), owner[ok].astype(np.int64)


def tokenize(values: pa.Array, ids: U64) -> tuple[U32, U64]:
    """Every distinct ``(token, row id)`` pair of a text column (null texts give token 0), by token then id.

    ASCII texts are cut in one vectorised pass over the column's bytes; only texts with
    other characters are folded one by one first.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    values = values.cast(pa.large_string())
    ids = np.asarray(ids, dtype=np.uint64)
    nulls = values.is_null().to_numpy(zero_copy_only=False) if values.null_count else np.zeros(len(values), bool)
    ascii_ = pc.fill_null(pc.string_is_ascii(values), True).to_numpy(zero_copy_only=False)
    parts_t: list[U32] = []
    parts_r: list[npt.NDArray[np.int64]] = []  # the row (index into ``values``) of each token
    plain_rows = np.flatnonzero(ascii_ & ~nulls)
    plain = values if plain_rows.size == len(values) else values.take(pa.array(plain_rows))
    other = np.flatnonzero(~ascii_ & ~nulls)
    for arr, rows in ((plain, plain_rows), (_folded(values, other), other)):
        for a in range(0, len(arr), _CHUNK_ROWS):  # bounded memory: positions are 8 bytes per text byte
            t, i = _chunk_trigrams(arr.slice(a, _CHUNK_ROWS))
            parts_t.append(t)
            parts_r.append(rows[a:a + _CHUNK_ROWS][i])
    if nulls.any():
        parts_t.append(np.zeros(int(nulls.sum()), np.uint32))
        parts_r.append(np.flatnonzero(nulls))
    if not parts_t:
        return np.empty(0, np.uint32), np.empty(0, np.uint64)
    tok: U32 = np.concatenate(parts_t)
    row = np.concatenate(parts_r)
    if bool(np.all(ids[1:] >= ids[:-1])):
        # Ids ascend with rows: sorting ``token << 32 | row`` as one integer (numpy's fastest
        # sort) orders the pairs by token, then id, and equal pairs become neighbours.
        key = tok.astype(np.uint64)
        key <<= np.uint64(32)
        key |= row.view(np.uint64)  # row indices are never negative
        key.sort()
        key = key[np.r_[True, key[1:] != key[:-1]]]
        rows_sorted = (key & np.uint64(0xFFFFFFFF)).view(np.int64)
        key >>= np.uint64(32)
        return key.astype(np.uint32), ids[rows_sorted]
    rid = ids[row]
    order = np.lexsort((rid, tok))
    tok, rid = tok[order], rid[order]
    keep = np.ones(tok.size, bool)
    keep[1:] = (tok[1:] != tok[:-1]) | (rid[1:] != rid[:-1])
    return tok[keep], rid[keep]


def _chunk_trigrams(arr: pa.Array) -> tuple[U32, npt.NDArray[np.int64]]:
    if len(arr) == 0:
        return np.empty(0, np.uint32), np.empty(0, np.int64)
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], np.int64, len(arr) + 1, arr.offset * 8)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.empty(0, np.uint8)
    lo, hi = int(offsets[0]), int(offsets[-1])
    return _trigrams(data[lo:hi], offsets - lo)


def _folded(values: pa.Array, rows: npt.NDArray[np.int64]) -> pa.Array:
    texts = values.take(pa.array(rows)).to_pylist() if rows.size else []
    return pa.array([fold(s) for s in texts], pa.large_binary())  # one step per non-ASCII text


def query_tokens(substr: str) -> U32 | None:
    """Distinct tokens every row containing ``substr`` holds, ``None`` if there are none.

    Only trigrams of ASCII characters of ``substr`` are taken: they stay adjacent and
    unchanged (but for case) whatever the text around them folds to.
    """
    runs = [r for r in "".join(c if c.isascii() else "\x00" for c in substr).split("\x00") if len(r) >= 3]
    if not runs:
        return None
    arr = pa.array([r.lower() for r in runs], pa.large_string())
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], np.int64, len(arr) + 1)
    toks, _ = _trigrams(np.frombuffer(bufs[2], np.uint8), offsets)
    return np.unique(toks) if toks.size else None


def group_postings(tokens: U32, ids: U64) -> tuple[U32, list[U64]]:
    """Sorted distinct tokens and each one's sorted row ids (input sorted by token, then id)."""
    if tokens.size == 0:
        return tokens, []
    starts = np.concatenate(([0], np.flatnonzero(tokens[1:] != tokens[:-1]) + 1))
    stops = np.append(starts[1:], tokens.size)
    return tokens[starts], [ids[a:b] for a, b in zip(starts.tolist(), stops.tolist(), strict=True)]


def treemap_bytes(ids: U64) -> bytes:
    """Sorted unique ids as a 64-bit roaring treemap (``RoaringTreemap::serialize_into``).

    A ``u64`` count of 32-bit bitmaps, then per high half ascending its ``u32`` value and a
    portable 32-bit bitmap of the low halves, written without run containers as the Rust
    builder leaves them (pyroaring's ``BitMap64`` would pick runs).
    """
    parts = split_by_fragment(ids)
    out = [struct.pack("<Q", len(parts))]
    for high, low in parts:
        out.append(struct.pack("<I", high))
        # pyroaring copies an ``array.array`` in one call; a numpy array goes value by value.
        out.append(BitMap(array.array("I", low.astype("<u4").tobytes()), optimize=False).serialize())
    return b"".join(out)


def write_ngram(out: IndexDir, tokens: U32, postings: list[U64]) -> tuple[IndexFile, ...]:
    """Write ``ngram_postings.lance`` from sorted tokens and each one's sorted row ids."""
    blobs = [treemap_bytes(p) for p in postings]  # one step per token (at most 37**3)
    table = pa.table({"tokens": pa.array(tokens, pa.uint32()), "posting_list": pa.array(blobs, pa.binary())},
                     schema=SCHEMA)
    return (out.write(FILE, table),)


def merge_sorted_pairs(parts: list[tuple[U32, U64]]) -> tuple[U32, U64]:
    """Pairs of several build tasks (each by token, then id; tasks hold distinct rows) as one such list.

    When the tasks' id ranges do not overlap, a stable radix sort by token of the tasks taken
    in id order keeps ids ascending within each token; otherwise a full sort.
    """
    parts = [p for p in parts if p[0].size]
    if not parts:
        return np.empty(0, np.uint32), np.empty(0, np.uint64)
    if len(parts) == 1:
        return parts[0]
    parts.sort(key=lambda p: int(p[1].min()))
    lows = np.array([int(p[1].min()) for p in parts[1:]], np.uint64)
    highs = np.array([int(p[1].max()) for p in parts[:-1]], np.uint64)
    tok: U32 = np.concatenate([p[0] for p in parts])
    ids: U64 = np.concatenate([p[1] for p in parts]).astype(np.uint64)
    if bool(np.all(highs < lows)):
        order = np.argsort(tok.astype(np.uint16), kind="stable")
    else:
        order = np.lexsort((ids, tok))
    return tok[order], ids[order]


def merge_postings(a: tuple[U32, list[U64]], b: tuple[U32, list[U64]]) -> tuple[U32, list[U64]]:
    """The union of two sets of postings (an old segment and new rows)."""
    tok = np.concatenate([np.repeat(a[0], [p.size for p in a[1]]), np.repeat(b[0], [p.size for p in b[1]])])
    ids = np.concatenate([*a[1], *b[1]]) if a[1] or b[1] else np.empty(0, np.uint64)
    order = np.lexsort((ids, tok))
    tok, ids = tok[order].astype(np.uint32), ids[order].astype(np.uint64)
    keep = np.ones(tok.size, bool)
    keep[1:] = (tok[1:] != tok[:-1]) | (ids[1:] != ids[:-1])
    return group_postings(tok[keep], ids[keep])


class NGramIndex:
    """An opened NGRAM segment: the token list in memory, a posting list read when a query needs it.

    Args:
        index_dir: The segment's directory.
        domain: Ids the segment may hold (checked on every posting list read), unchecked when ``None``.
    """

    def __init__(self, index_dir: IndexDir, domain: RowDomain | None = None):
        probe = index_dir.reader(FILE)
        self._where = probe.path
        if probe.schema.names[:2] != ["tokens", "posting_list"]:
            raise CorruptFileError(f"{self._where}: expected columns tokens, posting_list")
        col = index_dir.reader(FILE, ["tokens"]).read_all(batch_size=1 << 20).to_table().column("tokens")
        if col.null_count:
            raise CorruptFileError(f"{self._where}: a null token")
        self.tokens: U32 = col.to_numpy().astype(np.uint32)
        if self.tokens.size > 1 and not bool(np.all(self.tokens[1:] > self.tokens[:-1])):
            raise CorruptFileError(f"{self._where}: tokens are not sorted and distinct")
        self._lists = index_dir.reader(FILE, ["posting_list"])
        self._domain = domain
        # Posting lists read by earlier queries (token position -> bitmap), up to POSTING_CACHE_BYTES
        # of serialized lists: a long-lived process asks for the same trigrams again.
        self._cached: dict[int, BitMap64] = {}
        self._cached_bytes = 0

    @property
    def nbytes(self) -> int:
        """Memory this object may hold (tokens and the posting-list cache at its limit)."""
        return int(self.tokens.nbytes) + POSTING_CACHE_BYTES + OPEN_READER_BYTES

    @property
    def path(self) -> str:
        """URI of ``ngram_postings.lance``."""
        return self._where

    @property
    def num_ngrams(self) -> int:
        """Distinct tokens (the null token included)."""
        return int(self.tokens.size)

    def _bitmaps(self, which: npt.NDArray[np.int64], cache: bool = False) -> list[BitMap64]:
        """The posting lists of the tokens at positions ``which`` (roaring bitmaps; callers do not modify them).

        With ``cache`` (queries), lists read before are reused and new ones kept while the
        cache has room.
        """
        if which.size == 0:
            return []
        wanted = which.tolist()
        missing = sorted({i for i in wanted if i not in self._cached}) if cache else wanted
        got: dict[int, BitMap64] = {}
        if missing:
            blobs = self._lists.take_rows(np.array(missing, np.int64), batch_size=1 << 20).to_table()
            for i, blob in zip(missing, blobs.column("posting_list").to_pylist(), strict=True):
                try:
                    got[i] = BitMap64.deserialize(blob)
                except (ValueError, TypeError, OverflowError) as exc:
                    raise CorruptFileError(f"{self._where}: unreadable posting list of token {i}: {exc}") from exc
                if cache and self._cached_bytes + len(blob) <= POSTING_CACHE_BYTES:
                    self._cached[i] = got[i]
                    self._cached_bytes += len(blob)
        return [got[i] if i in got else self._cached[i] for i in wanted]

    def postings(self, which: npt.NDArray[np.int64]) -> list[U64]:
        """Row ids of the tokens at positions ``which``."""
        out: list[U64] = []
        for i, bm in zip(which.tolist(), self._bitmaps(which), strict=True):
            ids = np.array(bm.to_array(), np.uint64)
            _check_ids(ids, self._domain, f"{self._where} token {int(self.tokens[i])}")
            out.append(ids)
        return out

    def search_contains(self, substr: str) -> U64 | None:
        """Candidate row ids for ``contains(col, substr)``, ``None`` if the index cannot tell."""
        toks = query_tokens(substr)
        if toks is None:
            return None
        pos = np.searchsorted(self.tokens, toks)
        pos_c = np.minimum(pos, max(self.tokens.size - 1, 0))
        if self.tokens.size == 0 or not bool(np.all(self.tokens[pos_c] == toks)):
            return np.empty(0, np.uint64)  # a trigram no row holds
        # Intersected as roaring bitmaps, smallest first: a frequent trigram's list can hold most
        # rows, and converting it to an array and sorting it again would cost far more.
        lists = sorted(self._bitmaps(pos_c.astype(np.int64), cache=True), key=len)
        acc = lists[0]
        for other in lists[1:]:
            if not acc:
                break
            acc = acc & other
        out = np.array(acc.to_array(), np.uint64)
        _check_ids(out, self._domain, f"{self._where} query {substr!r}")
        return out

    def read_all(self) -> tuple[U32, list[U64]]:
        """Every token with its row ids."""
        return self.tokens, self.postings(np.arange(self.tokens.size, dtype=np.int64))


def _check_ids(ids: U64, domain: RowDomain | None, where: str) -> None:
    if domain is None or ids.size == 0:
        return
    if domain.next_row_id is not None:
        if int(ids[-1]) >= domain.next_row_id:
            raise CorruptFileError(f"{where}: row id {int(ids[-1])} was never handed out")
        return
    frags = fragment_of(ids)
    for frag in np.unique(frags).tolist():
        covered = domain.fragments is None or frag in domain.fragments
        rows: Callable[[int], int | None] = domain.fragment_rows
        n = rows(int(frag))
        if covered and n is not None:
            top = int(ids[frags == frag].max() & np.uint64(0xFFFFFFFF))
            if top >= n:
                raise CorruptFileError(f"{where}: row {frag}:{top} is past the fragment's {n} rows")
