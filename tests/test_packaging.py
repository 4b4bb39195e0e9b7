"""Packaging: extras, pins and the CI entry point."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_packaging_extras_and_ci_entry() -> None:
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    extras = meta["project"]["optional-dependencies"]
    assert {"spark", "dagster", "s3", "test"} <= set(extras)
    test = " ".join(extras["test"])
    for dep in ("pylance", "pytest", "hypothesis", "ruff", "mypy"):
        assert dep in test, dep
    include = meta["tool"]["setuptools"]["packages"]["find"]["include"]
    assert any(p.startswith("lance_format") for p in include) and any(p.startswith("lance_dagster") for p in include)
    readme = (REPO / "README.md").read_text()
    block = readme.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines() if line.strip()]
    assert commands == ["bash .ci/main", "bash .ci/test"]
    assert "bash .ci/test" in (REPO / ".ci" / "run").read_text()
    ci_test = (REPO / ".ci" / "test").read_text()
    assert "ruff" in ci_test and "mypy" in ci_test and "pytest" in ci_test
