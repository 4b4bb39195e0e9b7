"""Regenerate the old-pylance fixture datasets under ``tests/data/``.

Run with any Python 3.11 (the script is NOT a test and is never imported by one)::

    python3.11 tests/fixtures_tool/make_old_pylance.py            # all fixtures
    python3.11 tests/fixtures_tool/make_old_pylance.py legacy_0_10_18

For each pinned pylance release it creates a scratch venv under ``/tmp`` (never in the repo), installs
that release with an old pyarrow/numpy, and re-runs this file inside the venv with ``--inner`` to write
one fixture.  Each fixture directory holds:

* ``dataset.lance/``: the dataset exactly as the old pylance left it;
* ``expected/v{N}.arrow``: every version as read back by that same pylance (Arrow IPC file, zstd);
* ``info.json``: pylance version, storage version, naming scheme, version numbers, tags and what each
  version did.

Why these releases: 0.16.1 is the last release that writes ``_latest.manifest`` at the dataset root
(0.17.0 stopped) and it can write 2.0 data files (``data_storage_version="2.0"``); 0.18.2 writes V2
manifest names on request but no ``_latest.manifest`` and no ``latest_version_hint.json``; 0.14.1 writes
2.0 files (``use_legacy_format=False``) with no ``data_format`` in the manifest, only writer flag 4, which
its delete commit drops again; 0.10.18 writes only the legacy 0.1 file format and no ``data_format``;
0.16.1 with ``data_storage_version="legacy"`` gives 0.1 files with ``data_format`` "0.1".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
PYARROW = "pyarrow==15.0.2"
NUMPY = "numpy==1.26.4"

# fixture name -> pylance release that writes it
FIXTURES: dict[str, str] = {
    "pylance_0_16_1_v2_0": "0.16.1",
    "pylance_0_18_2_v2_paths": "0.18.2",
    "pylance_0_14_1_v2_0_noformat": "0.14.1",
    "legacy_0_10_18": "0.10.18",
    "legacy_0_16_1": "0.16.1",
}


def _venv_for(release: str) -> Path:
    """Create (once) ``/tmp/oldlance-venv/<release>`` holding that pylance release."""
    venv = Path("/tmp/oldlance-venv") / release
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, NUMPY, PYARROW], check=True)
        # no deps: old pylance pins nothing we need beyond pyarrow/numpy
        subprocess.run([*pip, "--no-deps", f"pylance=={release}"], check=True)
    return python


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--inner":
        _inner(argv[1], Path(argv[2]))
        return
    names = argv or list(FIXTURES)
    for name in names:
        python = _venv_for(FIXTURES[name])
        out = DATA / name
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        env = dict(os.environ, LANCE_LOG="error")
        subprocess.run([str(python), __file__, "--inner", name, str(out)], check=True, env=env)
        size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
        print(f"{name}: {size} bytes")


# ---------------------------------------------------------------------------------------------------
# Everything below runs inside the old venv (old pyarrow, old pylance).


def _rich_table(start: int, n: int) -> Any:
    """``n`` rows with ids ``start..start+n`` covering the types the reader must handle."""
    import numpy as np
    import pyarrow as pa

    ids = np.arange(start, start + n, dtype=np.int64)

    def nulls_every(k: int) -> Any:
        return ids % k == 0

    names = pa.array([f"name-{i}" for i in ids], pa.string(), mask=nulls_every(7))
    flags = pa.array(ids % 3 == 0, pa.bool_(), mask=nulls_every(11))
    lens = (ids % 4).astype(np.int32)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    items = pa.array(np.arange(offsets[-1], dtype=np.int32))
    lists = pa.ListArray.from_arrays(pa.array(offsets), items, mask=pa.array(nulls_every(13)))
    vec_values = (np.repeat(ids, 4) + np.tile(np.arange(4), n) * 0.5).astype(np.float32)
    vecs = pa.FixedSizeListArray.from_arrays(pa.array(vec_values), 4)
    # 2.0 cannot store struct-level nulls, so only the children are nullable
    struct = pa.StructArray.from_arrays(
        [pa.array((ids * 3).astype(np.int32)), pa.array([f"b{i}" for i in ids], mask=nulls_every(5))],
        names=["a", "b"],
    )
    # few distinct values: 2.0 writers switch such string pages to dictionary encoding
    cats = pa.array(np.array(["red", "green", "blue", "cyan"])[ids % 4], pa.string(), mask=nulls_every(9))
    days = pa.array((ids % 1000 + 19_000).astype(np.int32), pa.int32()).cast(pa.date32())
    ts = pa.array(ids * 1_000_000 + 1_700_000_000_000_000, pa.timestamp("us"), mask=nulls_every(19))
    return pa.table(
        {
            "id": ids,
            "x": pa.array(ids * 0.25, pa.float64()),
            "name": names,
            "flag": flags,
            "tags": lists,
            "vec": vecs,
            "meta": struct,
            "ts": ts,
            "cat": cats,
            "day": days,
        }
    )


def _int_table(start: int, n: int) -> Any:
    import numpy as np
    import pyarrow as pa

    return pa.table({"id": pa.array(np.arange(start, start + n, dtype=np.int64))})


def _inner(name: str, out: Path) -> None:
    import lance
    import pyarrow as pa

    uri = str(out / "dataset.lance")
    steps: list[str] = []
    tags: dict[str, int] = {}
    info: dict[str, Any] = {"name": name, "pylance": lance.__version__, "pyarrow": pa.__version__}

    if name.startswith("pylance_"):
        kw: dict[str, Any] = {"data_storage_version": "2.0"}
        if name == "pylance_0_18_2_v2_paths":
            kw["enable_v2_manifest_paths"] = True
        if name == "pylance_0_14_1_v2_0_noformat":
            # the pre-0.16 spelling of "write 2.0 files"
            kw = {"use_legacy_format": False}
        info.update(storage_version="2.0", naming="V2" if "enable_v2_manifest_paths" in kw else "V1")
        # v1: two fragments (200 + 100 rows)
        lance.write_dataset(_rich_table(0, 300), uri, max_rows_per_file=200, **kw)
        steps.append("create 300 rich rows, ids 0..299, two fragments (200 + 100)")
        # v2: a third fragment
        kw.pop("enable_v2_manifest_paths", None)
        ds = lance.write_dataset(_rich_table(300, 200), uri, mode="append", **kw)
        steps.append("append 200 rich rows, ids 300..499, one fragment")
        # v3: small deletes (.arrow) in fragments 0 and 2; fragment 1 emptied -> dropped
        ds.delete("id % 50 = 7 OR (id >= 200 AND id < 300)")
        steps.append("delete id % 50 = 7 and ids 200..299 (.arrow files; fragment 1 dropped)")
        ds = lance.dataset(uri)
        if hasattr(ds, "tags"):  # tags arrived after 0.14
            ds.tags.create("before_overwrite", ds.version)
            tags["before_overwrite"] = ds.version
        if name == "pylance_0_16_1_v2_0":
            # v4: overwrite with a new one-column schema, 6000 rows in one fragment
            ds = lance.write_dataset(_int_table(10_000, 6000), uri, mode="overwrite", **kw)
            steps.append("overwrite with schema {id int64}, 6000 rows, ids 10000..15999")
            # v5: delete > 5000 rows of that fragment -> roaring bitmap (.bin)
            ds.delete("id < 15500")
            steps.append("delete ids 10000..15499 (5500 rows, .bin file)")
            # v6: one more small append after the large delete
            ds = lance.write_dataset(_int_table(20_000, 10), uri, mode="append", **kw)
            steps.append("append 10 rows, ids 20000..20009")
            ds = lance.dataset(uri)
            ds.tags.create("first", 1)
            tags["first"] = 1
    elif name.startswith("legacy_"):
        # 0.10.18 only writes 0.1 files (and no data_format); 0.16.1 records data_format "0.1"
        kw = {"data_storage_version": "legacy"} if name == "legacy_0_16_1" else {}
        info.update(storage_version="0.1", naming="V1")
        lance.write_dataset(_int_table(0, 50), uri, **kw)
        steps.append("create 50 rows {id int64} in the legacy 0.1 file format")
        lance.write_dataset(_int_table(50, 50), uri, mode="append", **kw)
        steps.append("append 50 rows")
    else:
        raise SystemExit(f"unknown fixture {name}")

    ds = lance.dataset(uri)
    versions = [v["version"] for v in ds.versions()]
    exp = out / "expected"
    exp.mkdir()
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    rows: dict[str, int] = {}
    for v in versions:
        table = lance.dataset(uri, version=v).to_table()
        with pa.ipc.new_file(str(exp / f"v{v}.arrow"), table.schema, options=options) as writer:
            writer.write_table(table)
        rows[str(v)] = table.num_rows
    info.update(versions=versions, latest=ds.version, rows=rows, tags=tags, steps=steps)
    (out / "info.json").write_text(json.dumps(info, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
