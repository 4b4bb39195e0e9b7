"""Spark read planning and 2.1+ read tasks load no 2.0 or legacy decoder; 2.0 / legacy tasks load theirs.

Every planner worker unpickles the data source for ``schema()`` / ``reader()`` / ``partitions()``
and every read task unpickles the reader (see ``test_worker_imports_read_only.py``). Most tables
hold 2.1 / 2.2 files, so the 2.0 and legacy decoders load only when such a file is opened
(issue 28 item 7). Each check runs a new interpreter, the way a cold worker starts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from .helpers import pickled_read_task

lance = pytest.importorskip("lance")
cloudpickle = pytest.importorskip("pyspark.cloudpickle")

REPO = Path(__file__).resolve().parents[2]

#: The decoders of 2.0 and legacy (0.1 / 0.2) files and the modules only they use.
DECODERS_2_0 = ("lance_format.file.v2_0.decoder", "lance_format.file.v2_0.page_decode",
                "lance_format.file.v2_0.compressed", "lance_format.file.v2_0.columns")
DECODERS_LEGACY = ("lance_format.file.legacy.reader", "lance_format.file.legacy.decode",
                   "lance_format.file.legacy.gather")
OLD_DECODERS = DECODERS_2_0 + DECODERS_LEGACY


def _fresh(pickled: Path, code: str) -> Any:
    """Unpickle ``pickled`` as ``task`` in a new interpreter and run ``code``, which sets ``out``."""
    script = ("import json, pickle, sys\n"
              "def loaded(names):\n"
              "    return sorted(m for m in sys.modules if m in names)\n"
              f"task = pickle.loads(open({str(pickled)!r}, 'rb').read())\n{code}\nprint(json.dumps(out))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _table(n: int) -> pa.Table:
    ids = np.arange(n, dtype=np.int64)
    return pa.table({"id": ids, "x": np.random.default_rng(3).random(n),
                     "s": pa.array([f"v{i % 31}" for i in ids.tolist()])})


def _dataset(root: Path, version: str) -> str:
    """A pylance dataset of 3 fragments in ``version`` with deleted rows."""
    uri = str(root / f"t-{version}.lance")
    lance.write_dataset(_table(3000), uri, max_rows_per_file=1000, data_storage_version=version)
    lance.dataset(uri).delete("id % 11 = 4")
    return uri


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("planning")
    return {v: _dataset(root, v) for v in ("2.2", "2.0", "legacy")}


@pytest.mark.parametrize("version", ["2.2", "2.0", "legacy"])
def test_planning_a_read_in_a_fresh_planner_worker_loads_no_2_0_or_legacy_decoder(
        datasets: dict[str, str], version: str, tmp_path: Path) -> None:
    from lance_format.spark.source import LanceDataSource

    pickled = tmp_path / "source.pkl"
    pickled.write_bytes(cloudpickle.dumps(LanceDataSource({"path": datasets[version], "columns": "id,s"})))
    code = ("schema = task.schema()\nreader = task.reader(schema)\n"
            f"out = {{'fields': schema.fieldNames(), 'parts': len(reader.partitions()),\n"
            f"       'decoders': loaded({list(OLD_DECODERS)!r})}}\n")
    assert _fresh(pickled, code) == {"fields": ["id", "s"], "parts": 3, "decoders": []}


@pytest.mark.parametrize(("version", "expected"), [("2.2", []), ("2.0", sorted(DECODERS_2_0)),
                                                   ("legacy", sorted(DECODERS_LEGACY))])
def test_a_read_task_loads_only_the_decoder_of_its_files_and_returns_pylances_rows(
        datasets: dict[str, str], version: str, expected: list[str], tmp_path: Path) -> None:
    from lance_format.spark.source import LanceDataSource

    pickled = pickled_read_task(LanceDataSource({"path": datasets[version]}), tmp_path / "read_task.pkl")
    code = ("read, partitions = task\n"
            "import pyarrow as pa\n"
            "t = pa.Table.from_batches([b for p in partitions for b in read(p)]).sort_by('id')\n"
            "out = {'rows': {c: t.column(c).to_pylist() for c in ('id', 'x', 's')},\n"
            f"       'decoders': loaded({list(OLD_DECODERS)!r})}}\n")
    out = _fresh(pickled, code)
    theirs = lance.dataset(datasets[version]).to_table().sort_by("id")
    assert out["decoders"] == expected
    assert out["rows"] == {c: theirs.column(c).to_pylist() for c in ("id", "x", "s")}


def test_the_2_0_and_legacy_decoder_names_stay_importable() -> None:
    from lance_format.file.legacy.reader import LegacyFileDecoder
    from lance_format.file.v2_0 import FileDecoder20, FileEncoder20
    from lance_format.file.v2_0.decoder import FileDecoder20 as Direct

    assert FileDecoder20 is Direct
    assert LegacyFileDecoder.__name__ == "LegacyFileDecoder" and FileEncoder20.__name__ == "FileEncoder20"
