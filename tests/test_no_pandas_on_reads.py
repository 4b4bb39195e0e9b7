"""Reads, takes, float filters, deletes and updates in a fresh process import no pandas.

pyarrow imports pandas (~0.3-0.5 s of CPU) the first time ``pa.array`` or ``to_numpy`` runs in a
process. Issue 28 item 7 measures fresh processes (a Dagster step, a Spark task): a scan of
pylance-written 2.2 text (FSST pages), a 1,000-row take, ``x > 0.9`` (the -NaN kernel) and a
delete each paid that import once, which was most of a small operation's CPU.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from fresh_process import run_fresh


def _table(n: int) -> pa.Table:
    rng = np.random.default_rng(11)
    words = np.array([f"w{i:04d}{'abcdefgh'[i % 8] * (i % 5)}" for i in range(3000)])
    text = [" ".join(t) for t in words[rng.integers(0, len(words), (n, 3))]]  # FSST-sized text, not a dictionary
    x = rng.random(n)
    x[::97] = np.nan
    x[::193] = -np.nan
    vec = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 8, dtype=np.float32)), 8)
    return pa.table({"id": np.arange(n, dtype=np.int64), "x": x, "text": text, "vec": vec})


@pytest.fixture(scope="module")
def pylance_22(tmp_path_factory: pytest.TempPathFactory) -> str:
    lance = pytest.importorskip("lance")
    uri = str(tmp_path_factory.mktemp("nopandas") / "t.lance")
    lance.write_dataset(_table(60_000), uri, data_storage_version="2.2", max_rows_per_file=25_000)
    return uri


def test_a_scan_of_pylance_written_fsst_text_imports_no_pandas(pylance_22: str) -> None:
    lance = pytest.importorskip("lance")
    code = ("import lance_format\n"
            f"t = lance_format.dataset({pylance_22!r}).to_table(columns=['id', 'text'])\n"
            "out = {'rows': t.num_rows, 'text': t.column('text').to_pylist()[::997]}\n")
    out = run_fresh(code + "out['pandas'] = 'pandas' in sys.modules\n")
    theirs = lance.dataset(pylance_22).to_table(columns=["text"]).column("text").to_pylist()[::997]
    assert out == {"rows": 60_000, "text": theirs, "pandas": False}


def test_a_take_and_float_filters_import_no_pandas(pylance_22: str) -> None:
    lance = pytest.importorskip("lance")
    rows = [int(i) for i in np.random.default_rng(3).integers(0, 60_000, 1000)]
    code = ("import lance_format\n"
            f"ds = lance_format.dataset({pylance_22!r})\n"
            f"taken = ds.take({rows!r}, columns=['id', 'x']).column('id').to_pylist()\n"
            "out = {'taken': taken, 'count': ds.count_rows(filter='x > 0.9'),\n"
            "       'nan': ds.count_rows(filter='x < 0.1 OR x IS NULL'),\n"
            "       'ids': ds.to_table(filter='x > 0.99 AND id < 30000', columns=['id'], with_row_id=True)"
            ".column('id').to_pylist()}\n")
    out = run_fresh(code + "out['pandas'] = 'pandas' in sys.modules\n")
    ds = lance.dataset(pylance_22)
    assert out == {"taken": ds.take(rows, columns=["id"]).column("id").to_pylist(),
                   "count": ds.count_rows(filter="x > 0.9"), "nan": ds.count_rows(filter="x < 0.1 OR x IS NULL"),
                   "ids": ds.to_table(filter="x > 0.99 AND id < 30000", columns=["id"]).column("id").to_pylist(),
                   "pandas": False}


def test_a_delete_an_update_and_a_scan_after_them_import_no_pandas(tmp_path: Path) -> None:
    lance = pytest.importorskip("lance")
    uri = str(tmp_path / "d.lance")
    lance.write_dataset(_table(20_000), uri, data_storage_version="2.2", max_rows_per_file=8_000)
    code = ("import lance_format\n"
            f"ds = lance_format.dataset({uri!r})\n"
            "ds.delete('id % 10 = 0')\n"
            "ds.update({'x': '2.5'}, where='id % 10 = 1')\n"
            "ds = lance_format.dataset(ds.uri)\n"
            "t = ds.to_table(columns=['id', 'x'])\n"
            "out = {'rows': t.num_rows, 'big': ds.count_rows(filter='x > 2'), 'version': ds.version}\n")
    out = run_fresh(code + "out['pandas'] = 'pandas' in sys.modules\n")
    theirs = lance.dataset(uri)
    # NaN compares greater than every number in Lance filters, so the count is pylance's, not 2,000
    assert out == {"rows": 18_000, "big": theirs.count_rows(filter="x > 2"), "version": theirs.version,
                   "pandas": False}
    assert theirs.count_rows() == 18_000
