"""Main job: run the example code location end to end, then print each dataset's Lance history.

``python -m example_project.main`` (what ``bash .ci/main`` runs) uses a Dagster instance in
``example_project/.data/dagster_home`` and datasets in ``example_project/.data/lance``:

1. an outside writer appends to ``reference/categories`` (declared as an asset in YAML);
2. ``refresh_all`` runs twice (ingest → clean → features → upsert → Spark aggregate, ...);
3. ``daily_partitions`` materializes the days the events fall on;
4. the maintenance jobs run once on Spark ``local[*]`` (compaction → indices → cleanup);
5. every dataset's version history is printed, maintenance commits included.

``dagster dev -w workspace.yaml`` with the same ``DAGSTER_HOME`` shows these runs in the UI.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

DEFAULT_DATA_DIR = Path(__file__).resolve().parent / ".data"

#: Pools hold one op at a time, so two maintenance runs never work on one dataset at once.
INSTANCE_YAML = "telemetry:\n  enabled: false\nconcurrency:\n  pools:\n    default_limit: 1\n"

#: The run config of the demo maintenance run: keep the last three versions, whatever their age. The
#: demo's versions are seconds old and nothing else writes meanwhile, so no commit grace (the library
#: keeps every version that was the latest in the last 5 minutes, for commits in flight).
DEMO_MAINTENANCE = {"runner": "spark", "cleanup": {"older_than": "0s", "retain_versions": 3, "commit_grace": "0s"}}


def prepare(data_dir: Path, fresh: bool) -> tuple[Path, Path]:
    """Create ``dagster_home`` and ``lance`` under ``data_dir`` and point the environment at them.

    DAGSTER_HOME is read by ``DagsterInstance.get()`` and LANCE_EXAMPLE_ROOT when the definitions
    module is imported, so this runs before either.
    """
    if fresh and data_dir.exists():
        shutil.rmtree(data_dir)
    home, root = data_dir / "dagster_home", data_dir / "lance"
    home.mkdir(parents=True, exist_ok=True)
    root.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(INSTANCE_YAML)
    os.environ["DAGSTER_HOME"] = str(home)
    os.environ["LANCE_EXAMPLE_ROOT"] = str(root)
    return home, root


def write_reference(root: Path, batches: int = 4) -> None:
    """Stand-in for another team's service: append small batches to ``reference/categories``."""
    import pyarrow as pa

    import lance_format

    from .assets import CATEGORIES

    uri = str(root / "reference" / "categories.lance")
    for i in range(batches):
        table = pa.table({"category": list(CATEGORIES), "batch": [i] * len(CATEGORIES),
                          "weight": [float(i + j) for j in range(len(CATEGORIES))]})
        lance_format.write_dataset(table, uri, mode="append" if Path(uri).exists() else "create",
                                   transaction_properties={"writer": "catalog-service"})


def format_table(header: list[str], rows: list[list[str]]) -> str:
    """Left-aligned plain-text table."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def print_histories(root: str, maintenance_runs: dict[tuple[str, int], str] | None = None) -> None:
    """Print version, time, operation, rows, partition and run id of every dataset under ``root``.

    Compaction commits carry no run id of their own; ``maintenance_runs`` ((asset, version) → run
    id, from the maintenance observations) names the run that made them.
    """
    maintenance_runs = maintenance_runs or {}
    import lance_format
    from lance_dagster import dataset_uri, version_history
    from lance_dagster.metadata import operation_label

    from .definitions import defs

    for key in sorted(defs.resolve_asset_graph().get_all_asset_keys(), key=lambda k: k.to_user_string()):
        uri = dataset_uri(root, key.path)
        ds = lance_format.dataset(uri)
        tags = ", ".join(f"{name}→v{t.version}" for name, t in sorted(ds.tags.list().items())) or "none"
        rows = [
            [f"v{r.version}", r.timestamp.strftime("%Y-%m-%d %H:%M:%S") if r.timestamp else "-",
             operation_label(r), "-" if r.rows is None else str(r.rows), r.partition_key or "",
             r.run_id or _maintenance_run(maintenance_runs, key.to_user_string(), r.version)
             or r.properties.get("writer", "-")]
            for r in reversed(version_history(ds))
        ]
        print(f"\n{key.to_user_string()}  ({uri})  tags: {tags}")
        print(format_table(["version", "time (UTC)", "operation", "rows", "partition", "run / writer"], rows))


def _maintenance_run(runs: dict[tuple[str, int], str], asset: str, version: int) -> str | None:
    run = runs.get((asset, version))
    return f"maintenance {run}" if run else None


def print_maintenance_events(instance: Any, run_ids: list[str]) -> dict[tuple[str, int], str]:
    """Print the observations the maintenance runs recorded on the assets.

    Returns:
        (asset key, Lance version) → run id for every step that committed a version.
    """
    from dagster import DagsterEventType

    made: dict[tuple[str, int], str] = {}
    print("\nmaintenance events recorded on the assets:")
    for run_id in run_ids:
        records = instance.get_records_for_run(run_id, of_type=DagsterEventType.ASSET_OBSERVATION).records
        for record in records:
            obs = record.event_log_entry.dagster_event.event_specific_data.asset_observation
            asset = obs.asset_key.to_user_string()
            print(f"  {asset:24s} {obs.description}")
            if "lance/last_maintenance" in obs.metadata:  # this step committed a version or deleted files
                made.setdefault((asset, int(obs.metadata["lance/version"].value)), run_id)
    return made


def partition_days(now: dt.datetime, days: int = 3) -> list[str]:
    """The partition keys of the last ``days`` days (the synthetic events span them)."""
    return [(now - dt.timedelta(days=d)).strftime("%Y-%m-%d") for d in range(days - 1, -1, -1)]


def main(argv: list[str] | None = None) -> int:
    """Run the example end to end and print the version histories."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="how many times to run refresh_all (default 2)")
    parser.add_argument("--fresh", action="store_true", help="delete the data directory first")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR,
                        help="where the Dagster instance and datasets live (default example_project/.data)")
    parser.add_argument("--runner", choices=["spark", "local"], default="spark",
                        help="where maintenance rewrite tasks run (default spark)")
    args = parser.parse_args(argv)
    home, root = prepare(args.data_dir.resolve(), args.fresh)
    write_reference(root)

    from dagster import DagsterInstance, colored_console_logger

    from .definitions import defs

    # Warnings only on the console (the maintenance jobs' run config is mapped, so no ``loggers`` key).
    quiet = {"console": colored_console_logger.configured({"log_level": "WARNING"})}
    maintenance_ids = []
    with DagsterInstance.get() as instance:
        def run(job_name: str, label: str, **kwargs: Any) -> Any:
            start = time.perf_counter()
            job = defs.resolve_job_def(job_name).with_logger_defs(quiet)
            # A job whose run config is mapped (the maintenance jobs) ignores the logger's configured
            # level, so its debug log is captured and shown only if the run fails.
            captured = io.StringIO()
            with contextlib.redirect_stderr(captured):
                result = job.execute_in_process(instance=instance, raise_on_error=False, **kwargs)
            print(f"{label}: {result.run_id}  success={result.success}  ({time.perf_counter() - start:.1f}s)")
            if not result.success:
                print(captured.getvalue(), file=sys.stderr)
                raise SystemExit(1)
            return result

        for i in range(args.runs):
            run("refresh_all", f"refresh_all {i + 1}/{args.runs}")
        for day in partition_days(dt.datetime.now(dt.UTC)):
            run("daily_partitions", f"daily_partitions {day}", partition_key=day)
        config = {**DEMO_MAINTENANCE, "runner": args.runner}
        for job in ("lance_maintenance", "reference_maintenance"):
            result = run(job, f"{job} (once)", run_config=config)
            maintenance_ids.append(result.run_id)
        made = print_maintenance_events(instance, maintenance_ids)
    print(f"\nDAGSTER_HOME={home}")
    print_histories(str(root), made)
    return 0


if __name__ == "__main__":
    sys.exit(main())
