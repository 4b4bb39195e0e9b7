"""Small datasets built by us or by pylance, and an every-version comparison."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa

import lance_format


def table(start: int, n: int) -> pa.Table:
    """``n`` rows with ids ``start..start+n`` and a string column."""
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "s": [f"v{i}" for i in ids]})


def build(path: Path, sizes: list[int], *, writer: str = "ours", dsv: str = "2.2", stable: bool = False,
          delete: str | None = None) -> str:
    """Write one fragment per entry of ``sizes`` (each an append), then optionally delete."""
    uri = str(path)
    start = 0
    for i, n in enumerate(sizes):
        mode = "append" if i else "create"
        if writer == "ours":
            lance_format.write_dataset(table(start, n), uri, mode=mode, data_storage_version=dsv,  # type: ignore[arg-type]
                                       enable_stable_row_ids=stable)
        else:
            lance.write_dataset(table(start, n), uri, mode=mode, data_storage_version=dsv,
                                enable_stable_row_ids=stable)
        start += n
    if delete:
        if writer == "ours":
            lance_format.dataset(uri).delete(delete)
        else:
            lance.dataset(uri).delete(delete)
    return uri


def assert_same_at_every_version(uri: str) -> None:
    """pylance validates the dataset, and both libraries read the same rows at every version."""
    latest = lance.dataset(uri)
    latest.validate()
    ours = lance_format.dataset(uri)
    assert [v["version"] for v in ours.versions()] == [v["version"] for v in latest.versions()]
    for v in latest.versions():
        theirs = lance.dataset(uri, version=v["version"]).to_table()
        mine = lance_format.dataset(uri, version=v["version"]).to_table()
        assert mine.equals(theirs), f"version {v['version']} differs"
