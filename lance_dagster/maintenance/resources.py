"""Where maintenance rewrite tasks run: Spark through dagster-pyspark, or local threads.

The Spark session comes from dagster-pyspark's ``LazyPySparkResource``: the JVM starts only when a
step actually has rewrite tasks (a dry run or an already-compact dataset never starts Spark), and
users configure Spark the way they already do for their other PySpark ops.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from dagster import InitResourceContext
from dagster_pyspark import LazyPySparkResource, PySparkResource

from lance_format.maintenance.runner import LocalRunner, Runner

from .config import RunnerKind

#: Resource key the maintenance ops use for the Spark session.
SPARK_RESOURCE_KEY = "lance_pyspark"


def local_spark_config(master: str = "local[*]", extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Spark config for one machine: loopback-only, no UI, workers on this interpreter.

    Workers must run the interpreter that has ``lance_format`` installed (``spark.pyspark.python``),
    and nothing should listen on a public interface of a shared machine.
    """
    conf = {
        "spark.master": master,
        "spark.app.name": "lance-maintenance",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
    }
    conf.update(extra or {})
    return conf


class LanceLocalPySparkResource(LazyPySparkResource):
    """dagster-pyspark's lazy session resource, for one machine.

    Spark starts some Python processes (the Python data source planner among them) from the
    ``PYSPARK_PYTHON`` environment variable rather than from ``spark.pyspark.python``, so before the
    session starts this points it (and ``SPARK_LOCAL_IP``) at this interpreter and loopback. The
    ``lance`` data source is registered on the session. With ``start_on_setup`` the session starts
    when the run initializes its resources instead of on first use.
    """

    start_on_setup: bool = False

    def setup_for_execution(self, context: InitResourceContext) -> None:
        """Start the session with the run when ``start_on_setup`` (IO managers reading Spark inputs
        need an active session before the step body first touches the resource)."""
        if self.start_on_setup:
            self._init_session()

    def _init_session(self) -> None:
        if self._spark_session is None:
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        super()._init_session()
        from lance_format.spark import register

        register(self._spark_session)


def lance_pyspark_resource(master: str = "local[*]", extra: Mapping[str, str] | None = None, *,
                           start_on_setup: bool = False) -> LanceLocalPySparkResource:
    """A local Spark session resource configured by :func:`local_spark_config` (lazy by default)."""
    return LanceLocalPySparkResource(spark_config=local_spark_config(master, extra), start_on_setup=start_on_setup)


def make_runner(kind: RunnerKind, spark_resource: Any) -> Runner:
    """The runner for a step: ``SparkRunner`` on the resource's session, or local threads."""
    if kind == "local":
        return LocalRunner()
    if not isinstance(spark_resource, LazyPySparkResource | PySparkResource):
        raise TypeError(f"resource {SPARK_RESOURCE_KEY!r} must be a dagster-pyspark PySparkResource or "
                        f"LazyPySparkResource, got {type(spark_resource).__name__}")
    from lance_format.spark import SparkRunner

    runner: Runner = SparkRunner(spark_resource.spark_session)
    return runner
