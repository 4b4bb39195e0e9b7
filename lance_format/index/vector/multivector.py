"""IVF indices on multivector columns (``list<fixed_size_list<T, d>>``).

pylance 14.0.2 builds every IVF kind on such a column, with the cosine metric only
(``rust/lance/src/index/vector.rs``: "multivector type supports only cosine distance"). The
segment has the same layout as a single-vector one: each vector of a row is one index entry
carrying the row's id, so a row appears once per vector it holds (checked on the files pylance
writes). A build therefore trains and encodes on the rows' vectors laid out one after the other,
each with its row id repeated; searches score rows by late interaction
(:mod:`lance_format.search.multivector`).

Training samples whole rows, as pylance does (``maybe_sample_training_data`` in
``rust/lance/src/index/vector/utils.rs``): a sample of ``n`` vectors is ``ceil(n / v)`` rows (at
least :data:`MIN_SAMPLE_ROWS`), ``v`` the vectors of a row, and every vector of those rows is
trained on, normalised for cosine like single vectors. pylance takes ``v`` from the first non-empty
row of a small random sample; we take the mean over such a sample, which gives the same sample
size on rows of one length and is steadier when lengths vary.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import IndexBuildRefusedError
from lance_format.index.kind import TrainingData


def is_multivector(typ: pa.DataType) -> bool:
    """Whether ``typ`` is a list of fixed-size-list vectors."""
    return bool(pa.types.is_list(typ) and pa.types.is_fixed_size_list(typ.value_type))


def vector_type(typ: pa.DataType) -> pa.DataType:
    """The type of one vector of the column (the column's own type for a single-vector column)."""
    return typ.value_type if is_multivector(typ) else typ


def check_metric(column: str, index_type: str, metric: str) -> None:
    """pylance builds multivector indices on cosine only.

    Raises:
        IndexBuildRefusedError: another metric (a ``RuntimeError`` too, as pylance's refusal).
    """
    if metric != "cosine":
        raise IndexBuildRefusedError(f"{index_type} index on multivector column {column!r}: multivector columns "
                                f"support only the cosine metric, got {metric!r}")


def flatten(data: TrainingData) -> TrainingData:
    """One entry per vector: the rows' vectors back to back, each with its row's id.

    Null rows and empty rows give no entries; null vectors stay null (the build leaves them out).
    """
    values = data.values
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    lengths = np.asarray(pc.fill_null(pc.list_value_length(values), 0).to_numpy(zero_copy_only=False), np.int64)
    if values.null_count:  # a null row may still span values; flatten() skips them, so count none
        lengths[np.asarray(values.is_null().to_numpy(zero_copy_only=False), bool)] = 0
    return TrainingData(values.flatten(), np.repeat(np.asarray(data.ids, np.uint64), lengths))


#: Fewest rows a multivector training sample holds (pylance's floor).
MIN_SAMPLE_ROWS = 128
#: Rows drawn to estimate the vectors of a row.
PROBE_ROWS = 64


def _row_lengths(values: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.int64]:
    """Vectors of each non-null row."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    lengths = np.asarray(pc.fill_null(pc.list_value_length(values), 0).to_numpy(zero_copy_only=False), np.int64)
    return lengths[np.asarray(values.is_valid().to_numpy(zero_copy_only=False), bool)] if values.null_count \
        else lengths


def sample_vectors(sample_rows: Callable[[int], TrainingData], n: int) -> TrainingData:
    """About ``n`` training vectors: the vectors of ``ceil(n / v)`` sampled rows (at least
    :data:`MIN_SAMPLE_ROWS`), one entry per vector (:func:`flatten`).

    Args:
        sample_rows: Returns up to ``k`` rows drawn at random from the indexed fragments.
        n: Vectors wanted (IVF and quantizer sample sizes count vectors).
    """
    lengths = _row_lengths(sample_rows(PROBE_ROWS).values)
    lengths = lengths[lengths > 0]
    per_row = float(lengths.mean()) if lengths.size else 1.0
    return flatten(sample_rows(max(MIN_SAMPLE_ROWS, math.ceil(n / per_row))))
