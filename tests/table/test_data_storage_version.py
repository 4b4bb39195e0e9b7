"""The data storage version is recorded in manifests and data files alike."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_format as lf


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_data_storage_version_recorded_everywhere(tmp_path: Path, version: str) -> None:
    uri = str(tmp_path / "ds")
    t = pa.table({"a": pa.array(range(100), pa.int64()), "s": [str(i) for i in range(100)]})
    lf.write_dataset(t, uri, data_storage_version=version, max_rows_per_file=40)  # type: ignore[arg-type]
    lf.write_dataset(t, uri, mode="append")  # append keeps the dataset's version
    theirs = lance.dataset(uri)
    assert theirs.data_storage_version == version == lf.dataset(uri).data_storage_version
    major, minor = map(int, version.split("."))
    for frag in theirs.get_fragments():
        for df in frag.metadata.files:
            assert (df.file_major_version, df.file_minor_version) == (major, minor)
    assert theirs.to_table().equals(pa.concat_tables([t, t]))
    # pylance appends to our dataset and we read both
    lance.write_dataset(t.slice(0, 5), uri, mode="append")
    assert lf.dataset(uri).to_table().equals(lance.dataset(uri).to_table())
