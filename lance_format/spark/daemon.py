"""A PySpark worker daemon whose workers start with the ``lance`` source's code already loaded.

Spark starts one Python daemon per executor (``python -m <spark.python.daemon.module>``) and
forks a Python worker from it for each task slot; a worker imports what the tasks it runs
need. Cold, that is the data source's modules (~0.2-1 s of CPU depending on bytecode
caching), pyarrow and numpy, pandas (pyarrow imports it on the first ``pa.scalar`` /
``to_numpy``: ~0.45 s) and PySpark's worker module, again in every fresh worker. This
module imports all of them once in the daemon, then runs PySpark's own daemon loop
(``pyspark.daemon.manager``), so every forked worker inherits them.

Use it with ``.config("spark.python.daemon.module", "lance_format.spark.daemon")``;
:func:`lance_format.spark.local_session` sets it unless the caller configured a daemon. It
only matters where Spark forks workers from a daemon (``spark.python.use.daemon``, the
default on Linux and macOS); the module must be importable by the executors' Python. Spark
4.x reads the setting for task workers (``pyspark.worker``: the source's read and write tasks,
UDFs); its driver-side planner workers (``pyspark.sql.worker.*``: schema, read planning,
commit) always fork from ``pyspark.daemon`` (``PythonPlannerRunner`` does not consult it).

Forking after these imports is safe for what they start: importing them starts no Python
threads (PySpark's own daemon avoids importing pyarrow and pandas before forking because
they may; these versions start only native helper threads, which ``fork`` does not copy
and whose libraries re-create them in the child).
"""

from __future__ import annotations

import contextlib
import os

import pyarrow  # noqa: F401
import pyarrow.compute  # noqa: F401
from pyspark import daemon as _pyspark_daemon
from pyspark import worker as _pyspark_worker  # noqa: F401  (the module every worker runs)
from pyspark.sql.worker import plan_data_source_read  # noqa: F401  (defines the read function's home)

from lance_format.spark import reader, source, writer  # noqa: F401  (what read and write tasks unpickle)

# pyarrow imports pandas on a task's first pa.scalar / to_numpy (file encoders do both): once here.
with contextlib.suppress(ImportError):
    import pandas  # noqa: F401

#: Set in the daemon's environment before it forks: a worker forked from this daemon sees it.
PRELOADED_ENV = "LANCE_FORMAT_SPARK_DAEMON"


def main() -> None:
    """Run PySpark's daemon loop with this module's imports in place (never returns normally)."""
    os.environ[PRELOADED_ENV] = "1"
    _pyspark_daemon.manager()


if __name__ == "__main__":
    main()


__all__ = ["PRELOADED_ENV", "main"]
