"""The text analyzer of an INVERTED index, as pylance builds it from the index's ``params``.

``InvertedIndexParams::build`` (``rust/lance-index/src/scalar/inverted/tokenizer.rs``) chains a
tantivy base tokenizer and its filters in this order: ``RemoveLongFilter(max_token_length)``
(keeps tokens shorter than the limit, in bytes), ``LowerCaser``, ``Stemmer(language)``,
``StopWordFilter(language)`` (applied to the *stemmed* token) and ``AsciiFoldingFilter``. Base
tokenizers: ``simple`` (runs of alphanumeric characters), ``whitespace``, ``raw`` (the whole
text) and ``ngram`` (character n-grams). Language-model tokenizers (``jieba/*``, ``lindera/*``)
and stemmers or stop words of other languages are refused.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import NotSupportedError
from lance_format.index.inverted.stemmer import stem

#: tantivy's English stop words (``StopWordFilter::new(Language::English)``), as pylance 14.0.2
#: removes them: every word of the Snowball and NLTK lists was indexed and these are the ones dropped.
_ENGLISH_STOP_TEXT = """
a about above after again against all am an and any are as at be because been before being below
between both but by can did do does doing down during each few for from further had has have
having he he'd he'll he's her here hers herself him himself his how i i'd i'll i'm i've if in
into is it it's its itself just me more most my myself now of off on once only or other our ours
ourselves out over own re same she she'd she'll she's should should've so some such than that
the their theirs them themselves then there these they they'd they'll they're they've this those
through to too under until up very was we we'd we'll we're we've were what when where which
while who whom why will with you you'd you'll you're you've your yours yourself yourselves
"""
ENGLISH_STOP_WORDS = frozenset(_ENGLISH_STOP_TEXT.split())

#: What separates the ``simple`` tokenizer's tokens (RE2 syntax, for Arrow's regex kernels): anything
#: but letters and digits. One pattern for queries, builds and flat searches, so they split alike.
SEPARATOR = r"[^\p{L}\p{N}]+"
#: Letters NFKD does not take apart, folded as Lucene's ASCIIFoldingFilter (tantivy's source) does.
_FOLD_EXTRA = str.maketrans({
    "ß": "ss", "æ": "ae", "Æ": "AE", "ø": "o", "Ø": "O", "œ": "oe", "Œ": "OE", "đ": "d", "Đ": "D",
    "ł": "l", "Ł": "L", "þ": "th", "Þ": "TH", "ð": "d", "Ð": "D", "ı": "i", "ĸ": "q", "ŀ": "l",
    "Ŀ": "L", "ŉ": "'n", "ſ": "s", "ƒ": "f", "ħ": "h", "Ħ": "H", "ŧ": "t", "Ŧ": "T",
    "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-",
})


@lru_cache(maxsize=65536)
def ascii_fold(token: str) -> str:
    """Latin letters with diacritics as their plain ASCII letters (other characters kept)."""
    if token.isascii():
        return token
    out = []
    for ch in token.translate(_FOLD_EXTRA):
        if ch.isascii():
            out.append(ch)
            continue
        base = "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
        out.append(base if base and base.isascii() else ch)
    return "".join(out)


def _whole(text: str) -> list[str]:
    return [text]


_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")


def _simple(text: str) -> list[str]:
    if text.isascii():  # the same split without compiling SEPARATOR for one short string
        return _ASCII_WORD.findall(text)
    return [p for p in pc.split_pattern_regex(pa.array([text]), SEPARATOR)[0].as_py() if p]


def is_text_type(typ: pa.DataType) -> bool:
    """Whether an INVERTED index takes a column of ``typ``: strings, or lists of strings."""
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        typ = typ.value_type
    return bool(pa.types.is_string(typ) or pa.types.is_large_string(typ))


def document_texts(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Each row's document text: a string as it is, a list of strings as its elements joined by a space.

    pylance 14.0.2 indexes a ``list<string>`` row as one document whose token stream runs on
    from one element into the next (a phrase may span two elements, the ``ngram`` tokenizer
    sees the joining space, null elements are skipped, empty ones kept); joining the non-null
    elements with one space reproduces that for every base tokenizer (checked against pylance
    in ``tests/index/test_inverted_list_columns.py``). A null list is a null text.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not (pa.types.is_list(values.type) or pa.types.is_large_list(values.type)):
        return values
    flat = values.flatten()  # honours the slice offset and skips what null lists hide
    valid = flat.is_valid()
    parents = pc.list_parent_indices(values).filter(valid).to_numpy()
    counts = np.bincount(parents, minlength=len(values))
    offsets = pa.array(np.r_[0, np.cumsum(counts)], pa.int64())
    lists = pa.LargeListArray.from_arrays(offsets, flat.filter(valid), mask=values.is_null())
    return pc.binary_join(lists, pa.scalar(" ", lists.type.value_type))


@dataclass(frozen=True)
class AnalyzerParams:
    """The tokenizer parameters pylance records in ``metadata.lance`` (``params``)."""

    base_tokenizer: str = "simple"
    language: str = "English"
    with_position: bool = False
    max_token_length: int | None = 40
    lower_case: bool = True
    stem: bool = True
    remove_stop_words: bool = True
    custom_stop_words: tuple[str, ...] | None = None
    ascii_folding: bool = True
    min_ngram_length: int = 3
    max_ngram_length: int = 3
    prefix_only: bool = False
    lance_tokenizer: str = "text"

    @classmethod
    def from_json(cls, text: str) -> AnalyzerParams:
        """Parse the ``params`` metadata value."""
        raw: Mapping[str, Any] = json.loads(text)
        return cls.from_mapping(raw)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> AnalyzerParams:
        """Parameters from a mapping of pylance's names (unknown names ignored)."""
        words = raw.get("custom_stop_words")
        return cls(
            base_tokenizer=str(raw.get("base_tokenizer", "simple")),
            language=str(raw.get("language", "English")),
            with_position=bool(raw.get("with_position", False)),
            max_token_length=None if raw.get("max_token_length", 40) is None else int(raw.get("max_token_length", 40)),
            lower_case=bool(raw.get("lower_case", True)),
            stem=bool(raw.get("stem", True)),
            remove_stop_words=bool(raw.get("remove_stop_words", True)),
            custom_stop_words=None if words is None else tuple(str(w) for w in words),
            ascii_folding=bool(raw.get("ascii_folding", True)),
            min_ngram_length=int(raw.get("min_ngram_length", 3)),
            max_ngram_length=int(raw.get("max_ngram_length", 3)),
            prefix_only=bool(raw.get("prefix_only", False)),
            lance_tokenizer=str(raw.get("lance_tokenizer") or "text"),
        )

    def to_json(self) -> str:
        """The ``params`` value pylance 14.0.2 writes (same keys, same order)."""
        return json.dumps({
            "lance_tokenizer": self.lance_tokenizer, "base_tokenizer": self.base_tokenizer,
            "language": self.language, "with_position": self.with_position,
            "max_token_length": self.max_token_length, "lower_case": self.lower_case, "stem": self.stem,
            "remove_stop_words": self.remove_stop_words,
            "custom_stop_words": None if self.custom_stop_words is None else list(self.custom_stop_words),
            "ascii_folding": self.ascii_folding, "min_ngram_length": self.min_ngram_length,
            "max_ngram_length": self.max_ngram_length, "prefix_only": self.prefix_only, "block_size": 128,
            "split_identifiers": False, "split_on_numerics": False, "preserve_original": False,
            "index_operators": False,
        }, separators=(",", ":"))


class Analyzer:
    """Turns a text into its tokens (with positions) as pylance's analyzer does.

    Raises:
        NotSupportedError: a tokenizer, stemmer or stop-word list we cannot reproduce exactly.
    """

    def __init__(self, params: AnalyzerParams):
        self.params = params
        base = params.base_tokenizer
        if base not in ("simple", "whitespace", "raw", "ngram"):
            raise NotSupportedError(
                f"INVERTED index base_tokenizer={base!r} is not supported (simple, whitespace, raw and ngram are); "
                "ICU segmentation, the code analyzer and language-model tokenizers such as jieba and lindera "
                "cannot be reproduced exactly")
        if params.lance_tokenizer not in ("text",):
            raise NotSupportedError(f"INVERTED index lance_tokenizer={params.lance_tokenizer!r} is not supported "
                                    "(only 'text': string and list-of-string columns)")
        self._stem = params.stem
        if self._stem and params.language != "English":
            raise NotSupportedError(
                f"INVERTED index option stem=True with language={params.language!r} is not supported: only the "
                "English stemmer is reproduced exactly; pass stem=False to index unstemmed tokens")
        self._stop: frozenset[str] = frozenset()
        if params.remove_stop_words:
            if params.custom_stop_words is not None:
                self._stop = frozenset(params.custom_stop_words)
            elif params.language == "English":
                self._stop = ENGLISH_STOP_WORDS
            else:
                raise NotSupportedError(
                    f"INVERTED index option remove_stop_words=True with language={params.language!r} is not "
                    "supported: only the English stop-word list is reproduced exactly; pass custom_stop_words=[...] "
                    "or remove_stop_words=False")
        splitters: dict[str, Callable[[str], list[str]]] = {
            "simple": _simple, "whitespace": str.split, "raw": _whole, "ngram": self._ngrams,
        }
        self._split = splitters[base]

    def _ngrams(self, text: str) -> list[str]:
        lo, hi = self.params.min_ngram_length, self.params.max_ngram_length
        out = []
        starts = range(1) if self.params.prefix_only else range(len(text))
        for i in starts:
            for n in range(lo, hi + 1):
                if i + n > len(text):
                    break
                out.append(text[i:i + n])
        return out

    def filter(self, token: str) -> str | None:
        """One raw token through the filters (``None``: removed)."""
        p = self.params
        if p.max_token_length is not None and len(token.encode("utf-8")) >= p.max_token_length:
            return None
        if p.lower_case:
            token = token.lower()
        if self._stem:
            token = stem(token)
        if token in self._stop:
            return None
        if p.ascii_folding:
            token = ascii_fold(token)
        return token

    def tokens(self, text: str) -> list[str]:
        """The tokens of ``text`` in order."""
        out = []
        for raw in self._split(text):
            tok = self.filter(raw)
            if tok is not None:
                out.append(tok)
        return out

    def tokens_with_positions(self, text: str) -> list[tuple[str, int]]:
        """The tokens of ``text`` with their positions (a removed token still takes its position)."""
        out = []
        for pos, raw in enumerate(self._split(text)):
            tok = self.filter(raw)
            if tok is not None:
                out.append((tok, pos))
        return out
