"""Regenerate ``lance_format/_pb`` from ``protos/*.proto``.

Usage::

    python protos/generate.py          # rewrite lance_format/_pb in place
    python protos/generate.py --check  # exit 1 if the committed files are stale

Runs ``grpc_tools.protoc`` from the current interpreter (``--python_out`` and ``--pyi_out``),
then rewrites sibling imports (``import file_pb2``) to package-relative ones and the module
name given to the message builder to ``lance_format._pb.*``, so the modules work (and their
messages pickle) as ``lance_format._pb.*`` without touching ``sys.path``.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "protos"
OUT_DIR = ROOT / "lance_format" / "_pb"

PROTOS = (
    "file.proto",
    "file2.proto",
    "encodings_v2_0.proto",
    "encodings_v2_1.proto",
    "table.proto",
    "transaction.proto",
    "rowids.proto",
)

INIT_TEXT = '''"""Generated protobuf modules for the Lance format (do not edit; see protos/generate.py)."""

from . import (
    encodings_v2_0_pb2,
    encodings_v2_1_pb2,
    file2_pb2,
    file_pb2,
    rowids_pb2,
    table_pb2,
    transaction_pb2,
)

__all__ = [
    "encodings_v2_0_pb2",
    "encodings_v2_1_pb2",
    "file2_pb2",
    "file_pb2",
    "rowids_pb2",
    "table_pb2",
    "transaction_pb2",
]
'''

_SIBLINGS = "|".join(re.escape(Path(p).stem) for p in PROTOS)
# "import file_pb2 as file__pb2" (.py) and "import file_pb2 as _file_pb2" (.pyi).
_IMPORT_RE = re.compile(rf"^import ({_SIBLINGS})_pb2 as (\w+)$", re.MULTILINE)
# "_builder.BuildTopDescriptorsAndMessages(DESCRIPTOR, 'table_pb2', _globals)"
_BUILDER_RE = re.compile(r"(BuildTopDescriptorsAndMessages\(DESCRIPTOR, )'(\w+_pb2)'")
PACKAGE = "lance_format._pb"


def _protoc_include() -> str:
    import grpc_tools

    return str(Path(grpc_tools.__file__).resolve().parent / "_proto")


def generate(out_dir: Path) -> None:
    """Run protoc into ``out_dir`` and post-process the output."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"-I{PROTO_DIR}",
        f"-I{_protoc_include()}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        *PROTOS,
    ]
    # Relative proto names keep absolute paths of this checkout out of the descriptors.
    subprocess.run(cmd, check=True, cwd=PROTO_DIR)
    for path in sorted(out_dir.iterdir()):
        if path.suffix in (".py", ".pyi") and path.stem.endswith("_pb2"):
            text = path.read_text(encoding="utf-8")
            text = _IMPORT_RE.sub(r"from . import \1_pb2 as \2", text)
            # protoc names the module by its bare file name ('table_pb2'); the classes' __module__
            # must be the importable one, or pickle cannot find them (messages cross process
            # boundaries on Spark and in runners).
            text = _BUILDER_RE.sub(rf"\1'{PACKAGE}.\2'", text)
            path.write_text(text, encoding="utf-8")
    (out_dir / "__init__.py").write_text(INIT_TEXT, encoding="utf-8")


def _generated_names(directory: Path) -> set[str]:
    if not directory.is_dir():
        return set()
    return {
        p.name
        for p in directory.iterdir()
        if p.is_file() and (p.name == "__init__.py" or p.stem.endswith("_pb2"))
    }


def check() -> list[str]:
    """Return the names of generated files that differ from a fresh generation."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "_pb"
        generate(fresh)
        want = _generated_names(fresh)
        have = _generated_names(OUT_DIR)
        stale = sorted(want ^ have)
        for name in sorted(want & have):
            if not filecmp.cmp(fresh / name, OUT_DIR / name, shallow=False):
                stale.append(name)
        return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only verify the committed files are fresh")
    args = parser.parse_args(argv)
    if args.check:
        stale = check()
        if stale:
            print("stale generated protobuf files: " + ", ".join(stale), file=sys.stderr)
            print("run: python protos/generate.py", file=sys.stderr)
            return 1
        return 0
    with tempfile.TemporaryDirectory(dir=OUT_DIR.parent) as tmp:
        fresh = Path(tmp) / "_pb"
        generate(fresh)
        # Replace only generated files; anything else a human put there is left alone.
        for name in _generated_names(OUT_DIR) - _generated_names(fresh):
            os.remove(OUT_DIR / name)
        OUT_DIR.mkdir(exist_ok=True)
        # __init__.py goes last so a concurrent importer never sees a partial package.
        for name in sorted(_generated_names(fresh), key=lambda n: (n == "__init__.py", n)):
            shutil.copyfile(fresh / name, OUT_DIR / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
