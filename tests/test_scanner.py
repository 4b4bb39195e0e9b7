"""The scanner's options give the rows pylance's scanner gives."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa

import lance_format as lf


def test_scanner_matches_pylance(tmp_path: Path) -> None:
    import pyarrow.compute as pc

    uri = str(tmp_path / "ds")
    t = pa.table({"a": pa.array(range(300), pa.int64()), "s": [None if i % 7 == 0 else f"k{i % 13}" for i in range(300)]})
    lf.write_dataset(t, uri, max_rows_per_file=100)
    lf.dataset(uri).delete("a % 10 = 3")
    ours, theirs = lf.dataset(uri), lance.dataset(uri)
    cases = [
        {},
        {"columns": ["s"], "filter": "a BETWEEN 50 AND 250 AND s IS NOT NULL", "limit": 20, "offset": 5},
        {"filter": "s LIKE 'k1%' OR a IN (1, 2, 299)", "with_row_id": True},
        {"filter": pc.field("a") > 150, "with_row_address": True, "columns": ["a"]},
        {"filter": "NOT (a < 290)", "batch_size": 3},
        {"limit": 7, "offset": 95, "with_row_id": True},
    ]
    for kw in cases:
        a, b = ours.scanner(**kw), theirs.scanner(**kw)
        assert a.to_table().equals(b.to_table()), kw
        # pylance refuses count_rows() with limit/offset; then ours must equal the rows it returns
        want = a.to_table().num_rows if ("limit" in kw or "offset" in kw) else b.count_rows()
        assert a.count_rows() == want, kw
        assert a.projected_schema == b.projected_schema, kw
        assert pa.Table.from_batches(list(ours.scanner(**kw).to_batches())).equals(
            pa.Table.from_batches(list(theirs.scanner(**kw).to_batches())).cast(a.projected_schema)), kw
    frags = ours.get_fragments()[1:]
    tf = theirs.get_fragments()[1:]
    assert ours.scanner(fragments=frags, filter="a > 120").to_table().equals(
        theirs.scanner(fragments=tf, filter="a > 120").to_table())
    assert max(b.num_rows for b in ours.scanner(batch_size=3).to_batches()) <= 3
    assert ours.count_rows("s IS NULL") == theirs.count_rows("s IS NULL")


def test_filtered_scan_evaluates_spans_of_batches(tmp_path: Path, monkeypatch: object) -> None:
    # The SQL filter runs once per span of whole batches; spans of 3 batches of 7 rows put
    # deleted rows and span edges everywhere, and must not change a single row or batch.
    import lance_format.table.scan as scan_module

    monkeypatch.setattr(scan_module, "EVAL_SPAN_ROWS", 21)  # type: ignore[attr-defined]
    uri = str(tmp_path / "spans")
    t = pa.table({"a": pa.array(range(200), pa.int64()),
                  "f": pa.array([float("nan") if i % 9 == 0 else None if i % 5 == 0 else i / 7 for i in range(200)]),
                  "s": [None if i % 7 == 0 else f"k{i % 13}" for i in range(200)]})
    lf.write_dataset(t, uri, max_rows_per_file=90)
    lf.dataset(uri).delete("a % 4 = 1 OR (a >= 30 AND a < 60)")
    ours, theirs = lf.dataset(uri), lance.dataset(uri)
    for flt in ("f > 3", "s IN ('k1', 'k2') OR f IS NULL", "NOT (f <= 10)", "TRUE", "a = -1", "f >= 28 OR a IN (0, 9)"):
        for kw in ({"batch_size": 7}, {"batch_size": 7, "with_row_id": True, "limit": 11, "offset": 4}):
            got = list(ours.scanner(filter=flt, **kw).to_batches())
            assert all(b.num_rows <= 7 for b in got), (flt, kw)
            want = theirs.scanner(filter=flt, **kw).to_table()
            assert _nan_free(pa.Table.from_batches(got, schema=want.schema)).equals(_nan_free(want)), (flt, kw)


def _nan_free(table: pa.Table) -> pa.Table:
    """``table`` with NaN in ``f`` replaced by a marker (NaN never equals NaN in ``Table.equals``)."""
    import pyarrow.compute as pc

    f = table.column("f")
    return table.set_column(table.schema.get_field_index("f"), "f", pc.if_else(pc.is_nan(f), -1e9, f))
