"""pylance's ``lance.udf`` module: :func:`batch_udf`, :class:`BatchUDF`, :class:`BatchUDFCheckpoint`.

The code lives in :mod:`lance_format.evolution.udf` beside ``add_columns``; this module keeps
pylance's import path.
"""

from __future__ import annotations

from lance_format.evolution.udf import BatchUDF, BatchUDFCheckpoint, batch_udf

__all__ = ["BatchUDF", "BatchUDFCheckpoint", "batch_udf"]
