"""Helpers shared by the evolution tests (real pylance as the oracle)."""

from __future__ import annotations

import os
from pathlib import Path

import lance
import pyarrow as pa

import lance_format


def files_under(root: str | Path, sub: str) -> set[str]:
    base = Path(root) / sub
    if not base.exists():
        return set()
    return {str(Path(d, f).relative_to(root)) for d, _, fs in os.walk(base) for f in fs}


def referenced_files(uri: str) -> set[str]:
    """Data and deletion files referenced by any version of the dataset at ``uri``."""
    out: set[str] = set()
    ds = lance_format.dataset(uri)
    for v in ds.versions():
        m = ds.checkout_version(v["version"]).manifest
        for frag in m.fragments:
            for df in frag.files:
                if df.base_id is None:
                    out.add(f"data/{df.path}")
            if frag.deletion_file is not None and frag.deletion_file.base_id is None:
                out.add(frag.deletion_file.path(frag.id))
    return out


def assert_no_orphans(uri: str) -> None:
    present = files_under(uri, "data") | files_under(uri, "_deletions")
    orphans = present - referenced_files(uri)
    assert not orphans, f"files referenced by no version: {sorted(orphans)}"


def same_everywhere(uri: str) -> pa.Table:
    """Latest version read by us and by pylance (with row ids), which must agree."""
    ours = lance_format.dataset(uri).to_table(with_row_id=True)
    theirs = lance.dataset(uri).to_table(with_row_id=True)
    assert ours.equals(theirs), f"ours:\n{ours}\npylance:\n{theirs}"
    return ours
