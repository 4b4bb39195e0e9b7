"""``lance_format.LanceDataset`` inputs: the upstream dataset itself, pinned to the version read."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lance_format.dataset import LanceDataset
from lance_format.errors import UnsupportedFrameTypeError

from .base import FrameHandler

if TYPE_CHECKING:
    from ..reader import ArrowSource


class LanceDatasetHandler(FrameHandler):
    """Loads an input annotated ``LanceDataset`` lazily: nothing is read until the step scans it.

    The dataset is checked out at the version the IO manager records as read, so the step sees
    exactly that version even if the upstream commits again meanwhile. A dataset carries no row
    filter: a partitioned step gets the whole version and :attr:`ArrowSource.row_filter` is logged
    and recorded in the input's metadata for it to apply. Outputs are refused: return the rows.
    """

    name = "lance_format.LanceDataset"
    input_types = ("lance_format.LanceDataset",)
    stores_outputs = False

    def handles_type(self, tp: Any) -> bool:
        """``LanceDataset`` and subclasses."""
        return isinstance(tp, type) and issubclass(tp, LanceDataset)

    def handles_value(self, obj: Any) -> bool:
        """Never: a dataset handle is not data to store."""
        return False

    def to_arrow(self, obj: Any) -> pa.Table:
        """Refused (see the class docstring)."""
        raise UnsupportedFrameTypeError("a LanceDataset cannot be stored as an output; return its rows "
                                        "(e.g. ds.to_table()) instead")

    def from_arrow(self, source: ArrowSource, tp: Any) -> LanceDataset:
        """The dataset at the version read."""
        return source.dataset
