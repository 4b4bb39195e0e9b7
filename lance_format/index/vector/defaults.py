"""pylance's k-means defaults for vector builds, in a module a query can import for free.

``create_index``'s parameter check (:mod:`lance_format.index.kinds.vector`) names them and is
loaded for every vector segment; k-means itself (:mod:`lance_format.index.vector.kmeans`) is
build code and is imported only when a build runs.
"""

from __future__ import annotations

#: pylance's defaults (``KMeansParams``): iterations of Lloyd's algorithm.
MAX_ITERS = 50
#: Training rows per partition pylance samples (``lance.ivf.sample_rate``).
SAMPLE_RATE = 256
