"""``LanceDataset.insert`` in a process that has only read: the write path loads on first use.

The read path does not import ``lance_format.write`` (issue 28, read-path imports), so ``insert``
must not depend on that module having been imported by someone else.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

lance = pytest.importorskip("lance")

_CHILD = """
import sys
import pyarrow as pa
import lance_format
ds = lance_format.dataset(sys.argv[1])
assert "lance_format.write" not in sys.modules
ds.insert(pa.table({"id": pa.array([3, 4], pa.int64())}))
print(ds.version, ds.count_rows())
"""


def test_insert_after_only_reading_writes_a_new_version(tmp_path: Path) -> None:
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": pa.array([1, 2], pa.int64())}), uri)
    root = str(Path(__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", _CHILD, uri], capture_output=True, text=True, check=True,
                         cwd=root, env={"PYTHONPATH": root, "PATH": ""}).stdout.split()
    assert out == ["2", "4"]
    assert sorted(lance.dataset(uri).to_table()["id"].to_pylist()) == [1, 2, 3, 4]
