"""The import contract of ``lance_format``, checked from the source (AST, no imports executed).

1. Protobuf stays in the codec layer: only the modules in :data:`PROTOBUF_ALLOWED` import
   ``lance_format._pb`` or ``google.protobuf`` (at any level, functions included).
2. Layering: a module imports, at module level, only modules of its own layer or below
   (:data:`LAYERS`, lowest first). Imports inside functions or under ``TYPE_CHECKING`` are
   how an upper layer is reached on purpose (e.g. ``lance_format.index`` opening a
   ``LanceDataset``) and do not count. Some imports are banned at any level:
   :data:`BANNED`.
3. No import cycles among ``lance_format`` modules, counting imports inside functions too.
4. No ``lance_format`` import inside a function body, except the ones in :data:`DEFERRED`, each
   with its reason (a start-up cost worth deferring, or debt a named issue removes). An entry
   that no longer matches an import fails too, so the list only shrinks.

A new module under ``lance_format`` must fall into one of the layers; extend the table
here when adding a top-level module or package.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "lance_format"

#: Modules allowed to import generated protobuf code or ``google.protobuf``: the codec layer.
#: Prefixes end with ``.``; other entries are exact module names.
PROTOBUF_ALLOWED = (
    "lance_format._pb",  # the generated code itself
    "lance_format._pb.",
    "lance_format.file.",  # the data file format (container, 2.0 and 2.1 encodings) is one codec
    "lance_format.schema_codec",  # LanceSchema <-> lance.file.Field
    "lance_format.pbwire",  # wire-level checks every codec shares
    "lance_format.table.codec.",  # table models <-> lance.table messages, manifest files
    "lance_format.table.rowids",  # row-id and row-version sequences (lance.table.RowIdSequence)
    "lance_format.index.codec",  # index details messages (lance.table.*IndexDetails) and index.proto
    "lance_format.index.codec.",
)

#: Layers, lowest first: (name, module prefixes or exact names).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("lance_format.errors", "lance_format._pb", "lance_format._pb.", "lance_format.pbwire",
              "lance_format.io_stats", "lance_format.rust_debug",
              "lance_format.session",
              "lance_format.arrays",  # numpy <-> Arrow buffers without pyarrow's pandas import
              "lance_format.lazy",  # OnFirstUse: a module loaded when one of its attributes is first read
              # The Runner protocol (local threads, processes; Spark plugs in) has no lance_format
              # imports, so every layer that fans work out (index builds, compaction) may use it.
              "lance_format.maintenance.runner")),
    ("storage", ("lance_format.storage", "lance_format.storage.")),
    ("schema", ("lance_format.schema", "lance_format.schema_codec", "lance_format.schema_ext", "lance_format.jsonb",
                "lance_format.jsonb_fast", "lance_format.jsonb_columns",
                "lance_format.schema_json",
                "lance_format.sql", "lance_format.sql_core",
                "lance_format.sql_fast", "lance_format.sql_program", "lance_format.sql_lists", "lance_format.sql_tokens",
                "lance_format.evolution.sqlexpr")),  # SQL -> Arrow expressions, whatever evaluates them
    ("file", ("lance_format.file", "lance_format.file.")),
    ("table", ("lance_format.table", "lance_format.table.")),
    ("index", ("lance_format.index", "lance_format.index.")),
    # Scans over table and index layers; what evolution and maintenance read through.
    # (``search``: nearest-neighbour and full-text scans, answered by vector / text indices.)
    ("scan", ("lance_format.scanner", "lance_format.scan_stats", "lance_format.projection", "lance_format.search", "lance_format.search.")),
    ("maintenance", ("lance_format.maintenance", "lance_format.maintenance.",
                     "lance_format.evolution", "lance_format.evolution.")),
    ("facade", ("lance_format", "lance_format.dataset", "lance_format.write", "lance_format.debug", "lance_format.udf",
                "lance_format.stats", "lance_format.dataset_types", "lance_format.sql_query",
                "lance_format.fragment", "lance_format.optimize", "lance_format.cleanup", "lance_format.progress")),
    ("spark", ("lance_format.spark", "lance_format.spark.")),
)

#: (importer prefix, imported prefix, why): banned at any level, functions included.
BANNED = (
    ("lance_format", "lance_dagster", "the format core never depends on the Dagster plugin"),
    ("lance_format.index", "lance_format.spark", "indices run without Spark"),
    ("lance_format.maintenance", "lance_format.spark", "maintenance runs without Spark (SparkRunner plugs in)"),
    ("lance_format.evolution", "lance_format.spark", "evolution runs without Spark"),
)
_SQLGLOT = "start-up cost: lance_format.sql loads sqlglot (~0.1 s), needed only for filters the fast parser rejects"
_SPARK_WORKER = ("start-up cost: Spark workers import the data source's modules for every cold task; only the "
                 "driver's planning, nearest searches and streaming need lance_format.dataset")
#: (importer, imported) -> why the import stays inside a function. Nothing else may.
DEFERRED: dict[tuple[str, str], str] = {
    ("lance_format.evolution.merge_insert", "lance_format.sql"): _SQLGLOT,
    ("lance_format.evolution.sqlexpr", "lance_format.sql"): _SQLGLOT,
    ("lance_format.index.query", "lance_format.sql"): _SQLGLOT,
    ("lance_format.table.scan", "lance_format.sql"): _SQLGLOT,
    ("lance_format.index.scan", "lance_format.index.query"): _SQLGLOT,
    # Every Spark task unpickles the data source and its reader: their modules stay clear of
    # lance_format.dataset (index, search, maintenance: ~0.5 s CPU per cold worker, issue 28).
    ("lance_format.spark.reader", "lance_format.dataset"): _SPARK_WORKER,
    ("lance_format.spark.source", "lance_format.spark.stream_reader"): _SPARK_WORKER,
    ("lance_format.spark.source", "lance_format.spark.streaming"): _SPARK_WORKER,
}

#: Third-party packages only some parts of ``lance_format`` may import (any level).
EXTERNAL_ONLY = {"pyspark": ("lance_format.spark",)}


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(name.startswith(p) if p.endswith(".") else name == p for p in patterns)


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


@dataclass(frozen=True)
class Import:
    """One import statement's target module, as imported by ``module``."""

    module: str
    target: str
    line: int
    top_level: bool  # executed when the module is imported (not in a function / TYPE_CHECKING)
    in_function: bool = False  # inside a function body (executed when the function runs)


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((REPO / PACKAGE).rglob("*.py")):
        rel = path.relative_to(REPO).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST, top: bool, in_function: bool = False) -> Iterator[tuple[ast.AST, bool, bool]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from _walk(child, False, True)
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield stmt, False, False
                yield from _walk(stmt, False, False)
            for stmt in child.orelse:
                yield stmt, top, in_function
                yield from _walk(stmt, top, in_function)
        else:
            yield child, top, in_function
            yield from _walk(child, top, in_function)


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _imports(module: str) -> list[Import]:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"), str(MODULES[module]))
    out = []
    for node, top, in_function in _walk(tree, True):
        if isinstance(node, ast.Import):
            out += [Import(module, a.name, node.lineno, top, in_function) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, node)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                # ``from pkg import sub`` imports the submodule when there is one.
                out.append(Import(module, sub if sub in MODULES else base, node.lineno, top, in_function))
    return out


IMPORTS = {m: _imports(m) for m in MODULES}


def _layer(module: str) -> int | None:
    for rank, (_name, patterns) in enumerate(LAYERS):
        if _matches(module, patterns):
            return rank
    return None


def _where(i: Import) -> str:
    return f"{MODULES[i.module].relative_to(REPO)}:{i.line}"


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(m for m in MODULES if _layer(m) is None)
    assert unplaced == [], f"modules outside every layer (add them to LAYERS in {__file__}): {unplaced}"


def test_protobuf_is_imported_only_by_the_codec_layer() -> None:
    offenders = sorted({
        f"{_where(i)} imports {i.target}"
        for imports in IMPORTS.values() for i in imports
        if (_under(i.target, "lance_format._pb") or _under(i.target, "google.protobuf"))
        and not _matches(i.module, PROTOBUF_ALLOWED)
    })
    assert offenders == [], "protobuf outside the codec layer:\n" + "\n".join(offenders)


def test_layers_import_only_downwards() -> None:
    offenders = set()
    for imports in IMPORTS.values():
        for i in imports:
            if not i.top_level or not _under(i.target, PACKAGE):
                continue
            mine, theirs = _layer(i.module), _layer(i.target)
            if mine is not None and theirs is not None and theirs > mine:
                offenders.add(f"{_where(i)}: {i.module} ({LAYERS[mine][0]}) imports {i.target} "
                                 f"({LAYERS[theirs][0]}) at module level")
    assert not offenders, "upward imports (move them into the function that needs them):\n" + "\n".join(
        sorted(offenders))


@pytest.mark.parametrize(("importer", "imported", "why"), BANNED)
def test_banned_imports(importer: str, imported: str, why: str) -> None:
    offenders = sorted(_where(i) for imports in IMPORTS.values() for i in imports
                       if _under(i.module, importer) and _under(i.target, imported))
    assert offenders == [], f"{importer} must not import {imported} ({why}): {offenders}"


@pytest.mark.parametrize("package", sorted(EXTERNAL_ONLY))
def test_optional_dependencies_stay_in_their_package(package: str) -> None:
    allowed = EXTERNAL_ONLY[package]
    offenders = sorted(_where(i) for imports in IMPORTS.values() for i in imports
                       if _under(i.target, package) and not any(_under(i.module, a) for a in allowed))
    assert offenders == [], f"only {allowed} may import {package}: {offenders}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    # Tarjan's strongly connected components, iteratively (no recursion limit).
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in graph[node]:
                        out.append(sorted(component))
    return out


def test_no_import_cycles() -> None:
    graph = {m: {i.target for i in IMPORTS[m] if i.top_level and i.target in MODULES and i.target != m}
             for m in MODULES}
    cycles = _cycles(graph)
    assert cycles == [], "module-level import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def _function_imports() -> set[tuple[str, str]]:
    return {(i.module, i.target) for imports in IMPORTS.values() for i in imports
            if i.in_function and _under(i.target, PACKAGE) and i.target != i.module}


def test_no_lance_format_imports_inside_functions() -> None:
    found = _function_imports()
    unlisted = sorted(f"{a} imports {b}" for a, b in found - set(DEFERRED))
    assert unlisted == [], ("imports inside functions (import at module level; if that makes a cycle, "
                            "the lower module needs what it imports passed in or moved down):\n"
                            + "\n".join(unlisted))
    stale = sorted(f"{a} -> {b}" for a, b in set(DEFERRED) - found)
    assert stale == [], "DEFERRED entries that no longer match an import (remove them):\n" + "\n".join(stale)


def test_no_import_cycles_counting_imports_inside_functions() -> None:
    graph = {m: {i.target for i in IMPORTS[m] if (i.top_level or i.in_function) and i.target in MODULES
                 and i.target != m} for m in MODULES}
    cycles = _cycles(graph)
    assert cycles == [], "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def _named_modules(module: str) -> list[tuple[str, int]]:
    """Modules ``module`` names by string to load them lazily (``importlib.import_module``,
    PEP 562 tables): string constants equal to a ``lance_format`` module's name."""
    source = MODULES[module].read_text(encoding="utf-8")
    if "import_module" not in source and "OnFirstUse(" not in source:
        return []
    return [(n.value, n.lineno) for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in MODULES
            and n.value != module]


def test_modules_loaded_by_name_are_not_above_their_loader() -> None:
    # A lazy load by name (dataset.py's verbs, the packages' PEP 562 tables) is an import the
    # statements above do not see; it must still point down the layers (or stay in its own).
    offenders = []
    for module in MODULES:
        mine = _layer(module)
        for target, line in _named_modules(module):
            theirs = _layer(target)
            if mine is not None and theirs is not None and theirs > mine:
                offenders.append(f"{MODULES[module].relative_to(REPO)}:{line}: {module} ({LAYERS[mine][0]}) "
                                 f"loads {target} ({LAYERS[theirs][0]})")
    assert offenders == [], "lazy loads by name going up the layers:\n" + "\n".join(offenders)
    assert any(t == "lance_format.search.nearest" for t, _ in _named_modules("lance_format.dataset"))


#: Modules that may name an index kind (a details message or an ``index_type``) in code: the kinds
#: themselves, their format and codec modules, and the system index (fragment reuse). Everything else
#: asks ``lance_format.index.registry`` (issue 22 item 1).
KIND_NAMING = ("lance_format.index.kinds.", "lance_format.index.codec", "lance_format.index.vector.",
               "lance_format.index.inverted.", "lance_format.index.models", "lance_format.index.frag_reuse",
               "lance_format.spark.sql_functions")  # (lance_create_index's documented default, 'BTREE')
_KIND_NAMES = re.compile(r"^(/lance\.[\w.]+\.)?\w+IndexDetails$|^(BTREE|BITMAP|LABEL_LIST|ZONEMAP|BLOOMFILTER|"
                         r"NGRAM|INVERTED|FTS|IVF_[A-Z_]+)$")


def _kind_literals(module: str) -> list[str]:
    """String constants naming an index kind in ``module``'s code (docstrings left out)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [f"{module}:{n.lineno} {n.value!r}" for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
            and _KIND_NAMES.match(n.value)]


def test_only_the_kinds_name_index_kinds() -> None:
    found = [hit for m in MODULES if not m.startswith(KIND_NAMING) for hit in _kind_literals(m)]
    assert found == [], ("modules that name an index kind instead of asking lance_format.index.registry:\n"
                         + "\n".join(found))


def test_the_contract_sees_what_it_checks() -> None:
    # Guards against a check that passes because it parsed nothing.
    assert "lance_format.table.codec.manifest" in MODULES and "lance_format.dataset" in MODULES
    assert any(i.target == "lance_format._pb" or i.target.startswith("lance_format._pb.")
               for i in IMPORTS["lance_format.table.codec.manifest"])
    dataset_targets = {i.target for i in IMPORTS["lance_format.dataset"] if i.top_level}
    assert "lance_format.table.versions" in dataset_targets
    assert "lance_format.table.commit" not in dataset_targets  # TYPE_CHECKING-only: not counted
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
