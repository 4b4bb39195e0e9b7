"""Generated protobuf code is imported only by the codec layer."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_generated_protobuf_code_stays_in_the_codec_layer() -> None:
    """Only format codecs (file/, schema_codec, table/) import lance_format._pb; never the public API."""
    import ast

    allowed = ("lance_format/file/", "lance_format/table/", "lance_format/schema_codec.py", "lance_format/_pb/")
    offenders = []
    for pkg in ("lance_format", "lance_dagster", "example_project"):
        for path in sorted((REPO / pkg).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            tree = ast.parse(path.read_text(), rel)
            for node in ast.walk(tree):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    mod = ("lance_format." if node.level else "") + (node.module or "")  # relative: treat alike
                    names = [mod] + [f"{mod}.{a.name}" for a in node.names]
                hit = any(n.endswith("._pb") or "._pb." in n for n in names)
                if hit and not rel.startswith(allowed):
                    offenders.append(rel)
    assert offenders == []
    pb = sorted(p.name for p in (REPO / "lance_format" / "_pb").glob("*_pb2.py"))
    assert pb == sorted(f"{n}_pb2.py" for n in ("encodings_v2_0", "encodings_v2_1", "file", "file2", "rowids",
                                                "table", "transaction"))
