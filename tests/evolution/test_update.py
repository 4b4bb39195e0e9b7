"""update(values, where): counts, transaction shape, lineage and conflicts as in pylance."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError
from lance_format.evolution.update import UpdateResult

from ._util import assert_no_orphans, same_everywhere

BASE = pa.table({"id": list(range(8)), "v": [f"x{i}" for i in range(8)], "n": [1.5] * 8})


@pytest.mark.parametrize("stable", [False, True], ids=["addr", "stable"])
@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_update_matches_pylance(tmp_path: Path, stable: bool, version: str) -> None:
    uris = {"ours": str(tmp_path / "o"), "pylance": str(tmp_path / "p")}
    for uri in uris.values():
        lance.write_dataset(BASE, uri, max_rows_per_file=3, enable_stable_row_ids=stable,
                            data_storage_version=version)
    calls = [({"v": "upper(v)"}, "id > 4"), ({"n": "n * 2", "v": "'k'"}, "id = 1"), ({"n": "0"}, None),
             ({"v": "v"}, "id > 100")]
    for values, where in calls:
        ours = lance_format.dataset(uris["ours"]).update(values, where)
        theirs = lance.dataset(uris["pylance"]).update(values, where)
        assert isinstance(ours, UpdateResult) and ours == theirs
        assert same_everywhere(uris["ours"]).equals(same_everywhere(uris["pylance"]))
        if stable:
            cols = ["id", "_row_created_at_version", "_row_last_updated_at_version"]
            assert lance.dataset(uris["ours"]).to_table(columns=cols).equals(
                lance.dataset(uris["pylance"]).to_table(columns=cols))
    txn = lance_format.dataset(uris["ours"]).read_transaction(2)
    assert txn is not None and txn.operation.kind == "update"
    assert txn.operation.fields_for_preserving_frag_bitmap == (1,)  # type: ignore[attr-defined]
    assert_no_orphans(uris["ours"])


def test_update_refuses_unknown_columns_and_bad_sql(tmp_path: Path) -> None:
    uri = str(tmp_path / "bad")
    ds = lance_format.write_dataset(BASE, uri)
    with pytest.raises(InvalidInputError, match="nope"):
        ds.update({"nope": "1"})
    with pytest.raises(InvalidInputError, match="zzz"):
        ds.update({"v": "zzz + 1"})
    with pytest.raises(InvalidInputError, match="cannot be stored"):
        ds.update({"n": "'text'"}, where="id = 1")
    assert lance_format.dataset(uri).version == 1
    assert_no_orphans(uri)


def test_update_over_a_concurrent_update_of_the_same_row_is_rerun(tmp_path: Path) -> None:
    uri = str(tmp_path / "race")
    stale = lance_format.write_dataset(BASE, uri)
    lance.dataset(uri).update({"v": "'theirs'"}, where="id = 3")
    result = stale.update({"n": "n + 1"}, where="id = 3")
    assert result["num_rows_updated"] == 1
    row = same_everywhere(uri).filter(pa.compute.equal(pa.compute.field("id"), 3))
    assert row.column("v").to_pylist() == ["theirs"] and row.column("n").to_pylist() == [2.5]
    assert_no_orphans(uri)
