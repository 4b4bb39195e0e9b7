"""A take of a few rows of a list column in a mini-block page decodes only the chunks holding them.

The page's repetition index says which chunks a row's items span (a long list spans several);
the rows come out as whole-page decoding gives them, on files pylance wrote and on ours.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileWriter

from lance_format.file.reader import LanceFileReader
from lance_format.file.v2_1 import decoder, layout
from lance_format.file.writer import LanceFileWriter as OurWriter


def _table(rng: np.random.Generator, n: int) -> pa.Table:
    # List lengths from 1 to 400 items of 20-60 bytes: short lists share a chunk, long ones span many.
    lens = np.where(rng.random(n) < 0.1, rng.integers(100, 400, n), rng.integers(1, 8, n))
    items = [[bytes(rng.integers(97, 123, int(rng.integers(20, 60))).astype(np.uint8)) for _ in range(k)]
             for k in lens.tolist()]
    small = [[int(v) for v in rng.integers(0, 1000, int(k % 5) + 1)] for k in lens.tolist()]
    return pa.table({"blocks": pa.array(items, pa.list_(pa.large_binary())),
                     "ints": pa.array(small, pa.list_(pa.uint32()))})


@pytest.fixture(scope="module", params=["pylance", "ours"])
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, pa.Table]:
    table = _table(np.random.default_rng(4), 1500)
    path = str(tmp_path_factory.mktemp("lists") / "f.lance")
    if request.param == "pylance":
        with LanceFileWriter(path, version="2.1") as w:
            w.write_batch(table)
    else:
        with OurWriter(path, table.schema, version="2.1") as ow:
            ow.write_batch(table)
    return path, table


def test_taken_list_rows_equal_whole_page_rows(written: tuple[str, pa.Table]) -> None:
    path, table = written
    rng = np.random.default_rng(0)
    for rows in ([0], [len(table) - 1], [3, 3, 900, 2], rng.integers(0, len(table), 6).tolist()):
        got = LanceFileReader(path).take_rows(rows).to_table()
        assert got.equals(table.take(rows))


def test_a_list_take_does_not_decode_the_whole_page(written: tuple[str, pa.Table],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    path, table = written
    calls = []
    real = layout.repeated_rows

    def spy(*args: object) -> object:
        got = real(*args)  # type: ignore[arg-type]
        calls.append(got is not None)
        return got

    def refuse(*args: object, **kwargs: object) -> object:
        raise AssertionError("whole page decoded")

    monkeypatch.setattr(decoder, "repeated_rows", spy)
    reader = LanceFileReader(path, columns=["blocks"])
    pages = reader._decoder._leaves[0][0].column.pages
    if not any(p.type_url == decoder.PAGE_LAYOUT_URL and decoder._page_layout(p).WhichOneof("layout") == "mini_block_layout"
               for p in pages):
        pytest.skip("this writer chose another layout for the list column")
    monkeypatch.setattr(decoder, "decode_page", refuse)
    got = reader.take_rows([17, 1200]).to_table()
    assert got.column("blocks").equals(table.column("blocks").take([17, 1200]))
    assert calls and all(calls)
