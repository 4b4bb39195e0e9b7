"""The file API mirrors pylance's LanceFileReader / LanceFileWriter signatures."""

from __future__ import annotations

import inspect

import pytest
from lance.file import LanceFileReader as TheirReader
from lance.file import LanceFileWriter as TheirWriter

from lance_format.file import LanceFileReader, LanceFileWriter


def _params(fn: object) -> list[inspect.Parameter]:
    return [p for p in inspect.signature(fn).parameters.values()  # type: ignore[arg-type]
            if p.name != "self" and not p.name.startswith("_") and p.kind is not p.VAR_KEYWORD]


@pytest.mark.parametrize(("ours", "theirs", "method", "pylance_only"), [
    (LanceFileReader, TheirReader, "__init__", {"namespace_client", "table_id"}),
    (LanceFileReader, TheirReader, "read_all", set()),
    (LanceFileReader, TheirReader, "read_range", set()),
    (LanceFileReader, TheirReader, "take_rows", set()),
    (LanceFileWriter, TheirWriter, "__init__", {"namespace_client", "table_id"}),
    (LanceFileWriter, TheirWriter, "write_batch", set()),
    (LanceFileWriter, TheirWriter, "close", set()),
])
def test_file_api_signatures_mirror_pylance(ours: type, theirs: type, method: str, pylance_only: set[str]) -> None:
    mine = {p.name: p for p in _params(getattr(ours, method))}
    pyl = [p for p in _params(getattr(theirs, method)) if p.name not in pylance_only]
    for p in pyl:
        assert p.name in mine, f"{ours.__name__}.{method} lacks pylance parameter {p.name}"
        q = mine[p.name]
        assert q.kind == p.kind, (method, p.name, q.kind, p.kind)
        if p.default is not inspect.Parameter.empty and p.default is not None:
            assert q.default == p.default, (method, p.name)
    # positional parameters appear in pylance's order
    pos = [p.name for p in pyl if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert [p.name for p in _params(getattr(ours, method)) if p.kind is p.POSITIONAL_OR_KEYWORD][:len(pos)] == pos
    assert hasattr(ours, "__enter__") or not hasattr(theirs, "__enter__")
