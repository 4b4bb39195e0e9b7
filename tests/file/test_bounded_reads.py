"""Reads stream in bounded memory and fetch only the bytes they need."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileWriter as TheirWriter

from lance_format.file import LanceFileReader

_MEM_SCRIPT = r"""
import sys
from lance_format.file import LanceFileReader


def hwm() -> int:
    # Peak RSS of this process image: VmHWM restarts at exec, unlike getrusage's ru_maxrss,
    # which inherits the (large) RSS the parent pytest process had when it forked.
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


r = LanceFileReader(sys.argv[1])
assert r.num_rows == int(sys.argv[2])
base = hwm()
rows = 0
total = 0
if sys.argv[3] == "stream":
    for b in r.read_all(batch_size=8192).to_batches():
        rows += b.num_rows
        total += b.column(0)[b.num_rows - 1].as_py()
else:
    t = r.read_all().to_table()
    rows, total = t.num_rows, -1
print(rows, hwm() - base, total)
"""


def test_streaming_a_large_pylance_file_keeps_rss_bounded(tmp_path: Path) -> None:
    n = 2_000_000
    path = tmp_path / "big.lance"
    x = np.arange(n, dtype=np.int64)
    payload = pa.array(np.char.add("payload-payload-payload-payload-", x.astype(str)).astype(object))
    t = pa.table({"x": x, "f": np.random.default_rng(0).random(n), "s": payload})
    with TheirWriter(str(path), t.schema, version="2.0") as w:
        for b in t.to_batches(max_chunksize=1 << 16):
            w.write_batch(b)
    del t, payload
    size = path.stat().st_size
    assert size > 90 << 20
    # Arrow's default mimalloc pool keeps freed pages mapped, which would measure the allocator,
    # not the reader; the system pool returns them. Likewise glibc gives each decode thread its
    # own malloc arena and keeps freed pages in it (bounded by the threads, not the file):
    # one arena measures what the reader holds.
    env = dict(os.environ, ARROW_DEFAULT_MEMORY_POOL="system", MALLOC_ARENA_MAX="1")
    def measure(mode: str) -> tuple[int, int, int]:
        proc = subprocess.run([sys.executable, "-c", _MEM_SCRIPT, str(path), str(n), mode], env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        rows, growth, last_sum = proc.stdout.split()
        return int(rows), int(growth), int(last_sum)

    rows, growth, last_sum = measure("stream")
    assert rows == n
    assert last_sum == sum(range(8191, n, 8192)) + (n - 1 if n % 8192 else 0)
    assert growth < min(size // 2, 64 << 20), f"RSS grew {growth >> 20} MiB streaming a {size >> 20} MiB file"
    # the probe is sensitive: materializing everything does grow by about the file size
    _rows, whole, _ = measure("table")
    assert whole > size // 2 and whole > 2 * growth, (whole, growth)


def test_projection_and_take_read_only_needed_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    n = 200_000
    t = pa.table({"a": np.arange(n, dtype=np.int64), "big": pa.array(np.arange(n).astype(str).astype(object)),
                  "c": np.arange(n, dtype=np.float64)})
    read: list[int] = []
    real = os.pread

    def spy(fd: int, length: int, offset: int) -> bytes:
        read.append(length)
        return real(fd, length, offset)

    for version in ("2.0", "2.1"):
        path = str(tmp_path / f"f{version}.lance")
        with TheirWriter(path, t.schema, version=version) as w:
            for b in t.to_batches(max_chunksize=1 << 14):
                w.write_batch(b)
        size = os.path.getsize(path)
        read.clear()
        monkeypatch.setattr(os, "pread", spy)
        r = LanceFileReader(path, columns=["a"])
        got = r.read_all().to_table()
        assert got.equals(t.select(["a"]))
        assert sum(read) < size // 2, (version, sum(read), size)
        read.clear()
        r = LanceFileReader(path)
        idx = [5, n - 1, 100_000]
        assert r.take_rows(idx).to_table().equals(t.take(idx))
        assert sum(read) < size // 4, (version, sum(read), size)
        read.clear()
        assert r.read_range(150_000, 10).to_table().equals(t.slice(150_000, 10))
        assert sum(read) < size // 4, (version, sum(read), size)
        monkeypatch.undo()
