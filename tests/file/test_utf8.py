"""UTF-8 and offset checks of decoded string columns: same verdict as Arrow's full validation."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lance_format.errors import CorruptFileError
from lance_format.file.utf8 import check_utf8, string_columns


def _strings(typ: pa.DataType, offsets: list[int], data: bytes) -> pa.Array:
    width = np.int64 if pa.types.is_large_string(typ) else np.int32
    return pa.Array.from_buffers(typ, len(offsets) - 1,
                                 [None, pa.py_buffer(np.asarray(offsets, dtype=width)), pa.py_buffer(data)])


def _check(array: pa.Array) -> None:
    batch = pa.RecordBatch.from_arrays([pa.array([1] * len(array)), array], names=["n", "s"])
    check_utf8(batch, string_columns(batch.schema), "f.lance")


@pytest.mark.parametrize("typ", [pa.string(), pa.large_string()])
def test_valid_ascii_and_non_ascii_strings_pass(typ: pa.DataType) -> None:
    _check(pa.array(["abc", "", "zz"], typ))
    _check(pa.array(["héllo", "日本", None], typ))
    _check(pa.array(["abc", "héllo", "x", "日本"], typ).slice(1, 2))  # offset into the buffers


@pytest.mark.parametrize("typ", [pa.string(), pa.large_string()])
@pytest.mark.parametrize(("offsets", "data", "problem"), [
    ([0, 2, 1, 3], b"abc", "not monotonic"),
    ([0, 1, 3], b"a\xff\xfe", "[Uu][Tt][Ff]"),
])
def test_bad_offsets_or_bytes_name_file_and_column(typ: pa.DataType, offsets: list[int], data: bytes,
                                                   problem: str) -> None:
    # (offsets past the data buffer never get here: Arrow refuses them when the batch is built)
    with pytest.raises(CorruptFileError, match=f"f.lance: column 's' holds invalid data .*{problem}"):
        _check(_strings(typ, offsets, data))


def test_slice_checks_only_its_own_bytes() -> None:
    # bytes outside the slice are not the slice's values: invalid ones there do not matter
    whole = _strings(pa.string(), [0, 2, 4, 6], b"\xff\xfeabcd")
    _check(whole.slice(1, 2))
    with pytest.raises(CorruptFileError, match="column 's'"):
        _check(whole.slice(0, 2))
