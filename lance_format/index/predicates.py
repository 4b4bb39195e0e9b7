"""What an index is asked: a value range, a value list, "is null", a substring or list membership.

These are the leaves of an index query (``ScalarIndexExpr`` in
``rust/lance-index/src/scalar/expression.rs`` plays the same role upstream).
Literals are Arrow scalars already cast to the column type.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.arrays import FALSE_SCALAR


@dataclass(frozen=True)
class Range:
    """``lo <(=) value <(=) hi``; a ``None`` bound is open. ``=`` is ``lo == hi``, both inclusive."""

    lo: pa.Scalar | None = None
    lo_inclusive: bool = True
    hi: pa.Scalar | None = None
    hi_inclusive: bool = True

    def describe(self, column: str) -> str:
        """SQL-like text for ``explain_plan``."""
        if self.lo is not None and self.hi is not None and self.lo == self.hi and self.lo_inclusive \
                and self.hi_inclusive:
            return f"{column} = {self.lo.as_py()}"
        parts = []
        if self.lo is not None:
            parts.append(f"{column} {'>=' if self.lo_inclusive else '>'} {self.lo.as_py()}")
        if self.hi is not None:
            parts.append(f"{column} {'<=' if self.hi_inclusive else '<'} {self.hi.as_py()}")
        return " AND ".join(parts) or f"{column} IS NOT NULL"


@dataclass(frozen=True)
class In:
    """``value IN (values)``."""

    values: tuple[pa.Scalar, ...]

    def describe(self, column: str) -> str:
        """SQL-like text for ``explain_plan``."""
        return f"{column} IN ({', '.join(str(v.as_py()) for v in self.values)})"


@dataclass(frozen=True)
class IsNull:
    """``value IS NULL``."""

    def describe(self, column: str) -> str:
        """SQL-like text for ``explain_plan``."""
        return f"{column} IS NULL"


@dataclass(frozen=True)
class Prefix(Range):
    """``starts_with(column, prefix)`` / ``column LIKE 'prefix%'`` as the value range it covers.

    Every string starting with ``prefix`` lies in ``[prefix, successor)``, where the successor
    has the last character that can grow one code point higher (UTF-8 orders as code points), and
    nothing else does; so an ordered index answers it as a :class:`Range` holding exactly those
    values. Build it with :meth:`of`.
    """

    prefix: str = ""

    @classmethod
    def of(cls, prefix: str, typ: pa.DataType) -> Prefix:
        """The range of strings of type ``typ`` starting with ``prefix`` (non-empty)."""
        upper = _successor(prefix)
        return cls(pa.scalar(prefix, typ), True, None if upper is None else pa.scalar(upper, typ), False, prefix)

    def describe(self, column: str) -> str:
        """pylance's ``column LIKE 'prefix%'``."""
        return f"{column} LIKE '{self.prefix}%'"


def _successor(prefix: str) -> str | None:
    """The smallest string above every string starting with ``prefix``; ``None`` if there is none."""
    chars = list(prefix)
    while chars:
        code = ord(chars[-1]) + 1
        if 0xD800 <= code <= 0xDFFF:  # surrogates are no characters of a valid string
            code = 0xE000
        if code <= 0x10FFFF:
            chars[-1] = chr(code)
            return "".join(chars)
        chars.pop()  # U+10FFFF cannot grow: the bound moves to the character before
    return None


ValueQuery = Range | In | IsNull


@dataclass(frozen=True)
class Contains:
    """``contains(column, substring)`` on a string column (answered by NGRAM indices)."""

    substring: str

    def describe(self, column: str) -> str:
        """SQL-like text for ``explain_plan``."""
        return f"contains({column}, {self.substring!r})"


def _list_text(values: tuple[pa.Scalar, ...]) -> str:
    return ", ".join("" if not v.is_valid else str(v.as_py()) for v in values)


@dataclass(frozen=True)
class HasAny:
    """``array_has_any(column, [values])`` on a list column (a null value matches null elements)."""

    values: tuple[pa.Scalar, ...]

    def describe(self, column: str) -> str:
        """pylance's ``array_has_any(column, List([a, b]))``."""
        return f"array_has_any({column}, List([{_list_text(self.values)}]))"


@dataclass(frozen=True)
class HasAll:
    """``array_has_all(column, [values])`` on a list column (a null value matches null elements)."""

    values: tuple[pa.Scalar, ...]

    def describe(self, column: str) -> str:
        """pylance's ``array_has_all(column, List([a, b]))``."""
        return f"array_has_all({column}, List([{_list_text(self.values)}]))"


@dataclass(frozen=True)
class TokensContains:
    """``contains_tokens(column, 'words')`` (answered by suitable INVERTED indices, re-checked by the scan)."""

    text: str

    def describe(self, column: str) -> str:
        """pylance's ``contains_tokens(column, Utf8("words"))``."""
        return f'contains_tokens({column}, Utf8("{self.text}"))'


#: Every question an index leaf may carry.
IndexQuery = ValueQuery | Contains | HasAny | HasAll | TokensContains




def value_mask(values: pa.Array, query: ValueQuery) -> pa.Array:
    """Boolean mask of ``values`` matching ``query`` (nulls never match a Range or In).

    Floating NaN is treated as matching every Range and In: SQL here orders NaN above
    every number while Arrow comparisons say false, so the index keeps those rows and
    the filter evaluated on the fetched rows decides.
    """
    if isinstance(query, IsNull):
        return pc.is_null(values)
    if isinstance(query, In):
        # from the scalars themselves: pa.array(<Python list>) imports pandas on a first query
        value_set = [pa.repeat(v, 1).cast(values.type) for v in query.values]
        mask = pc.is_in(values, value_set=pa.concat_arrays(value_set) if value_set else pa.nulls(0, values.type))
    else:
        mask = pc.is_valid(values)
        if query.lo is not None:
            mask = pc.and_(mask, (pc.greater_equal if query.lo_inclusive else pc.greater)(values, query.lo))
        if query.hi is not None:
            mask = pc.and_(mask, (pc.less_equal if query.hi_inclusive else pc.less)(values, query.hi))
    if pa.types.is_floating(values.type):
        mask = pc.or_kleene(mask, pc.is_nan(values))
    return pc.fill_null(mask, FALSE_SCALAR)  # a Python False would become pa.scalar(False): a pandas import
