"""Dataset deletes choose .arrow or .bin deletion files by the cumulative count, as pylance does."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa

import lance_format as lf


def test_deletion_kind_threshold_is_cumulative_like_pylance(tmp_path: Path) -> None:
    big = pa.table({"a": pa.array(range(12_000), pa.int64())})
    kinds: dict[str, list[str]] = {}
    for who in ("ours", "theirs"):
        uri = str(tmp_path / who)
        lf.write_dataset(big, uri, max_rows_per_file=6_000)
        # pylance: a fresh vector of >= 5000 rows is a bitmap; a set grows into one only past 5000.
        steps = ["a < 4999", "a = 4999", "a = 5000", "a >= 6000 and a < 11000", "a >= 11000"]
        seen = []
        for pred in steps:
            if who == "ours":
                lf.dataset(uri).delete(pred)
            else:
                lance.dataset(uri).delete(pred)
            frags = lance.dataset(uri).get_fragments()
            seen.append(",".join(
                f"{f.fragment_id}:{f.metadata.deletion_file.file_type if f.metadata.deletion_file else '-'}"
                f":{f.metadata.deletion_file.num_deleted_rows if f.metadata.deletion_file else 0}"
                f":{f.metadata.physical_rows}" for f in frags))
        kinds[who] = seen
        ours, theirs = lf.dataset(uri), lance.dataset(uri)
        assert ours.to_table().equals(theirs.to_table())
        assert [(f.fragment_id, f.physical_rows, f.count_rows()) for f in ours.get_fragments()] == [
            (f.fragment_id, f.physical_rows, f.count_rows()) for f in theirs.get_fragments()]
    assert kinds["ours"] == kinds["theirs"]
    assert [k.split(",")[0] for k in kinds["ours"]][:3] == ["0:array:4999:6000", "0:array:5000:6000",
                                                            "0:bitmap:5001:6000"]
    assert kinds["ours"][3] == "0:bitmap:5001:6000,1:bitmap:5000:6000"
    assert kinds["ours"][4] == "0:bitmap:5001:6000"  # the fully deleted fragment is dropped
