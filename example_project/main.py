"""Main job: materialize the example assets twice, then print each dataset's Lance version history.

Run ``python -m example_project.main`` from the repository root. It uses Dagster's default
embedded (sqlite) instance in ``example_project/.data/dagster_home`` and stores the datasets in
``example_project/.data/lance``; ``dagster dev -w workspace.yaml`` with the same ``DAGSTER_HOME``
shows these runs in the UI. The history is read back through ``lance_format`` alone: operation
and run id come from each commit's transaction properties.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

DEFAULT_DATA_DIR = Path(__file__).resolve().parent / ".data"

_INSTANCE_YAML = "telemetry:\n  enabled: false\n"


def _prepare(data_dir: Path, fresh: bool) -> tuple[Path, Path]:
    """Create ``dagster_home`` and ``lance`` under ``data_dir`` and point the environment at them.

    DAGSTER_HOME is read by ``DagsterInstance.get()`` and LANCE_EXAMPLE_ROOT when the definitions
    module is imported, so this runs before either.
    """
    if fresh and data_dir.exists():
        shutil.rmtree(data_dir)
    home, root = data_dir / "dagster_home", data_dir / "lance"
    home.mkdir(parents=True, exist_ok=True)
    root.mkdir(parents=True, exist_ok=True)
    yaml = home / "dagster.yaml"
    if not yaml.exists():
        yaml.write_text(_INSTANCE_YAML)
    os.environ["DAGSTER_HOME"] = str(home)
    os.environ["LANCE_EXAMPLE_ROOT"] = str(root)
    return home, root


def _format_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def print_histories(root: str) -> None:
    """Print version, time, operation, rows and run id of every dataset under ``root``."""
    import lance_format
    from lance_dagster import dataset_uri, version_history

    from .definitions import ASSETS

    for assets_def in ASSETS:
        for key in assets_def.keys:
            uri = dataset_uri(root, key.path)
            ds = lance_format.dataset(uri)
            rows = [
                [
                    str(r.version),
                    r.timestamp.strftime("%Y-%m-%d %H:%M:%S") if r.timestamp else "-",
                    r.operation or "-",
                    "-" if r.rows is None else str(r.rows),
                    r.run_id or "-",
                ]
                for r in reversed(version_history(ds))
            ]
            print(f"\n{key.to_user_string()}  ({uri})")
            print(_format_table(["version", "time (UTC)", "operation", "rows", "run id"], rows))


def main(argv: list[str] | None = None) -> int:
    """Materialize all example assets ``--runs`` times and print the version histories."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="how many times to materialize (default 2)")
    parser.add_argument("--fresh", action="store_true", help="delete the data directory first")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR,
                        help="where the Dagster instance and datasets live (default example_project/.data)")
    args = parser.parse_args(argv)
    home, root = _prepare(args.data_dir.resolve(), args.fresh)

    from dagster import DagsterInstance

    from .definitions import defs

    job = defs.resolve_job_def("refresh_all")
    quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
    with DagsterInstance.get() as instance:
        for i in range(args.runs):
            start = time.perf_counter()
            result = job.execute_in_process(instance=instance, run_config=quiet)
            took = time.perf_counter() - start
            print(f"run {i + 1}/{args.runs}: {result.run_id}  success={result.success}  ({took:.1f}s)")
            if not result.success:
                return 1
    print(f"\nDAGSTER_HOME={home}")
    print_histories(str(root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
