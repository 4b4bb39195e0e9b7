"""Building a loopback-only local SparkSession and registering the ``lance`` data source.

``local_session`` is for tests, notebooks and benchmarks on one machine: Spark binds to
127.0.0.1 only and its Python workers run the current interpreter (so executors import
the same ``lance_format`` as the driver). On a cluster, build the session as usual and call
:func:`register` once.
"""

from __future__ import annotations

import os
import sys
import weakref
from typing import Any

from lance_format.spark.source import LanceDataSource
from lance_format.spark.sql_functions import register_functions

_REGISTERED: weakref.WeakSet[Any] = weakref.WeakSet()

#: Spark's setting naming the module its Python worker daemon runs ...
DAEMON_MODULE_KEY = "spark.python.daemon.module"
#: ... and ours (named, not imported: the driver needs none of what it preloads).
DAEMON_MODULE = "lance_format.spark.daemon"


def local_session(master: str = "local[2]", *, app_name: str = "lance-format", shuffle_partitions: int = 4,
                  conf: dict[str, str] | None = None) -> Any:
    """Create (or get) a local SparkSession bound to loopback with the ``lance`` source registered.

    Args:
        master: Spark master URL, ``local[N]`` for N worker threads.
        app_name: Application name.
        shuffle_partitions: ``spark.sql.shuffle.partitions`` (small for small local data).
        conf: Extra Spark configuration. Unless it names a ``spark.python.daemon.module``,
            the workers fork from :mod:`lance_format.spark.daemon` (the ``lance`` source's
            code preloaded, so a fresh worker does not import it per task).

    Returns:
        The ``pyspark.sql.SparkSession``.
    """
    # Workers must run this interpreter (the virtualenv holding lance_format), and
    # nothing may listen on a public interface of a shared machine.
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        # On, as on many clusters: the data source takes no filters from Spark, so a reused
        # DataFrame stays correct either way (lance_format/spark/reader.py says why).
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    for key, value in with_defaults(conf).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


def with_defaults(conf: dict[str, str] | None) -> dict[str, str]:
    """``conf`` plus the settings :func:`local_session` adds unless given: the preloading worker daemon."""
    out = dict(conf or {})
    out.setdefault(DAEMON_MODULE_KEY, DAEMON_MODULE)
    return out


def register(spark: Any) -> None:
    """Register the ``lance`` data source and the Lance SQL functions with ``spark`` (once per session).

    After this, ``spark.read.format("lance")``, ``spark.readStream.format("lance")``,
    ``df.write.format("lance")``, ``df.writeStream.format("lance")`` and the table functions
    of :mod:`lance_format.spark.sql_functions` (``lance_optimize``, ``lance_vacuum``,
    ``lance_create_index``, ``lance_versions``) work in this session.
    """
    if spark in _REGISTERED:
        return
    spark.dataSource.register(LanceDataSource)
    register_functions(spark)
    _REGISTERED.add(spark)
