"""Our errors are instances of the builtin exception pylance 14.0.2 raises in the same situation.

Situations come from the bad-input table of ``tests/safety/test_bad_input_edges.py`` (a few per
pair of our class and pylance's builtin, measured over all 417 refused cases) and from issue 27.
Each runs on pylance and on ours; ``pytest.raises(<pylance's builtin>)`` must pass on both,
and ours must still be a :class:`LanceError`. What we do not follow is listed in
``lance_format/errors.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import LanceError
from tests.safety import test_bad_input_edges as edges

#: (case id in the bad-input table, the builtin pylance raises there).
FROM_BAD_INPUT: list[tuple[str, type[BaseException]]] = [
    ("drop_index-missing", RuntimeError),
    ("count_rows-filter-1e999", OSError),
    ("delete-int-overflow", OSError),
    ("write-uri-memory-nul", OSError),
    ("merge_insert-dup-source-keys", OSError),
    ("to_table-limit-u64", OverflowError),
    ("scanner-batch_size-neg", OverflowError),
    ("take-indices-u64", OverflowError),
    ("write-max_bytes_per_file-u64", OverflowError),
    ("to_table-limit-str", TypeError),
    ("to_batches-columns-str", TypeError),
    ("dataset-storage_options-list", TypeError),
    ("merge_insert-data-int", TypeError),
    ("to_table-limit-neg", ValueError),
    ("scanner-columns-dict-unknown", ValueError),
    ("scanner-filter-empty", ValueError),
    ("dataset-uri-file-nul-inside", ValueError),
    ("index-column-two", NotImplementedError),
    ("append-wrong-schema", OSError),
    ("add_columns-nonnull-field", OSError),
    ("alter-unknown", OSError),
    ("alter-cast-string-to-int", OSError),
    ("drop-unknown", ValueError),
    ("drop-all", ValueError),
    ("tag-create-300-chars", OSError),
    ("tag-create-slash", OSError),
    ("tag-create-int-name", TypeError),
    ("tag-delete-int", TypeError),
    ("branch-create-int", TypeError),
    ("dataset-version-bad-tag", ValueError),
    ("tag-update-300-chars", ValueError),
    ("checkout_version-missing-tag", OSError),
    ("tag-update-missing", ValueError),
    ("tag-delete-missing", ValueError),
    ("tag-get_version-missing", ValueError),
    ("index-type-bogus", NotImplementedError),
    ("index-struct", TypeError),
    ("write-uri-unknown-scheme", OSError),
    ("dataset-uri-unknown-scheme", ValueError),
    ("write-data_storage_version-unknown", ValueError),
    ("branch-create-missing-version", OSError),
    ("checkout_version-neg", OverflowError),
    ("checkout_version-u64", OverflowError),
    ("tag-create-u64-version", OverflowError),
    ("dataset-asof-before-first", ValueError),
    ("tag-create-missing-version", ValueError),
    ("tag-create-zero-version", ValueError),
]
_CASES = {c.id: c for c in edges.CASES}


def _call(lib: Any, case: edges.Case, base: Path) -> None:
    base.mkdir()
    uri = str(base / "ds")
    lib.write_dataset(edges.T, uri)
    target = {"ds": lib.dataset(uri), "uri": uri, "new": str(base / "new")}[case.target]
    case.call(lib, target)


@pytest.mark.parametrize(("case_id", "builtin"), FROM_BAD_INPUT, ids=[c for c, _ in FROM_BAD_INPUT])
def test_bad_input_error_is_what_pylance_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                case_id: str, builtin: type[BaseException]) -> None:
    monkeypatch.chdir(tmp_path)
    case = _CASES[case_id]
    with pytest.raises(builtin):
        _call(lance, case, tmp_path / "pylance")
    with pytest.raises(builtin) as ours:
        _call(lance_format, case, tmp_path / "ours")
    assert isinstance(ours.value, LanceError)


def _write_fragments(lib: Any) -> Any:
    return sys.modules["lance.fragment"].write_fragments if lib is lance else lib.write_fragments


EMPTY = pa.table({"x": pa.array([], pa.int64())})


def _stale_overwrite(lib: Any, uri: str) -> None:
    lib.write_dataset(pa.table({"x": [2]}), uri, mode="overwrite")
    frags = _write_fragments(lib)(pa.table({"x": [3]}), uri)
    lib.LanceDataset.commit(uri, lib.LanceOperation.Overwrite(pa.schema([("x", pa.int64())]), frags),
                            read_version=1)


#: Situations named in issue 27: (id, call on (library, uri of a one-row dataset), pylance's builtin).
ISSUE: list[tuple[str, Any, type[BaseException]]] = [
    ("missing-dataset", lambda lib, uri: lib.dataset(uri + "-nope"), ValueError),
    ("tag-on-missing-version", lambda lib, uri: lib.dataset(uri).tags.create("t", 99), ValueError),
    ("append-unknown-column", lambda lib, uri: lib.write_dataset(pa.table({"zz": [1]}), uri, mode="append"), OSError),
    ("empty-fragment", lambda lib, uri: lib.LanceFragment.create(uri, EMPTY), OSError),
    ("stale-overwrite", _stale_overwrite, OSError),
    ("checkout-missing-version", lambda lib, uri: lib.dataset(uri).checkout_version(99), OSError),
    ("dataset-missing-version", lambda lib, uri: lib.dataset(uri, version=99), ValueError),
]


@pytest.mark.parametrize(("name", "call", "builtin"), ISSUE, ids=[i[0] for i in ISSUE])
def test_issue_situation_error_is_what_pylance_raises(tmp_path: Path, name: str, call: Any,
                                                      builtin: type[BaseException]) -> None:
    for lib in (lance, lance_format):
        uri = str(tmp_path / f"{lib.__name__}.lance")
        lib.write_dataset(pa.table({"x": pa.array([1], pa.int64())}), uri)
        with pytest.raises(builtin) as info:
            call(lib, uri)
        if lib is lance_format:
            assert isinstance(info.value, LanceError)
