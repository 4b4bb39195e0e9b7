"""The dataset-level benchmarks run end to end on a tiny table and print every line for both engines.

Timings are not checked (tests check behaviour); what is checked is that each operation ran in
its fresh process for ours and pylance, with no error, so a broken benchmark is noticed in CI.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.slow
def test_bench_dataset_prints_every_operation_for_both_engines() -> None:
    out = _run("benchmarks.bench_dataset", "--rows", "3000", "--versions", "2.0,2.2", "--repeat", "1",
               "--no-parquet")
    assert "error" not in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    for op in ("write", "scan", "project", "take", "count", "delete+scan", "import"):
        assert op in lines, out
        assert lines[op].count("x ") >= 4, lines[op]  # two time ratios and two memory ratios
    for engine in ("ours 2.0", "pylance 2.0", "ours 2.2", "pylance 2.2"):
        assert f"  {engine}: " in out and "MiB of files read" in out, out


@pytest.mark.slow
def test_bench_s3_prints_every_operation_for_both_engines() -> None:
    pytest.importorskip("moto.server")
    out = _run("benchmarks.bench_s3", "--rows", "4000", "--fragments", "4", "--versions", "2.2", "--repeat", "1")
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    for op in ("open", "take", "count", "scan"):
        # operation, ours and pylance (wall, then CPU in parentheses), then the ratios
        assert op in rows and rows[op][5].endswith("x") and rows[op][6].endswith("x)"), out
