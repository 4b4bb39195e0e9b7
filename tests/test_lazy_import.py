"""``import lance_format`` loads its public names on first use, and worker-side modules only what they use.

Import state is per process, so every check that looks at ``sys.modules`` runs in a fresh
interpreter.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from fresh_process import run_fresh as _fresh

import lance_format

REPO = Path(__file__).resolve().parents[1]

#: Modules a Spark worker reading or writing a Lance table has no use for.
HEAVY = ("lance_format.index", "lance_format.maintenance", "lance_format.search", "lance_format.evolution",
         "lance_format.dataset", "lance_format.scanner", "lance_format.sql", "lance_dagster", "sqlglot")


def _loaded(prefixes: tuple[str, ...]) -> str:
    """Code for: the loaded modules that are ``prefixes`` or under them."""
    return f"sorted(m for m in sys.modules if any(m == p or m.startswith(p + '.') for p in {prefixes!r}))"


def test_every_public_name_resolves_to_its_home_module_object() -> None:
    for name in lance_format.__all__:
        value = getattr(lance_format, name)
        if name == "__version__":
            continue
        home = sys.modules[lance_format._HOMES[name]]
        assert value is getattr(home, name), name


def test_the_lazy_table_matches_the_type_checking_imports() -> None:
    # mypy reads the TYPE_CHECKING imports, the package resolves through _HOMES: the same names, same homes.
    tree = ast.parse((REPO / "lance_format" / "__init__.py").read_text(encoding="utf-8"))
    typed = {alias.name: node.module for stmt in tree.body if isinstance(stmt, ast.If)
             for node in stmt.body if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert typed == lance_format._HOMES
    assert set(typed) | {"__version__"} == set(lance_format.__all__)


def test_from_import_and_attribute_access_give_the_same_objects() -> None:
    from lance_format import LanceDataset, dataset, write_dataset

    assert lance_format.dataset is dataset and callable(dataset)
    assert lance_format.LanceDataset is LanceDataset
    assert lance_format.write_dataset is write_dataset
    assert set(lance_format.__all__) <= set(dir(lance_format))


def test_dataset_stays_the_function_after_its_submodule_is_imported() -> None:
    out = _fresh("import lance_format\nimport lance_format.dataset\nfrom lance_format import dataset\n"
                 "out = {'attr': type(lance_format.dataset).__name__, 'from': type(dataset).__name__,\n"
                 "       'submodule': type(sys.modules['lance_format.dataset']).__name__}")
    assert out == {"attr": "function", "from": "function", "submodule": "module"}


def test_unknown_names_raise_attribute_error_and_submodules_still_import() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = lance_format.no_such_name  # type: ignore[attr-defined]
    from lance_format import io_stats

    assert io_stats.__name__ == "lance_format.io_stats"


def test_import_lance_format_loads_none_of_the_package() -> None:
    out = _fresh("import lance_format\nout = {'loaded': sorted(m for m in sys.modules if m.startswith('lance_format')),"
                 " 'pyarrow': 'pyarrow' in sys.modules}")
    assert out == {"loaded": ["lance_format"], "pyarrow": False}


def test_first_public_name_loads_the_file_decoders() -> None:
    out = _fresh("import lance_format\nlance_format.dataset\nout = {'decoders': all(m in sys.modules for m in "
                 "lance_format._DECODERS)}")
    assert out == {"decoders": True}


def test_spark_worker_modules_import_no_index_maintenance_or_dagster_code() -> None:
    pytest.importorskip("pyspark")
    out = _fresh("import lance_format.spark.source, lance_format.spark.reader, lance_format.spark.writer\n"
                 f"out = {{'heavy': {_loaded(HEAVY)}, 'pandas': 'pandas' in sys.modules}}")
    assert out == {"heavy": [], "pandas": False}


def test_spark_package_names_load_on_first_use() -> None:
    pytest.importorskip("pyspark")
    out = _fresh("import lance_format.spark as s\nbefore = sorted(m for m in sys.modules if m.startswith('lance_format.'))\n"
                 "from lance_format.spark import LanceDataSource, SparkRunner\n"
                 "out = {'before': before, 'names': [LanceDataSource.__name__, SparkRunner.__name__],\n"
                 "       'same': s.LanceDataSource is LanceDataSource}")
    assert out == {"before": ["lance_format.spark"], "names": ["LanceDataSource", "SparkRunner"], "same": True}


def test_plain_read_of_ints_strings_and_vectors_imports_no_pandas(tmp_path: Path) -> None:
    # pyarrow imports pandas (~0.45 s) on a first pa.array / pa.scalar / to_numpy; the decoders
    # build their Arrow arrays from buffers instead. (Filters still do: SQL literals are pa.scalar.)
    lance = pytest.importorskip("lance")
    import numpy as np
    import pyarrow as pa

    n = 3000
    table = pa.table({"id": pa.array(np.arange(n, dtype=np.int64)),
                      "s": pa.array([f"row {i % 17}" for i in range(n)]),
                      "vec": pa.FixedSizeListArray.from_arrays(pa.array(np.random.default_rng(0).random(n * 8,
                                                                                                      np.float32)), 8)})
    for version in ("2.0", "2.1"):
        lance.write_dataset(table, tmp_path / version, data_storage_version=version)
    code = ("import lance_format\nout = {}\n"
            f"for v in ('2.0', '2.1'):\n    ds = lance_format.dataset({str(tmp_path)!r} + '/' + v)\n"
            "    t = ds.to_table()\n    out[v] = [t.num_rows, 'pandas' in sys.modules]\n")
    assert _fresh(code) == {"2.0": [n, False], "2.1": [n, False]}


def test_functions_using_the_package_pickle_as_spark_sends_them() -> None:
    # Spark ships task functions with cloudpickle; a module global pickles by name.
    cloudpickle = pytest.importorskip("pyspark.cloudpickle")
    import pickle

    def uses_package() -> object:
        return lance_format.dataset

    assert pickle.loads(cloudpickle.dumps(uses_package))() is lance_format.dataset
    assert pickle.loads(pickle.dumps(lance_format)) is lance_format


def test_submodules_resolve_as_attributes_after_a_bare_import() -> None:
    out = _fresh("import lance_format\nout = {'errors': lance_format.errors.LanceError.__name__,\n"
                 "       'storage': lance_format.storage.__name__, 'nope': hasattr(lance_format, 'no_such_module')}")
    assert out == {"errors": "LanceError", "storage": "lance_format.storage", "nope": False}


def test_planning_a_plain_spark_read_opens_no_lance_dataset(tmp_path: Path) -> None:
    # Spark's planner workers run schema() and reader() per query; versions and the latest are
    # read through the table layer (tags, timestamps and nearest searches open a LanceDataset).
    pytest.importorskip("pyspark")
    lance = pytest.importorskip("lance")
    import pyarrow as pa

    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": list(range(100)), "x": [i / 10 for i in range(100)]}), uri,
                        max_rows_per_file=40)
    code = ("from lance_format.spark.source import LanceDataSource\n"
            f"src = LanceDataSource({{'path': {uri!r}, 'filter': 'x > 2.5', 'version': '1'}})\n"
            "schema = src.schema()\nreader = src.reader(schema)\n"
            f"out = {{'fields': schema.fieldNames(), 'parts': len(reader.partitions()), 'heavy': {_loaded(HEAVY)}}}")
    assert _fresh(code) == {"fields": ["id", "x"], "parts": 3, "heavy": []}
