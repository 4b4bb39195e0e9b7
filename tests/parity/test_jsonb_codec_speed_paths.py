"""The JSONB fast paths (C scanner hook on writes, C encoder on reads, key-set caches) give
pylance 14.0.2's bytes and text: nested objects, arrays, unicode, numbers of every width,
nulls, empty containers, many distinct key sets, whitespace around documents."""

from __future__ import annotations

import glob
import json
import random
from pathlib import Path

import pyarrow as pa
import pytest

import lance_format
from lance_format import jsonb

lance = pytest.importorskip("lance")
lance_file = pytest.importorskip("lance.file")

_BOUNDARY_INTS = [0, 1, 127, 128, 255, 256, 4095, 4096, 65535, 65536, 2**31 - 1, 2**31, 2**32 - 1, 2**32,
                  2**63 - 1, 2**63, 2**64 - 1, 2**64, 10**30, -1, -128, -129, -1024, -1025, -32768, -32769,
                  -(2**31), -(2**31) - 1, -(2**63), -(2**63) - 1]
_FLOATS = ["0.5", "-0.0", "1.0", "0.001", "0.00099", "0.0001", "0.00001", "1.5e-7", "2.5e-9", "3e-10",
           "1e-11", "1e15", "1e16", "1.5e16", "123456789.125", "1e300", "-1.7976931348623157e308",
           "5e-324", "1e400", "-1e400", "NaN", "0.1", "1e22", "33.333333333333336"]
_STRINGS = ["", "a", "é", "😀", "\u2028", 'q"b\\', "\n\t\u0001\u001f\u007f", "日本語", "x" * 300]


def _random_value(rng: random.Random, depth: int) -> object:
    pick = rng.random()
    if depth > 3 or pick < 0.45:
        return rng.choice([None, True, False, rng.choice(_BOUNDARY_INTS), rng.choice(_STRINGS),
                           rng.uniform(-1e6, 1e6), rng.randint(-5000, 70000)])
    if pick < 0.7:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 5))]
    keys = rng.sample(["b", "a", "id", "é", "B", "😀", "", "zz", "a b", "k" + str(rng.randint(0, 9))],
                      rng.randint(0, 5))
    return {k: _random_value(rng, depth + 1) for k in keys}


def _texts() -> list[str | None]:
    rng = random.Random(7)
    texts: list[str | None] = [None, "", " ", "\n\t", "{}", "[]", "[{}]", '{"a":[]}', '{"a":{}}', "[[[]]]", " [1] ", '\n{"a": 1}\t']
    texts += [f"[{n}]" for n in _BOUNDARY_INTS] + [f'{{"v": {n}}}' for n in _BOUNDARY_INTS]
    texts += [f"[{f}]" for f in _FLOATS] + [f'{{"f": [{f}, {{"g": {f}}}]}}' for f in _FLOATS]
    texts += [json.dumps([s, {s: s}], ensure_ascii=rng.random() < 0.5) for s in _STRINGS]
    texts += [json.dumps(_random_value(rng, 0)) for _ in range(1500)]
    # the same key sets over and over, as a real column has them (the caches' common case)
    texts += [json.dumps({"id": i, "name": f"n{i}", "tags": ["a", i % 7], "score": i / 3.0}) for i in range(300)]
    # more distinct key sets than the caches hold: they start over and stay right
    texts += [json.dumps({f"k{i}": i, f"j{i}": [i]}) for i in range(4200)]
    return texts


def _shared_layout_texts() -> list[str | None]:
    # Rows sharing their layout are decoded a column at a time: vary what may vary inside one
    # layout (number widths and signs, string bytes, nested array lengths) and break it now and then.
    rng = random.Random(11)
    texts: list[str | None] = []
    for i in range(3000):
        doc = {"id": rng.choice(_BOUNDARY_INTS) if i % 3 else i, "name": rng.choice(_STRINGS) + str(i),
               "tags": [rng.choice(_STRINGS), i % 7, rng.choice([None, True, False])][: i % 4],
               "score": rng.choice([i / 3.0, -i * 1e10, 0.0, -0.0, 1e16 + i, float(i)]),
               "nested": {"a": [i, {"b": rng.choice(_STRINGS)}], "z": None}}
        if i == 2500:
            doc["score"] = 2.5e-7  # one tiny float: its group falls back to the per-value path
        if i % 97 == 0:
            doc["extra"] = i  # another layout
        texts.append(None if i % 50 == 0 else json.dumps(doc, ensure_ascii=i % 2 == 0))
    return texts


@pytest.fixture(scope="module", params=["mixed", "shared_layout"])
def stored(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str | None]]:
    texts = _texts() if request.param == "mixed" else _shared_layout_texts()
    root = tmp_path_factory.mktemp("jsonb_speed")
    lance.write_dataset(pa.table({"j": pa.array(texts, pa.json_(pa.utf8()))}), str(root / "t"))
    return root, texts


def test_fast_encoder_gives_the_bytes_pylance_stores(stored: tuple[Path, list[str | None]]) -> None:
    root, texts = stored
    path = glob.glob(str(root / "t" / "data" / "*.lance"))[0]
    raw = lance_file.LanceFileReader(path).read_all().to_table().column("j").to_pylist()
    ours = jsonb.to_jsonb_array(pa.array(texts, pa.json_(pa.utf8()))).to_pylist()
    mismatches = [t for t, a, b in zip(texts, ours, raw, strict=True) if a != b]
    assert mismatches == []


def test_fast_printer_gives_the_text_pylance_reads(stored: tuple[Path, list[str | None]]) -> None:
    root, _ = stored
    theirs = lance.dataset(str(root / "t")).to_table().column("j").to_pylist()
    ours = lance_format.dataset(str(root / "t")).to_table().column("j").to_pylist()
    mismatches = [(a, b) for a, b in zip(ours, theirs, strict=True) if a != b]
    assert mismatches == []


def test_pylance_reads_what_the_fast_encoder_writes(stored: tuple[Path, list[str | None]]) -> None:
    root, texts = stored
    lance_format.write_dataset(pa.table({"j": pa.array(texts, pa.json_(pa.utf8()))}), str(root / "o"))
    theirs = lance.dataset(str(root / "t")).to_table().column("j").to_pylist()
    assert lance.dataset(str(root / "o")).to_table().column("j").to_pylist() == theirs


@pytest.mark.parametrize("text", ['{"a": 1, "b": {"c": 2, "c": 3}}', '[1, {"x": 0, "x": 0}]', "[1] x", "nul"])
def test_fast_encoder_refuses_what_pylance_refuses(tmp_path: Path, text: str) -> None:
    table = pa.table({"j": pa.array(['{"ok": [1]}', text], pa.json_(pa.utf8()))})
    with pytest.raises(OSError):
        lance.write_dataset(table, str(tmp_path / "t"))
    with pytest.raises(lance_format.errors.InvalidInputError, match="row 1 is not valid JSON"):
        jsonb.to_jsonb_array(table.column("j"))


def test_column_reads_keep_nulls_and_slices() -> None:
    texts = [None if i % 5 == 0 else json.dumps({"id": i, "t": [i] * (i % 3)}) for i in range(200)]
    stored_values = jsonb.to_jsonb_array(pa.array(texts, pa.json_(pa.utf8())))
    expected = [None if t is None else t.replace(" ", "") for t in texts]
    assert jsonb.from_jsonb_array(stored_values).storage.to_pylist() == expected
    assert jsonb.from_jsonb_array(stored_values.slice(7, 50)).storage.to_pylist() == expected[7:57]
    assert jsonb.from_jsonb_array(stored_values.cast(pa.binary()).slice(3, 20)).storage.to_pylist() == expected[3:23]
    assert jsonb.from_jsonb_array(pa.array([None, None], pa.large_binary())).storage.to_pylist() == [None, None]


@pytest.mark.parametrize("bad", [b"\x80\x00\x00\x05", b"", b"\x40\x00\x00\x01\x10\x00\x00\x05ab"])
def test_corrupt_values_among_shared_layouts_name_their_row(bad: bytes) -> None:
    values = pa.array([jsonb.encode_value('{"a": [1]}')] * 3 + [bad], pa.large_binary())
    with pytest.raises(lance_format.errors.CorruptFileError, match="row 3"):
        jsonb.from_jsonb_array(values)
