"""Fuzzed manifests, data, deletion, tag and hint files: only LanceError, no hang, no silent wrong rows.

Each case damages one file of a small dataset in place (flipped bytes, truncation, garbage,
an emptied file), reads the dataset the ways a user does, and restores the file. The reads
must either give the original rows or raise a LanceError; when they give other rows, pylance
must not be refusing the same bytes (that would be silently wrong data).
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import lance
import pyarrow as pa
import pytest

import lance_format as lf
from lance_format.errors import LanceError
from lance_format.session import default_session

pytestmark = pytest.mark.slow

#: Kinds where returning other rows than written while pylance refuses the bytes fails the test.
#: Hints are not among them: a damaged hint only changes which version opens, as in pylance.
STRICT_KINDS = ("manifest", "data", "deletion", "tag")
CASES_PER_KIND = 1100  # 5 kinds -> 5,500 fuzzed files
HANG_SECONDS = 5


def _build(root: Path) -> str:
    uri = str(root / "ds")
    table = pa.table({"id": pa.array(range(300), pa.int64()), "s": [f"v{i}" for i in range(300)],
                      "f": pa.array([i / 7 for i in range(300)], pa.float64())})
    lf.write_dataset(table, uri, data_storage_version="2.1", max_rows_per_file=150)
    ds = lf.dataset(uri)
    ds.delete("id % 5 = 0")
    ds = lf.dataset(uri)
    ds.tags.create("t1", 1)
    lf.write_dataset(table.slice(0, 20), uri, mode="append")
    return uri


def _files(uri: str) -> dict[str, list[Path]]:
    root = Path(uri)
    return {
        "manifest": sorted(root.glob("_versions/*.manifest")),
        "data": sorted(root.glob("data/*.lance")),
        "deletion": sorted(root.glob("_deletions/*")),
        "tag": sorted(root.glob("_refs/tags/*.json")),
        "hint": [root / "_versions" / "latest_version_hint.json"],
    }


def _mutations(data: bytes, rng: random.Random) -> bytes:
    how = rng.randrange(6)
    buf = bytearray(data)
    if how == 0 and buf:  # flip a few bytes
        for _ in range(rng.randint(1, 4)):
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        return bytes(buf)
    if how == 1 and buf:  # overwrite a run with random bytes
        at = rng.randrange(len(buf))
        run = rng.randint(1, 16)
        buf[at : at + run] = bytes(rng.randrange(256) for _ in range(min(run, len(buf) - at)))
        return bytes(buf)
    if how == 2:  # truncate
        return data[: rng.randrange(len(data) + 1)]
    if how == 3:  # empty
        return b""
    if how == 4 and len(buf) > 16:  # damage the tail (footers, offsets)
        at = len(buf) - rng.randint(1, 16)
        buf[at] = rng.randrange(256)
        return bytes(buf)
    return bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))  # garbage


def _read(uri: str) -> tuple[int, list[object]]:
    # As a fresh process would: nothing decoded from the undamaged file may answer for it.
    default_session().clear()
    ds = lf.dataset(uri)
    ds.versions()
    ds.tags.list()
    table = ds.to_table()
    # A damaged schema may rename or drop ``id``: those rows then differ, as they should.
    rows = (table.sort_by("id") if "id" in table.column_names else table).to_pylist()
    lf.dataset(uri, version=1).count_rows()
    return ds.version, rows


def _pylance_refuses(uri: str) -> bool:
    try:
        lance.dataset(uri).to_table()
        lance.dataset(uri, version=1).count_rows()
    except Exception:  # noqa: BLE001 - any refusal counts
        return True
    return False


class _Hang(Exception):
    pass


def _alarm(_sig: int, _frame: FrameType | None) -> None:
    raise _Hang


def _cases(uri: str, rng: random.Random) -> Iterator[tuple[str, Path]]:
    files = _files(uri)
    for kind, paths in files.items():
        for _ in range(CASES_PER_KIND):
            yield kind, rng.choice(paths)


def test_fuzzed_files_only_raise_lance_errors(tmp_path: Path) -> None:
    uri = _build(tmp_path)
    expected = _read(uri)
    rng = random.Random(14)
    counts: dict[str, int] = {}
    errors: dict[str, int] = {}
    other_rows: dict[str, int] = {}  # other rows than written, where pylance reads them too
    slowest = 0.0
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for kind, path in _cases(uri, rng):
            original = path.read_bytes()
            path.write_bytes(_mutations(original, rng))
            started = time.monotonic()
            signal.alarm(HANG_SECONDS)
            try:
                got = _read(uri)
            except LanceError as exc:
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                got = None
            except _Hang:
                pytest.fail(f"reading with a fuzzed {kind} file {path.name} took over {HANG_SECONDS} s")
            except Exception as exc:  # noqa: BLE001 - the point of the test
                pytest.fail(f"fuzzed {kind} file {path.name}: {type(exc).__name__}: {exc}")
            finally:
                signal.alarm(0)
                slowest = max(slowest, time.monotonic() - started)
            if got is not None and got != expected:
                if kind in STRICT_KINDS:
                    assert not _pylance_refuses(uri), f"fuzzed {kind} file {path.name}: wrong rows pylance refuses"
                other_rows[kind] = other_rows.get(kind, 0) + 1
            path.write_bytes(original)
            counts[kind] = counts.get(kind, 0) + 1
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert _read(uri) == expected
    assert sum(counts.values()) >= 5000
    print(f"fuzzed files: {counts}, LanceErrors: {errors}, other rows (pylance reads them too): {other_rows}, "
          f"slowest read {slowest:.2f} s")
