"""Generate ``docs/pylance-compatibility.md``: every public pylance 14.0.2 name beside ours.

Run from the repository root with the test venv (pylance installed as ``lance``)::

    .venv/bin/python docs/gen_compat.py            # rewrite the page
    .venv/bin/python docs/gen_compat.py --check    # exit 1 if the committed page is stale

The script walks the module-level public names of pylance's modules (``__all__`` where a module has
one, else the classes, functions and constants it defines) and the public members of the classes
users' code calls, finds ours by the same name in the module of the same name under
``lance_format`` (``lance.dataset`` → ``lance_format.dataset``), and compares ``inspect.signature``
parameter names, kinds, positions and defaults. A name that is missing on our side gets a reason
from :data:`REASONS` (hand-kept, matched by ``fnmatch`` pattern) or "not implemented yet".
``tests/parity/test_compat_page.py`` regenerates the page in memory and fails when it differs from
the committed file, so the page cannot drift from either library.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import importlib
import inspect
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

PAGE = Path(__file__).with_name("pylance-compatibility.md")

# pylance modules whose public names are listed (``lance.lance`` is the native module behind them;
# its users' names are re-exported by these).
MODULES = [
    "lance", "lance.dataset", "lance.fragment", "lance.file", "lance.schema", "lance.query",
    "lance.indices", "lance.optimize", "lance.util", "lance.commit", "lance.progress", "lance.blob",
    "lance.debug", "lance.udf",
]

# Classes whose public methods and properties are listed one by one (``LanceOperation``'s nested
# operation classes are walked too).
CLASSES = [
    "lance.dataset.LanceDataset", "lance.dataset.LanceScanner", "lance.dataset.MergeInsertBuilder",
    "lance.dataset.LanceOperation", "lance.dataset.Transaction", "lance.dataset.DatasetOptimizer",
    "lance.dataset.Tags", "lance.dataset.Branches", "lance.fragment.LanceFragment",
    "lance.fragment.FragmentMetadata", "lance.fragment.DataFile", "lance.fragment.DeletionFile",
    "lance.file.LanceFileReader", "lance.file.LanceFileWriter", "lance.file.LanceFileMetadata",
    "lance.schema.LanceSchema",
]

# Where ours lives under another name (pylance name -> our dotted name).
ALIASES = {
    "lance.dataset.DatasetOptimizer": "lance_format.optimize.Optimize",
    "lance.dataset.Branches": "lance_format.evolution.branches.Branches",
}

# Classes users get from the library rather than construct: their constructors are not compared.
OBTAINED_NOT_CONSTRUCTED = {
    "LanceScanner", "MergeInsertBuilder", "Tags", "Branches", "DatasetOptimizer", "LanceSchema",
    "CompactionPlan", "CompactionTask", "RewriteResult", "LanceFileMetadata",
}

# Why a name is not supported, where that cannot be computed: first matching pattern wins.
REASONS: list[tuple[str, str]] = [
    ("lance.Lsm*", "the LSM / mem-WAL read path is outside this implementation"),
    ("lance.CompactedSsTable", "the LSM / mem-WAL read path is outside this implementation"),
    ("lance.Shard*", "sharded mem-WAL writers are outside this implementation"),
    ("lance.evaluate_sharding_spec", "sharded mem-WAL writers are outside this implementation"),
    ("lance.FFILanceTableProvider", "a DataFusion FFI table provider needs the native library"),
    ("lance.ExecutionPlan", "plans are described as text, there is no DataFusion plan object"),
    ("lance.set_logger", "logging goes through Python's logging module"),
    ("lance.simd_info", "no native code: there are no SIMD kernels to report"),
    ("lance.tokenize", "the tokenizer is internal to lance_format.index.inverted"),
    ("lance.FtsToken", "the tokenizer is internal to lance_format.index.inverted"),
    ("lance.bytes_read_counter", "native I/O counters; see LanceDataset.io_stats in the roadmap"),
    ("lance.iops_counter", "native I/O counters; see LanceDataset.io_stats in the roadmap"),
    ("lance.io", "native I/O counters; see LanceDataset.io_stats in the roadmap"),
    ("*Blob*", "blob columns (lance-encoding:blob) are a separate work item of issue 27"),
    ("lance.blob.*", "blob columns (lance-encoding:blob) are a separate work item of issue 27"),
    ("lance.util.HNSW", "vector index building lives in lance_format.index.vector"),
    ("lance.util.KMeans", "vector index building lives in lance_format.index.vector"),
    ("lance.indices.*", "vector index building lives in lance_format.index.vector (ds.create_index)"),
    ("lance.query.*", "full-text queries are dicts or lance_format.search.fts_query values"),
    ("lance.dataset.*Query*", "vector / full-text / SQL queries go through scanner(nearest=, full_text_query=)"),
    ("lance.dataset.VectorIndexReader", "vector index internals are not exposed"),
    ("lance.dataset.LanceDataset.sql", "SQL over a dataset needs DataFusion's SQL planner"),
    ("lance.progress.*", "write progress callbacks are a separate work item of issue 27"),
    ("lance.udf.*", "batch_udf checkpointing is a separate work item of issue 27"),
    ("*batch_udf", "batch_udf checkpointing is a separate work item of issue 27"),
    ("*BatchUDF*", "batch_udf checkpointing is a separate work item of issue 27"),
    ("lance.debug.*", "the native debug formatters print Rust structures"),
    ("lance.dataset.LanceDataset.*index_segment*", "vector index segment internals are not exposed"),
]

DEFAULT_REASON = "not implemented yet"

# How a name differs on purpose (in signature or in behaviour), appended to the computed verdict.
WHY_DIFFERENT: dict[str, str] = {
    "lance.dataset.MergeInsertBuilder.explain_plan": "the first line is pylance's; the lines below describe "
                                                     "our steps, not DataFusion operators",
    "lance.file.LanceFileReader.num_rows": "kept a property because our readers and tests read it as a value; "
                                           "`reader.metadata().num_rows` works on both",
}


@dataclasses.dataclass(frozen=True)
class Row:
    """One line of the page: a pylance name, its kind, ours and the verdict."""

    name: str
    kind: str
    ours: str
    status: str


# -- finding names ----------------------------------------------------------------------------


def _module(name: str) -> ModuleType | None:
    # ``importlib`` rather than attribute access: ``lance.dataset`` the module is shadowed by
    # ``lance.dataset`` the function.
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _defined_here(obj: Any) -> bool:
    mod = getattr(obj, "__module__", None)
    if inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj):
        # pylance's native classes report ``builtins`` / ``_lib``; its native functions report none.
        return mod is None or mod in ("builtins", "_lib") or str(mod).split(".")[0] == "lance"
    return False


def module_names(module: ModuleType) -> list[str]:
    """Public names of a pylance module, sorted: ``__all__`` or what it defines (plus constants)."""
    explicit = getattr(module, "__all__", None)
    if explicit is not None:
        return sorted(n for n in explicit if not n.startswith("_"))
    names = []
    for n, obj in vars(module).items():
        if n.startswith("_") or n == "TYPE_CHECKING":
            continue
        constant = n.isupper() and isinstance(obj, (str, int, float)) and not isinstance(obj, bool)
        if constant or _defined_here(obj):
            names.append(n)
    return sorted(names)


def _resolve(dotted: str) -> Any:
    """The object at a dotted path under a module (``lance_format.optimize.Optimize``), or None."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        mod = _module(".".join(parts[:cut]))
        if mod is None:
            continue
        obj: Any = mod
        for attr in parts[cut:]:
            obj = getattr(obj, attr, None)
            if obj is None:
                return None
        return obj
    return None


def ours_module(pylance_module: str) -> str:
    """Our module of the same name (``lance.file`` → ``lance_format.file``)."""
    return "lance_format" + pylance_module[len("lance"):]


# -- comparing signatures -----------------------------------------------------------------------


def _signature(obj: Any) -> inspect.Signature | None:
    target = obj
    if inspect.isclass(obj) and obj.__init__ is object.__init__ and obj.__new__ is object.__new__:
        return inspect.Signature([])
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    if params and params[0].name in ("self", "cls"):
        params = params[1:]
    return sig.replace(parameters=params)


def _default_text(value: Any) -> str:
    if value is inspect.Parameter.empty:
        return "required"
    if dataclasses.is_dataclass(value) or "0x" in repr(value):
        return type(value).__name__  # object addresses change per run
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def compare_signatures(theirs: inspect.Signature, ours: inspect.Signature) -> str:
    """``same``, ``same; ours adds ...`` or ``differs: ...`` for two call signatures."""
    P = inspect.Parameter
    t_params = [p for p in theirs.parameters.values() if not p.name.startswith("_")]
    o_params = list(ours.parameters.values())
    o_by_name = {p.name: p for p in o_params}
    o_varkw = any(p.kind is P.VAR_KEYWORD for p in o_params)
    o_varpos = any(p.kind is P.VAR_POSITIONAL for p in o_params)
    positional = (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)
    t_pos = [p.name for p in t_params if p.kind in positional]
    o_pos = [p.name for p in o_params if p.kind in positional]
    problems: list[str] = []
    for p in t_params:
        if p.kind is P.VAR_POSITIONAL:
            if not o_varpos:
                problems.append(f"no `*{p.name}`")
            continue
        if p.kind is P.VAR_KEYWORD:
            if not o_varkw:
                problems.append(f"no `**{p.name}`")
            continue
        o = o_by_name.get(p.name)
        if o is None:
            problems.append(f"`{p.name}` only through **kwargs" if o_varkw and p.kind is not P.POSITIONAL_ONLY
                            else f"no `{p.name}`")
            continue
        if p.kind in positional and o.kind is P.KEYWORD_ONLY:
            problems.append(f"`{p.name}` is keyword-only")
        elif p.kind in positional and o.kind in positional and t_pos.index(p.name) != o_pos.index(p.name):
            problems.append(f"`{p.name}` is positional argument {o_pos.index(p.name) + 1} "
                            f"(pylance {t_pos.index(p.name) + 1})")
        if p.kind is P.POSITIONAL_ONLY and o.kind is P.KEYWORD_ONLY:
            problems.append(f"`{p.name}` is keyword-only")
        t_def, o_def = _default_text(p.default), _default_text(o.default)
        if t_def != o_def and t_def != "required":
            problems.append(f"`{p.name}` default {o_def} (pylance {t_def})")
    t_names = {p.name for p in theirs.parameters.values()}
    extras = [p for p in o_params if p.name not in t_names and p.kind not in (P.VAR_KEYWORD, P.VAR_POSITIONAL)]
    for p in extras:
        if p.default is P.empty:
            problems.append(f"ours requires `{p.name}`")
    if problems:
        return "differs: " + "; ".join(problems)
    added = [p.name for p in extras]
    return "same" + (f"; ours adds {', '.join(f'`{n}`' for n in added)}" if added else "")


def _kind(obj: Any, static: Any) -> str:
    if isinstance(static, (property, dataclasses.Field)) or type(static).__name__ in (
            "getset_descriptor", "member_descriptor"):
        return "property"
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    return "attribute"


def compare(theirs: Any, t_static: Any, ours: Any, o_static: Any) -> str:
    """Verdict for one pylance object against ours (both present)."""
    t_kind, o_kind = _kind(theirs, t_static), _kind(ours, o_static)
    if t_kind != o_kind:
        if t_kind == "attribute" or o_kind == "attribute":
            return "same"  # a constant or field either way: nothing to call
        return f"differs: a {o_kind} in ours, a {t_kind} in pylance"
    if t_kind in ("property", "attribute"):
        return "same"
    if t_kind == "class" and theirs.__name__ in OBTAINED_NOT_CONSTRUCTED:
        return "same"  # obtained from the library (ds.scanner(), ds.tags, ...): members compared below
    t_sig, o_sig = _signature(theirs), _signature(ours)
    if t_sig is None or o_sig is None:
        return "same" if t_sig is None else "differs: our signature cannot be inspected"
    return compare_signatures(t_sig, o_sig)


# -- rows -----------------------------------------------------------------------------------------


def reason(name: str) -> str:
    """The hand-kept reason why ``name`` is not supported."""
    for pattern, why in REASONS:
        if fnmatch.fnmatchcase(name, pattern):
            return why
    return DEFAULT_REASON


def _missing(name: str, kind: str) -> Row:
    return Row(name, kind, "—", f"not supported: {reason(name)}")


def _class_members(cls: type) -> Iterator[tuple[str, Any]]:
    names = {n for n in dir(cls) if not n.startswith("_")}
    if dataclasses.is_dataclass(cls):
        names |= {f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")}
    for n in sorted(names):
        yield n, inspect.getattr_static(cls, n, None)


def _member(cls: Any, name: str) -> tuple[bool, Any, Any]:
    """(found, value, static value) of a class member, dataclass fields and instance slots included."""
    if cls is None:
        return False, None, None
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if f.name == name:
                return True, getattr(cls, name, None), f
    static = inspect.getattr_static(cls, name, inspect.Parameter.empty)
    if static is inspect.Parameter.empty:
        return False, None, None
    return True, getattr(cls, name, static), static


def class_rows(t_name: str, theirs: type, o_name: str | None, ours: Any) -> list[Row]:
    """One row per public member of a pylance class (nested classes walked)."""
    rows = []
    for n, t_static in _class_members(theirs):
        value = getattr(theirs, n, t_static)
        full = f"{t_name}.{n}"
        found, o_value, o_static = _member(ours, n)
        if not found:
            rows.append(_missing(full, _kind(value, t_static)))
            continue
        verdict = compare(value, t_static, o_value, o_static)
        if full in WHY_DIFFERENT:
            verdict = f"{verdict} ({WHY_DIFFERENT[full]})"
        rows.append(Row(full, _kind(value, t_static), f"{o_name}.{n}", verdict))
    return rows


def module_rows(t_module: str) -> list[Row]:
    """One row per public name of a pylance module."""
    theirs = _module(t_module)
    assert theirs is not None, t_module
    o_module = ours_module(t_module)
    ours = _module(o_module)
    rows = []
    for n in module_names(theirs):
        value = getattr(theirs, n)
        full = f"{t_module}.{n}"
        target = ALIASES.get(full)
        if target is not None:
            rows.append(Row(full, _kind(value, value), target, compare(value, value, _resolve(target),
                                                                       _resolve(target))))
            continue
        if ours is not None and hasattr(ours, n):
            o_value = getattr(ours, n)
            rows.append(Row(full, _kind(value, value), f"{o_module}.{n}", compare(value, value, o_value, o_value)))
            continue
        root = _module("lance_format")
        if root is not None and hasattr(root, n) and t_module != "lance":
            rows.append(Row(full, _kind(value, value), f"lance_format.{n}",
                            f"differs: import it from lance_format, not {o_module}"))
            continue
        rows.append(_missing(full, _kind(value, value)))
    return rows


def _ours_for_class(t_name: str) -> tuple[str, Any]:
    if t_name in ALIASES:
        return ALIASES[t_name], _resolve(ALIASES[t_name])
    module, _, cls = t_name.rpartition(".")
    o_name = f"{ours_module(module)}.{cls}"
    found = _resolve(o_name)
    if found is None and _resolve(f"lance_format.{cls}") is not None:
        return f"lance_format.{cls}", _resolve(f"lance_format.{cls}")
    return o_name, found


def all_sections() -> list[tuple[str, list[Row]]]:
    """(heading, rows) for every module and class, in page order."""
    sections = [(f"Module `{m}`", module_rows(m)) for m in MODULES]
    pending = list(CLASSES)
    while pending:
        t_name = pending.pop(0)
        theirs = _resolve(t_name)
        assert inspect.isclass(theirs), t_name
        o_name, ours = _ours_for_class(t_name)
        heading = f"Class `{t_name}` (ours: `{o_name}`)" if ours is not None else f"Class `{t_name}` (not in ours)"
        sections.append((heading, class_rows(t_name, theirs, o_name, ours)))
        nested = [f"{t_name}.{n}" for n, _ in _class_members(theirs)
                  if inspect.isclass(getattr(theirs, n, None))
                  and getattr(theirs, n).__qualname__.startswith(theirs.__qualname__ + ".")]
        idx = 0
        for n in nested:
            if n not in pending and n not in CLASSES and _ours_for_nested(n, o_name) is not None:
                pending.insert(idx, n)
                idx += 1
    return sections


def _ours_for_nested(t_name: str, o_parent: str) -> Any:
    return _resolve(f"{o_parent}.{t_name.rpartition('.')[2]}")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(title_version: str, sections: list[tuple[str, list[Row]]]) -> str:
    """The Markdown page."""
    rows = [r for _, rs in sections for r in rs]
    counts = {k: sum(1 for r in rows if r.status.startswith(k)) for k in ("same", "differs", "not supported")}
    out = [
        "# pylance compatibility",
        "",
        f"Every public name of pylance {title_version} beside `lance_format`'s, generated by `docs/gen_compat.py`",
        "(do not edit by hand: run `.venv/bin/python docs/gen_compat.py`). Signatures are compared by parameter",
        "names, kinds, positions and defaults; \"ours adds\" lists our extra optional parameters, which pylance",
        "code never passes. Behaviour is checked by the tests under `tests/parity/`.",
        "",
        f"**{len(rows)} names**: {counts['same']} same, {counts['differs']} differ, "
        f"{counts['not supported']} not supported.",
        "",
    ]
    for heading, section in sections:
        out += [f"## {heading}", "", "| pylance | kind | ours | status |", "|---|---|---|---|"]
        for r in section:
            ours = f"`{r.ours}`" if r.ours != "—" else r.ours
            out.append(f"| `{r.name}` | {r.kind} | {ours} | {_cell(r.status)} |")
        out.append("")
    return "\n".join(out)


def generate() -> str:
    """The page as it should be committed (needs pylance importable as ``lance``)."""
    lance = importlib.import_module("lance")
    return render(lance.__version__, all_sections())


def main(argv: list[str], write: Callable[[str], Any] = PAGE.write_text) -> int:
    """Write the page, or with ``--check`` report whether the committed one is current."""
    text = generate()
    if "--check" in argv:
        current = PAGE.read_text() if PAGE.exists() else ""
        if current != text:
            print(f"{PAGE} is stale: run .venv/bin/python docs/gen_compat.py", file=sys.stderr)
            return 1
        return 0
    write(text)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
