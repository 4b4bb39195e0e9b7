"""Which distance metric a ``nearest=`` search uses, and which element types each metric accepts.

pylance 14.0.2 (checked on its results; the refusal is raised in upstream
``rust/lance/src/index/vector/utils.rs``): with no ``metric`` and no usable index a search of
``uint8`` vectors counts differing bits (``hamming``) and a search of float vectors uses ``l2``;
an index answers with its own metric. ``hamming`` applies to ``uint8`` vectors only and ``l2``,
``cosine`` and ``dot`` to float vectors only: any other pairing is refused before a row is read,
also for multivector columns, instead of returning distances of another meaning.
"""

from __future__ import annotations

import pyarrow as pa

from lance_format.errors import InvalidInputError
from lance_format.index.vector.distance import Metric


def default_metric(element: pa.DataType) -> Metric:
    """The metric of a search that names none and uses no index, for vectors of ``element``."""
    return "hamming" if pa.types.is_uint8(element) else "l2"


def check_metric(metric: Metric, element: pa.DataType, column: str) -> None:
    """Refuse a metric that does not apply to the column's vector elements.

    Raises:
        InvalidInputError: ``hamming`` on float vectors, or ``l2``/``cosine``/``dot`` on ``uint8``
            vectors (pylance: ``ValueError``).
    """
    if (metric == "hamming") != pa.types.is_uint8(element):
        raise InvalidInputError(f"nearest= on {column!r}: distance metric {metric!r} does not apply to {element} "
                                "vectors (hamming needs uint8 vectors; l2, cosine and dot need float vectors)")
