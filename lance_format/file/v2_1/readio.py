"""Reading page buffers into Arrow-pool memory (see :meth:`ByteSource.read_arrays`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from lance_format.file.container import ByteSource


def read_ranges(
    source: ByteSource, ranges: Sequence[tuple[int, int]], what: str = "page buffer"
) -> list[np.ndarray]:
    """Read ``(start, length)`` ranges of ``source`` as uint8 arrays (read-only views)."""
    return source.read_arrays(ranges, what)
