"""Every pair of concurrent operations is accepted, retried or refused as pylance 14.0.2 does.

For each pair, the "theirs" operation and the "mine" operation are both built on version 1 of
the same three-fragment table; "theirs" is committed first, then "mine" with ``read_version=1``
through ``LanceDataset.commit``. The outcome (accepted, retryable conflict, incompatible conflict)
of lance_format must equal pylance's. Operations only pylance can build (UpdateConfig,
DataReplacement) are committed by pylance as "theirs" on both sides: our datasets are pylance's
format, so it can commit onto them. ReserveFragments has no Python constructor in pylance 14.0.2
and is left out.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import lance
import pytest

import lance_format
from lance_format.errors import CommitConflictError, RetryableCommitConflictError
from tests.parity import conflict_ops as ops

THEIRS_PYLANCE_ONLY = {
    "update_config": ops.update_config,
    "data_replacement@0": ops.data_replacement_at(0),
    "data_replacement@1": ops.data_replacement_at(1),
}
EXTRA = {
    "create_index_other_name@0": ops.create_index_named("other_idx", (0,)),
}
MINE = {**ops.OPERATIONS, **EXTRA}
THEIRS = {**ops.OPERATIONS, **EXTRA, **THEIRS_PYLANCE_ONLY}

#: Where we deliberately accept what pylance 14.0.2 retries: a compaction's Rewrite over a
#: concurrent Delete/Update of its fragments carries their deletions to the new fragments
#: (lance_format.table.rebase.RewriteRebase), so compaction does not starve under deletes.
REBASED_REWRITES = {
    ("rewrite@0", "delete@0"), ("rewrite@0", "delete_fragment@0"), ("rewrite@0", "update@0"),
    ("rewrite@1", "delete@1"), ("rewrite@1", "update@1"),
}

#: A CreateIndex over pylance's DataReplacement: pylance accepts it when the index's fields are
#: not the replaced ones; we cannot see the fields (UnknownOperation keeps fragment ids only) and
#: retry. Our indices here are on ``x``, the replacements write ``y``.
RETRIED_INDEXES = {(m, t) for m in MINE if m.startswith("create_index") for t in THEIRS_PYLANCE_ONLY
                   if t.startswith("data_replacement")}

PAIRS = [(mine, theirs) for mine in MINE for theirs in THEIRS]


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("conflict_bases")
    out = {}
    for name, lib in (("pylance", lance), ("ours", lance_format)):
        uri = root / f"{name}.lance"
        lib.write_dataset(ops.base_table(), str(uri), max_rows_per_file=ops.ROWS_PER_FRAGMENT)
        out[name] = uri
    return out


def _classify(exc: BaseException) -> str:
    if isinstance(exc, RetryableCommitConflictError):
        return "retry"
    if isinstance(exc, CommitConflictError):
        return "conflict"
    # pylance: lance.commit.CommitConflictError (an OSError) for both kinds, told apart by text
    if type(exc).__name__ == "CommitConflictError" or "commit conflict" in str(exc).lower():
        return "retry" if str(exc).lower().startswith("retryable") else "conflict"
    raise exc


def _outcome(lib: Any, base: Path, work: Path, mine: str, theirs: str) -> str:
    uri = str(work / f"{'py' if ops.is_pylance(lib) else 'ours'}.lance")
    shutil.copytree(base, uri)
    theirs_lib = lance if theirs in THEIRS_PYLANCE_ONLY else lib
    their_op = THEIRS[theirs](theirs_lib, uri, theirs_lib.dataset(uri, version=1))
    my_op = MINE[mine](lib, uri, lib.dataset(uri, version=1))
    theirs_lib.LanceDataset.commit(uri, their_op, read_version=1)
    try:
        lib.LanceDataset.commit(uri, my_op, read_version=1)
    except Exception as exc:  # noqa: BLE001 - classified, re-raised when not a conflict
        return _classify(exc)
    return "accepted"


@pytest.mark.parametrize(("mine", "theirs"), PAIRS, ids=[f"{m}-over-{t}" for m, t in PAIRS])
def test_commit_outcome_equals_pylance(bases: dict[str, Path], tmp_path: Path, mine: str, theirs: str) -> None:
    expected = _outcome(lance, bases["pylance"], tmp_path, mine, theirs)
    got = _outcome(lance_format, bases["ours"], tmp_path, mine, theirs)
    if (mine, theirs) in REBASED_REWRITES:
        assert (expected, got) == ("retry", "accepted")
    elif (mine, theirs) in RETRIED_INDEXES:
        assert (expected, got) == ("accepted", "retry")
    else:
        assert got == expected


def test_overwrite_over_overwrite_is_a_commit_conflict(tmp_path: Path) -> None:
    """The issue's case: a stale Overwrite after another Overwrite landed is refused by both."""
    t = ops.base_table()
    for lib in (lance, lance_format):
        uri = str(tmp_path / f"{lib.__name__}.lance")
        lib.write_dataset(t, uri)
        lib.write_dataset(t.slice(0, 3), uri, mode="overwrite")
        frags = ops._write_fragments(lib, t.slice(3, 4), uri)
        with pytest.raises(OSError if lib is lance else CommitConflictError, match="(?i)overwrite"):
            lib.LanceDataset.commit(uri, lib.LanceOperation.Overwrite(t.schema, frags), read_version=1)
        assert lib.dataset(uri).count_rows() == 3
