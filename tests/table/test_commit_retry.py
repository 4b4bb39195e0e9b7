"""Lost commit races rebase and retry, then give up after max_retries."""

from __future__ import annotations

from pathlib import Path

import lance
import pytest

import lance_format as lf
from lance_format.errors import (
    CommitConflictError,
)

from .helpers import T, state


def _interfere(monkeypatch: pytest.MonkeyPatch, uri: str, times: int) -> list[int]:
    """Make another writer commit an append right before each of our manifest puts."""
    from lance_format.storage.local import LocalStore

    real = LocalStore.put_if_absent
    done: list[int] = []
    busy = {"now": False}

    def put_if_absent(self: LocalStore, key: str, data: bytes) -> None:
        if key.startswith("_versions/") and not busy["now"] and len(done) < times:
            busy["now"] = True
            try:
                done.append(lance.write_dataset(T.slice(0, 1), uri, mode="append").version)
            finally:
                busy["now"] = False
        real(self, key, data)

    monkeypatch.setattr(LocalStore, "put_if_absent", put_if_absent)
    return done


def test_lost_races_rebase_then_give_up_after_max_retries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(T, uri)
    frags = lf.write_fragments(T.slice(0, 3), uri)
    done = _interfere(monkeypatch, uri, times=2)
    ds = lf.LanceDataset.commit(uri, lf.LanceOperation.Append(frags), read_version=1, max_retries=2)
    assert done == [2, 3] and ds.version == 4
    assert lance.dataset(uri).count_rows() == 10 + 2 + 3
    monkeypatch.undo()

    frags = lf.write_fragments(T.slice(0, 3), uri)
    done = _interfere(monkeypatch, uri, times=10)
    before = state(uri)["versions"]
    with pytest.raises(CommitConflictError, match="2 retries"):
        lf.LanceDataset.commit(uri, lf.LanceOperation.Append(frags), read_version=4, max_retries=2)
    monkeypatch.undo()
    assert done == [5, 6, 7]
    assert len(state(uri)["versions"]) == len(before) + 3  # only the other writer's versions
    assert lance.dataset(uri).version == 7 and lance.dataset(uri).count_rows() == 18
    assert [v["version"] for v in lf.dataset(uri).versions()] == list(range(1, 8))
