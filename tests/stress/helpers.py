"""Checks the kill -9 suites share."""

from __future__ import annotations

from pathlib import Path

import lance_format as lf
from lance_format.table.naming import data_file_key


def open_with_every_file(uri: str, version: int | None = None) -> lf.LanceDataset:
    """Open ``version`` (latest by default) and assert every file it references exists."""
    ds = lf.dataset(uri) if version is None else lf.dataset(uri, version=version)
    for frag in ds.manifest.fragments:
        for df in frag.files:
            assert Path(uri, data_file_key(df.path)).exists(), f"v{ds.version}: missing {df.path}"
        if frag.deletion_file is not None:
            assert Path(uri, frag.deletion_file.path(frag.id)).exists(), f"v{ds.version}: missing deletion file"
    return ds
