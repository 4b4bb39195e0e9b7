"""The committed compatibility page is what docs/gen_compat.py generates from pylance 14.0.2 and ours."""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

lance = pytest.importorskip("lance")

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_compat", ROOT / "docs" / "gen_compat.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_compat"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    return _generator()


@pytest.fixture(scope="module")
def page(gen: ModuleType) -> str:
    return gen.generate()


def test_pylance_is_the_version_the_page_describes() -> None:
    assert lance.__version__ == "14.0.2"


def test_committed_page_equals_the_generated_one(page: str) -> None:
    committed = (ROOT / "docs" / "pylance-compatibility.md").read_text()
    assert committed == page, "docs/pylance-compatibility.md is stale: run .venv/bin/python docs/gen_compat.py"


def test_every_public_pylance_name_has_a_row(gen: ModuleType, page: str) -> None:
    listed = set(re.findall(r"^\| `([^`]+)` \|", page, flags=re.M))
    for module_name in gen.MODULES:
        module = importlib.import_module(module_name)
        for name in gen.module_names(module):
            assert f"{module_name}.{name}" in listed, f"{module_name}.{name} is not on the page"
    for cls_name in gen.CLASSES:
        cls = gen._resolve(cls_name)
        for member, _ in gen._class_members(cls):
            assert f"{cls_name}.{member}" in listed, f"{cls_name}.{member} is not on the page"


def test_every_row_has_a_verdict(page: str) -> None:
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    assert rows
    for line in rows:
        status = line.rstrip(" |").rsplit(" | ", 1)[1]
        assert status.startswith(("same", "differs: ", "not supported: ")), line


def test_signature_comparison_names_each_difference(gen: ModuleType) -> None:
    def theirs(a, b=1, *, c=None, **kw):  # type: ignore[no-untyped-def]
        ...

    def ours_same(a, b=1, *, c=None, d=2, **kw):  # type: ignore[no-untyped-def]
        ...

    def ours_diff(a, *, b=2, e):  # type: ignore[no-untyped-def]
        ...

    assert gen.compare_signatures(inspect.signature(theirs), inspect.signature(ours_same)) == "same; ours adds `d`"
    text = gen.compare_signatures(inspect.signature(theirs), inspect.signature(ours_diff))
    assert text.startswith("differs: ")
    for part in ("`b` is keyword-only", "`b` default 2 (pylance 1)", "no `c`", "no `**kw`", "ours requires `e`"):
        assert part in text
