"""A small parser for the common filter shapes, so they never pay for importing sqlglot.

Importing sqlglot costs ~0.15-0.2 s in a fresh process, more than a filtered count of a
million rows takes. :func:`parse_simple` reads comparisons of columns and literals
(``=``, ``!=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``) with ``+ - * / %`` arithmetic,
``IS [NOT] NULL``, ``IS [NOT] TRUE/FALSE``, ``[NOT] IN (literals)``, ``[NOT] BETWEEN``,
``[NOT] [I]LIKE 'pattern'`` (no ``ESCAPE``, no backslash), combined with ``AND``,
``OR``, ``NOT`` and parentheses, and builds the expression through the same :class:`~lance_format.sql_core.Semantics`
as the sqlglot translator (:mod:`lance_format.sql`), mirroring how that translator sees
the sqlglot tree (operator precedence, where AND/OR chains flatten). Anything else, and
anything that would be an error, returns ``None``: the caller then uses the full
translator, which gives the answer or the error message. So this module changes speed,
never results (``tests/test_sql_fast.py`` checks both parsers agree on many filters).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.sql_core import ChainTooLongError, Semantics, _is_string, _Val

__all__ = ["parse_simple"]

#: Words sqlglot's tokenizer or parser treats specially (its ``Tokenizer.KEYWORDS`` and
#: ``Parser.NO_PAREN_FUNCTION_PARSERS``, sqlglot 30): an unquoted column with such a name
#: goes to the full translator. ``tests/test_sql_fast.py`` checks this list still covers them.
_RESERVED_WORDS = """
ALL ALTER ANALYZE AND ANTI ANY APPLY ARRAY AS ASC ASOF AUTOINCREMENT AUTO_INCREMENT BEGIN BETWEEN
BIGDECIMAL BIGINT BIGNUM BIGNUMERIC BINARY BIT BLOB BOOL BOOLEAN BPCHAR BYTE BYTEA CACHE CALL CASE
CHAR CHARACTER CLOB COLLATE COLUMN COMMENT COMMIT CONNECT_BY_ROOT CONSTRAINT COPY CREATE CROSS CUBE
CURRENT_CATALOG CURRENT_DATE CURRENT_SCHEMA CURRENT_TIME CURRENT_TIMESTAMP CURRENT_USER DATABASE
DATE DATEMULTIRANGE DATERANGE DATETIME DEC DECFLOAT DECIMAL DECIMAL128 DECIMAL256 DECIMAL32
DECIMAL64 DEFAULT DELETE DESC DESCRIBE DISTINCT DIV DOUBLE DROP ELSE END ENUM ESCAPE EXCEPT EXECUTE
EXISTS EXPLAIN FALSE FETCH FILE FILTER FIRST FIXED FLOAT FLOAT4 FLOAT8 FOR FORMAT FROM FULL FUNCTION
GEOGRAPHY GEOMETRY GLOB GRANT HAVING HUGEINT IF ILIKE IN INDEX INET INNER INSERT INT INT1 INT128
INT16 INT2 INT256 INT32 INT4 INT4MULTIRANGE INT4RANGE INT64 INT8 INT8MULTIRANGE INT8RANGE INTEGER
INTERSECT INTERVAL INTO IS ISNULL JOIN JSON JSONB KEEP KILL LATERAL LEFT LIKE LIMIT LIST LOAD
LOCALTIME LOCALTIMESTAMP LOCK LONG LONGBLOB LONGTEXT LONGVARCHAR MAP MEDIUMBLOB MEDIUMINT MEDIUMTEXT
MERGE NAMESPACE NATURAL NCHAR NEXT NOT NOTNULL NULL NULLABLE NUMBER NUMERIC NUMMULTIRANGE NUMRANGE
NVARCHAR NVARCHAR2 OBJECT OFFSET ON OPERATOR OPTIMIZE OR ORDINALITY OUT OUTER OVER OVERLAPS
OVERWRITE PARTITION PARTITIONED_BY PERCENT PIVOT PRAGMA PREPARE PROCEDURE QUALIFY RANGE REAL
RECURSIVE REF REFERENCES REGEXP RENAME REPLACE RETURNING REVOKE RIGHT RLIKE ROLLBACK ROLLUP ROW ROWS
SCHEMA SELECT SEMI SEQUENCE SESSION SESSION_USER SET SETTINGS SHORT SHOW SMALLINT SOME STR
STRAIGHT_JOIN STRING STRUCT TABLE TABLESAMPLE TEMP TEMPORARY TEXT THEN TIME TIMESTAMP TIMESTAMPLTZ
TIMESTAMPNTZ TIMESTAMPTZ TIMESTAMP_LTZ TIMESTAMP_NTZ TIMETZ TIME_NS TINYBLOB TINYINT TINYTEXT
TRIGGER TRUE TRUNCATE TSMULTIRANGE TSRANGE TSTZMULTIRANGE TSTZRANGE UHUGEINT UINT UINT128 UINT256
UNCACHE UNION UNIQUE UNKNOWN UNNEST UNPIVOT UPDATE USE USING UUID VACUUM VALUES VARBINARY VARCHAR
VARCHAR2 VARIANT VECTOR VIEW VOLATILE WHEN WHERE WINDOW WITH XOR
"""
RESERVED = frozenset(_RESERVED_WORDS.split())
#: The keywords this parser understands (every other reserved word gives up).
_KEYWORDS = frozenset({"AND", "OR", "NOT", "IS", "IN", "NULL", "TRUE", "FALSE", "BETWEEN", "LIKE", "ILIKE"})
_ARITH = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide", "%": "remainder"}
_CMP = {"=": "equal", "!=": "not_equal", "<>": "not_equal", "<": "less", "<=": "less_equal",
        ">": "greater", ">=": "greater_equal"}
# ASCII names and numbers only, not glued to what follows (``1_000``, ``0x10``, ``1.2.3``,
# ``naïve`` or ``a$b`` mean other things to sqlglot, or need its Unicode rules).
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?![\w$])")
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?(?![\w.$])")
_SPACE = " \t\r\n"


class _GiveUp(Exception):
    """The text is outside the supported subset."""


@dataclass(frozen=True)
class _Tok:
    kind: str  # "kw" (value upper-cased), "op", "num", "str", "ident", or "eof"
    value: str


def _tokenize(text: str, names: frozenset[str]) -> list[_Tok]:
    toks: list[_Tok] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in _SPACE:
            i += 1
        elif ch in "(),.":
            toks.append(_Tok("op", ch))
            i += 1
        elif ch in "<>=!":
            two = text[i:i + 2]
            if two in ("<=", ">=", "<>", "!="):
                if text[i + 2:i + 3] in ("=", ">"):  # "<=>", ">==", ...: not ours
                    raise _GiveUp
                toks.append(_Tok("op", two))
                i += 2
            elif ch in "<>=" and text[i + 1:i + 2] not in ("=", ">", "<", "!"):
                toks.append(_Tok("op", ch))
                i += 1
            else:
                raise _GiveUp  # "==", "!" alone, "=>", ...
        elif ch in "-+*/%":
            if text[i:i + 2] in ("--", "/*", "*/"):  # comments
                raise _GiveUp
            toks.append(_Tok("op", ch))
            i += 1
        elif "0" <= ch <= "9":
            m = _NUMBER.match(text, i)
            if m is None:
                raise _GiveUp
            toks.append(_Tok("num", m.group()))
            i = m.end()
        elif ch == "'":
            value, i = _quoted(text, i, "'", doubled_ok=True)
            toks.append(_Tok("str", value))
        elif ch in '"`':
            value, i = _quoted(text, i, ch, doubled_ok=False)
            after_dot = bool(toks) and toks[-1] == _Tok("op", ".")
            if ch == '"' and not after_dot and value not in names:
                # A double-quoted word naming no column is a string (as the full translator reads it).
                toks.append(_Tok("str", value))
            else:
                toks.append(_Tok("ident", value))
        else:
            m = _WORD.match(text, i)
            if m is None:
                raise _GiveUp
            word = m.group()
            upper = word.upper()
            if upper in _KEYWORDS:
                toks.append(_Tok("kw", upper))
            elif upper in RESERVED:
                raise _GiveUp
            else:
                toks.append(_Tok("ident", word))
            i = m.end()
    toks.append(_Tok("eof", ""))
    return toks


def _quoted(text: str, start: int, quote: str, *, doubled_ok: bool) -> tuple[str, int]:
    """The content of the quoted token at ``start`` and the index after it."""
    parts: list[str] = []
    i = start + 1
    while True:
        end = text.find(quote, i)
        if end < 0:
            raise _GiveUp  # unterminated
        parts.append(text[i:end])
        if text[end + 1:end + 2] == quote:  # a doubled quote inside
            if not doubled_ok:
                raise _GiveUp
            parts.append(quote)
            i = end + 2
            continue
        value = "".join(parts)
        if "\\" in value or (not value and quote != "'"):
            raise _GiveUp  # escape rules differ between dialects: leave them to sqlglot
        return value, end + 1


class _Parser:
    """Recursive descent over the tokens, calling the shared semantics."""

    def __init__(self, toks: list[_Tok], sem: Semantics) -> None:
        self.toks = toks
        self.pos = 0
        self.sem = sem

    def peek(self) -> _Tok:
        return self.toks[self.pos]

    def take(self) -> _Tok:
        tok = self.toks[self.pos]
        self.pos += 1
        return tok

    def accept(self, kind: str, value: str) -> bool:
        tok = self.toks[self.pos]
        if tok.kind == kind and tok.value == value:
            self.pos += 1
            return True
        return False

    def expect(self, kind: str, value: str) -> None:
        if not self.accept(kind, value):
            raise _GiveUp

    def parse(self) -> _Val:
        val = self.chain("OR")
        if self.peek().kind != "eof":
            raise _GiveUp
        return val

    def chain(self, word: str) -> _Val:
        # One AND (OR) chain outside parentheses is what the full translator flattens
        # into one balanced combination; a parenthesized chain is a single term of it.
        items = [self.chain("AND") if word == "OR" else self.negation()]
        while self.accept("kw", word):
            items.append(self.chain("AND") if word == "OR" else self.negation())
        if len(items) == 1:
            return items[0]
        if self.sem.chain_too_long(len(items), word) is not None:
            raise _GiveUp
        return self.sem.combine(items, "or_kleene" if word == "OR" else "and_kleene", word)

    def negation(self) -> _Val:
        # sqlglot reads NOT's operand at equality level: it binds looser than a comparison,
        # IS or IN and tighter than AND.
        if self.accept("kw", "NOT"):
            return self.sem.logical_not(self.negation())
        return self.predicate()

    def predicate(self) -> _Val:
        left = self.term()
        tok = self.peek()
        if tok.kind == "op" and tok.value in _CMP:
            self.pos += 1
            return self.sem.compare(_CMP[tok.value], left, self.term())
        if self.accept("kw", "IS"):
            negate = self.accept("kw", "NOT")
            target = self.take()
            if target == _Tok("kw", "NULL"):
                out = self.sem.is_null(left, negate=False)
            elif target in (_Tok("kw", "TRUE"), _Tok("kw", "FALSE")):
                out = self.sem.is_truth(left, target.value == "TRUE", negate=False)
            else:
                raise _GiveUp
            return self.sem.logical_not(out) if negate else out  # sqlglot wraps IS in NOT
        negate = self.accept("kw", "NOT")
        if self.accept("kw", "IN"):
            self.expect("op", "(")
            items = [self.literal()]
            while self.accept("op", ","):
                items.append(self.literal())
            self.expect("op", ")")
            out = self.sem.in_list(left, items, negate=False)
            return self.sem.logical_not(out) if negate else out  # sqlglot wraps IN in NOT
        if self.accept("kw", "BETWEEN"):
            low = self.term()
            self.expect("kw", "AND")
            out = self.sem.between(left, low, self.term(), negate=False)
            return self.sem.logical_not(out) if negate else out  # and BETWEEN
        tok = self.peek()
        if tok.kind == "kw" and tok.value in ("LIKE", "ILIKE"):
            self.pos += 1
            pattern = self.take()
            if pattern.kind != "str" or not _is_string(left.type):
                raise _GiveUp
            out = self.sem._call("match_like", [left], pattern=pattern.value, ignore_case=tok.value == "ILIKE")
            return self.sem.negated(negate, out)  # NOT LIKE is the negate flag of LIKE itself
        if negate:
            raise _GiveUp
        return left

    def term(self) -> _Val:
        return self.arithmetic("+-", self.factor)

    def factor(self) -> _Val:
        return self.arithmetic("*/%", self.unary)

    def arithmetic(self, ops: str, operand: Any) -> _Val:
        # Left-associative, as sqlglot's _parse_term / _parse_factor build it.
        val: _Val = operand()
        while (tok := self.peek()).kind == "op" and tok.value in ops and tok.value:
            self.pos += 1
            left, right = self.sem._decimal_operands(val, operand())
            val = self.sem._call(_ARITH[tok.value], [left, right])
        return val

    def unary(self) -> _Val:
        if self.accept("op", "-"):
            return self.sem.negative(self.unary())
        return self.operand()

    def operand(self) -> _Val:
        if self.accept("op", "("):
            val = self.chain("OR")
            self.expect("op", ")")
            return val
        if self.peek().kind == "ident":
            path = [self.take().value]
            while self.accept("op", "."):
                tok = self.take()
                if tok.kind != "ident":
                    raise _GiveUp
                path.append(tok.value)
            return self.sem.column(path)
        return self.literal()

    def literal(self) -> _Val:
        tok = self.take()
        if tok.kind == "num":
            return self.sem.number(tok.value)
        if tok.kind == "str":
            return self.sem.string(tok.value)
        if tok == _Tok("op", "-") and self.peek().kind == "num":
            return self.sem.negative(self.sem.number(self.take().value))
        if tok.kind == "kw" and tok.value in ("TRUE", "FALSE"):
            return self.sem.boolean(tok.value == "TRUE")
        if tok == _Tok("kw", "NULL"):
            return self.sem.null()
        raise _GiveUp


def parse_simple(text: str, schema: pa.Schema) -> pc.Expression | None:
    """The filter expression of ``text``, or ``None`` when the full translator must read it.

    Args:
        text: A SQL predicate.
        schema: The Arrow schema the filter runs against.

    Returns:
        Exactly the expression :func:`lance_format.sql.parse_filter` returns for ``text``,
        or ``None`` for text outside the supported shapes and for text that is an error
        (the full translator then reports it).
    """
    result: Any = None
    try:
        toks = _tokenize(text, frozenset(schema.names))
        sem = Semantics(schema, text)
        result = sem.finish(_Parser(toks, sem).parse())
    except ChainTooLongError:  # the full translator would refuse it too, after a much slower parse
        raise
    except Exception:  # any doubt (syntax, types, nesting depth): the full translator decides
        return None
    return result
