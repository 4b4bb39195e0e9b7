"""The sqlglot-free filter parser gives the full translator's answer, or none at all."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

from lance_format.errors import InvalidInputError
from lance_format.sql import _LanceSql, _parse_with_sqlglot, parse_filter
from lance_format.sql_fast import RESERVED, parse_simple
from lance_format.sql_program import filter_table, program_for

NAN = float("nan")
_ARITHMETIC = re.compile(r"[\w)]\s*[-+*/%]|-\s*[a-z(]")


def _table() -> pa.Table:
    """Few rows, every troublesome value: NULL, NaN, -0.0, int64/uint64 limits, quotes."""
    return pa.table({
        "id": pa.array(range(9), pa.int64()),
        "i": pa.array([1, None, -3, 0, 2**20, -(2**20), 7, 2, 0], pa.int64()),
        "i8": pa.array([1, 2, None, -4, 5, 127, -128, 0, 3], pa.int8()),
        "u64": pa.array([0, 1, 2**64 - 1, None, 2**63, 5, 7, 2**63 - 1, 3], pa.uint64()),
        "f": pa.array([1.5, None, NAN, -2.0, 0.0, -0.0, 0.9, 1e300, -NAN], pa.float64()),
        "g": pa.array([NAN, 1.0, 2.0, None, -1.5, 0.5, 0.1, 0.0, 3.0], pa.float32()),
        "s": pa.array(["apple", "it's", None, "", "Banana", 'say "hi"', "a%b", "NaN", "1.5"]),
        "ls": pa.array(["x", None, "y", "x", "", "z", "x", "y", None], pa.large_string()),
        "b": pa.array([True, False, None, True, False, None, True, False, True]),
        "dct": pa.array(["u", "v", None, "u", "w", "v", "u", None, "w"]).dictionary_encode(),
        "st": pa.array([{"a": 1}, {"a": None}, None, {"a": 4}, {"a": 5}, {"a": 1}, None, {"a": 2}, {"a": 0}]),
        "Mixed": pa.array([3, 1, 4, 1, 5, 9, 2, 6, 5], pa.int32()),
        "date": pa.array([1, 2, 3, 4, 5, 6, 7, 8, 9], pa.int16()),  # named like a keyword
        "weird col": pa.array([0, 1, 0, 1, 0, 1, 0, 1, 0], pa.int64()),
        "CaseA": pa.array([1, 2, 3, 4, 5, 6, 7, 8, 9], pa.int64()),
        "casea": pa.array([9, 8, 7, 6, 5, 4, 3, 2, 1], pa.int64()),
    })


TABLE = _table()

#: Filters the fast parser must read itself (the shapes filtered counts and scans use).
FAST = [
    "i > 0", "i >= 0", "s = `s`", "i < 0", "i <= 0", "i = 0", "i != 0", "i <> 0", "0 < i", "-3 = i",
    "i > 2.5", "i = 2.0", "i > -1", "i > 9223372036854775807",
    "i8 > 300", "i8 < -129", "i8 = 127", "i8 > 2.5", "i8 > i", "i = i8",
    "u64 > 9223372036854775808", "u64 = 18446744073709551615", "u64 > 1", "u64 = 3.0",
    "i = -9223372036854775808", "i > -9223372036854775808",
    "f > 0.9", "f > 0", "f = 0", "f = -0.0", "f > -0.0", "f < 0", "f <= 0", "f >= 1e300", "f < 1E-3", "f < 1E+5", "f > 2e-3",
    "f = f", "f != f", "f > g", "f = g", "f <> g", "g > 0.1", "g = 0.1", "g >= 0.5", "f = 'NaN'",
    "f > '1'", "f IN (0.0, 1.5)", "f IN (0)", "f NOT IN (0.0)", "f IN (1.5, NULL)", "f IN ('NaN')",
    "g IN (0.5, 2)", "i IN (1, 2, 7)", "i NOT IN (1, NULL)", "i IN (NULL)", "i8 IN (1, 300)",
    "i IN (1, 2.5)", "s = 'apple'", "s = 'it''s'", "s = ''", "s > 'b'", "s IN ('apple', 'Banana')",
    "s NOT IN ('apple', NULL)", "s = 'say \"hi\"'", "s = \"apple\"", "s = \"Banana\"", "ls = 'x'",
    "ls IN ('x', 'y')", "ls > 'x'", "dct = 'u'", "dct IN ('v', 'w')", "dct != 'u'", "dct IS NULL",
    "b", "NOT b", "b = TRUE", "b = false", "b != true", "b IS TRUE", "b IS NOT TRUE", "b IS FALSE",
    "b IS NOT FALSE", "b IN (TRUE)", "i IS NULL", "i IS NOT NULL", "f IS NULL", "s IS NOT NULL",
    "st IS NULL", "NOT i IS NULL", "NOT (i > 0)", "NOT NOT i > 0", "NOT i > 0 AND f > 0",
    "i > 0 AND f > 0", "i > 0 OR f > 0", "i > 0 AND f > 0 AND s = 'apple' AND b",
    "i > 0 OR f > 0 OR s = 'apple' OR b OR i8 > 1", "(i > 0 AND f > 0) AND (s = 'a' AND b)",
    "i > 0 AND (f > 0 OR s > 'a')", "(i > 0 OR f > 0) AND NOT (b OR i8 < 0)", "((((i > 0))))",
    "i > 0 AND NULL", "i > 0 OR NULL", "NOT (i = 1 AND NULL)", "NOT NULL", "TRUE", "FALSE",
    "NULL IS NULL", "1 = 1", "1 = 0", "NULL = NULL", "i = NULL", "i != NULL", "NULL IN (1)",
    "mixed > 2", "MIXED = 5", "`Mixed` < 3", "\"Mixed\" = 3", "`weird col` = 1", "`date` > 3",
    "CaseA > 3", "casea > 3", "`CaseA` = `casea`", "_x_ > 1".replace("_x_", "i"),
    "i % 10 = 0", "i - 1 > 2", "i -1 > 2", "-i * 2 > 3", "2 - -1 = i", "i * 2 + 1 > i / 2 - 3",
    "- - 1 = i", "i / 2 % 3 = 1", "f * 2 > 1", "f / 0 > 1", "i8 + 1 > 3", "i8 * 100 > 300", "-f < 0",
    "-i > 0", "i + i8 > 2", "f - g > 0", "i % 2 = 1", "(i + 1) * 2 > 5", "i - 1 IN (0, 1)", "i > -(1)", "i > - -1",
    "i BETWEEN 1 AND 5", "i NOT BETWEEN -3 AND 2", "NOT i BETWEEN 1 AND 5", "f BETWEEN -1 AND 2",
    "f BETWEEN 0 AND 'NaN'", "i BETWEEN i8 AND 10", "i BETWEEN 1 + 1 AND 5 * 2 AND b", "s BETWEEN 'a' AND 'c'",
    "s LIKE 'a%'", "s NOT LIKE 'a%'", "s ILIKE 'A%'", "s NOT ILIKE '%A%'", "s LIKE '_'", "s LIKE ''",
    "s LIKE 'it''s'", "ls LIKE 'x%'", "s LIKE \"a%\"", "NOT s LIKE 'a%' OR i > 1", "dct LIKE 'u%'",
    "i>-1", "i<-1", "i>=-1", "i<>-1", "i\t>\n0", " i > 0 ", "st.a > 1", "st.a IS NULL", "st.a IN (1, 5)",
]

#: Filters outside the fast subset (it must give up) that the full translator accepts or rejects.
SLOW = [
    "s LIKE 'a!%' ESCAPE '!'", "s LIKE 'a\\_b'", "s LIKE 'a' || 'b'", "+i > 0", "i > +1", "s || 'a' = 'b'",
    "i DIV 2 = 1", "upper(s) = 'A'",
    "i == 3", "i IS DISTINCT FROM 3", "CAST(i AS DOUBLE) > 1", "i > 1_000", "i > 0x10", "i > .5",
    "i > 5.", "f > 1.2.3", "i > - 1".replace(" - ", " -- "), "i > 1 /* c */", "s = 'a\\'b'", "date > 3",
    "i IN (i8, 3)", "i IN (1 + 1)", "i > 0 AND -- note\n f > 0", "isnan(f)", "i > 3 y",
    "cast(i AS STRING) = '1'", "coalesce(i, 0) > 1", "i <=> 1", "i>0AND f>0",
]

#: Text that is an error: the fast parser gives up, the full translator reports it.
BAD = [
    "nope > 1", "i > 1 AND nope = 2", "st.zz = 1", "i >", "i > 1 AND", "", "i", "s > 3", "b = 1",
    "i IN ()", "i > 99999999999999999999999", "s = 'unterminated", "(i > 1", "i > 1)", "f > 'x'",
    "i = 'abc'", "'a' > 1 AND i", "i > 1; DROP TABLE t", "\"nope\" > 1", "i IN (1, 'a')",
    "i LIKE 'a%'", "s LIKE i", "s LIKE 1", "NOT i", "i AND b", "`nope` = 1", "i > 1 OR s", "s IS TRUE", "i = -18446744073709551615", "NULL",
    "i < 18446744073709551615", "i > -9223372036854775809",
]


def _rows(expr: object) -> list[int]:
    return sorted(filter_table(TABLE, expr)["id"].to_pylist())  # type: ignore[arg-type]


@pytest.mark.parametrize("sql", FAST + SLOW)
def test_fast_parser_matches_the_full_translator(sql: str) -> None:
    fast = parse_simple(sql, TABLE.schema)
    if sql in SLOW:
        assert fast is None
        return
    full = _parse_with_sqlglot(sql, TABLE.schema)
    assert fast is not None
    # A NaN in an IN list's value set never compares equal: then the printed forms must be.
    assert fast.equals(full) or ("NaN" in sql and str(fast) == str(full)), (str(fast), str(full))
    assert _rows(fast) == _rows(full)


@pytest.mark.parametrize("sql", FAST)
def test_direct_evaluation_matches_a_plan(sql: str) -> None:
    expr = parse_filter(sql, TABLE.schema)
    program = program_for(expr)
    if program is None:  # only nested fields and arithmetic on mixed types run as a plan
        assert "st." in sql or _ARITHMETIC.search(sql)
        return
    mask = program.evaluate(TABLE)
    if isinstance(mask, (pa.Array, pa.ChunkedArray)):
        got = sorted(TABLE.filter(mask)["id"].to_pylist())
    else:
        got = list(range(TABLE.num_rows)) if (mask.as_py() if isinstance(mask, pa.Scalar) else mask) is True else []
    assert got == _rows(expr)


@pytest.mark.parametrize("sql", BAD)
def test_errors_come_from_the_full_translator(sql: str) -> None:
    assert parse_simple(sql, TABLE.schema) is None
    with pytest.raises(InvalidInputError) as fast_path:
        parse_filter(sql, TABLE.schema)
    if sql:
        with pytest.raises(InvalidInputError) as full_path:
            _parse_with_sqlglot(sql, TABLE.schema)
        assert str(fast_path.value) == str(full_path.value)


def test_reserved_words_cover_the_sql_parser_keywords() -> None:
    from sqlglot.parsers.base import BaseParser

    keywords = {k for k in _LanceSql.Tokenizer.KEYWORDS if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k)}
    keywords |= set(BaseParser.NO_PAREN_FUNCTION_PARSERS)
    assert keywords <= RESERVED, sorted(keywords - RESERVED)


def test_deeply_nested_filter_falls_back() -> None:
    sql = "(" * 2000 + "i > 0" + ")" * 2000
    assert parse_simple(sql, TABLE.schema) is None


def test_arithmetic_overflow_follows_the_plan() -> None:
    # A plan computes int8 + 1 in int8 (127 wraps); a direct kernel call would widen first.
    expr = parse_filter("i8 + 1 > 3", TABLE.schema)
    assert program_for(expr) is None
    assert _rows(expr) == [4, 8]
    same = parse_filter("i % 10 = 0", TABLE.schema)  # one type throughout: called directly
    assert program_for(same) is not None


def test_deep_filter_from_the_full_translator_runs_as_a_plan() -> None:
    sql = "NOT " * 300 + "i > 0"
    expr = parse_filter(sql, TABLE.schema)
    assert program_for(expr) is None
    assert _rows(expr) == _rows(parse_filter("i > 0", TABLE.schema))


def test_long_chains_arrow_cannot_plan_are_refused_by_both_translators() -> None:
    sql = " OR ".join(f"i > {n}" for n in range(5000))
    with pytest.raises(InvalidInputError, match="exceeds"):
        parse_simple(sql, TABLE.schema)
    with pytest.raises(InvalidInputError, match="exceeds"):
        parse_filter(sql, TABLE.schema)


def test_long_equality_chains_become_one_is_in() -> None:
    # Generated ``c = 1 OR c = 2 OR ...`` filters (pylance takes 20,000 terms) merge per column.
    sql = " OR ".join(f"i = {n}" for n in range(5000)) + " OR s = 'apple' OR s = 'Banana' OR f > 1"
    fast, full = parse_simple(sql, TABLE.schema), parse_filter(sql, TABLE.schema)
    assert fast is not None
    want = sorted(set(_rows(parse_filter("i >= 0 AND i < 5000", TABLE.schema)))
                  | set(_rows(parse_filter("s IN ('apple', 'Banana') OR f > 1", TABLE.schema))))
    assert _rows(fast) == _rows(full) == want


def test_simple_filters_never_import_sqlglot(tmp_path: Path) -> None:
    uri = str(tmp_path / "t.lance")
    script = textwrap.dedent(f"""
        import sys
        import pyarrow as pa
        import lance_format
        ds = lance_format.write_dataset(pa.table({{"x": [1.0, 2.0, None], "s": ["a", "b", "c"]}}), {uri!r})
        ds = lance_format.dataset({uri!r})
        assert ds.count_rows(filter="x > 1.5 OR s IN ('a')") == 2
        assert ds.to_table(filter="x IS NULL").num_rows == 1
        ds.delete("s = 'b'")
        assert lance_format.dataset({uri!r}).count_rows("x >= 1") == 1
        print(sorted(m for m in sys.modules if m.startswith(("sqlglot", "pyarrow.dataset"))))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
