"""optimize_indices(transaction_properties=) stores them with its CreateIndex commit (lineage for schedulers)."""

from pathlib import Path

import pyarrow as pa

import lance_format


def test_optimize_indices_commit_carries_transaction_properties(tmp_path: Path) -> None:
    uri = str(tmp_path / "t.lance")
    ds = lance_format.write_dataset(pa.table({"id": pa.array(range(10), pa.int64())}), uri)
    ds.create_scalar_index("id", "BTREE")
    ds = lance_format.write_dataset(pa.table({"id": pa.array(range(10, 20), pa.int64())}), uri, mode="append")
    ds.optimize.optimize_indices(transaction_properties={"dagster/run_id": "r1"})
    txn = ds.read_transaction(ds.version)
    assert type(txn.operation).__name__ == "CreateIndex"
    assert txn.transaction_properties == {"dagster/run_id": "r1"}
    assert ds.stats.index_stats("id_idx").num_unindexed_rows == 0
