"""Decoded deletion vectors are cached by content and within the session's bound."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from lance_format.session import Session
from lance_format.storage import open_store
from lance_format.table import deletion

pytestmark = pytest.mark.usefixtures("fresh_caches")


def test_deletion_cache_answers_by_file_and_count(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    df = deletion.write_deletion_file(store, 0, 1, np.array([3, 1, 2]))
    got = deletion.read_deletion_file(store, 0, df)
    assert got.tolist() == [1, 2, 3]
    got[0] = 99  # callers get their own copy
    assert deletion.read_deletion_file(store, 0, df).tolist() == [1, 2, 3]
    # a cached vector is not read again (deletion files are never rewritten in a dataset) ...
    store.delete(df.path(0))
    assert deletion.read_deletion_file(store, 0, df).tolist() == [1, 2, 3]
    # ... but an entry never answers for a description with another row count
    store.write(df.path(0), deletion.encode_arrow_deletions(np.array([7], np.uint32)))
    df = dataclasses.replace(df, num_deleted_rows=1)  # same file name; the reader checks the count
    assert deletion.read_deletion_file(store, 0, df).tolist() == [7]


def test_deletion_cache_is_bounded(tmp_path: Path) -> None:
    session = Session(metadata_cache_size_bytes=20_000)
    store = open_store(str(tmp_path), session=session)
    for frag in range(50):
        df = deletion.write_deletion_file(store, frag, 1, np.arange(frag + 1))
        assert deletion.read_deletion_file(store, frag, df).tolist() == list(range(frag + 1))
    assert session.metadata_cache.size_bytes() <= 20_000
    assert session.metadata_cache.count(deletion.DELETION_VECTOR) < 50
