"""A fresh process loads only the modules its path needs: open + scan, indexed filter, nearest, builds.

The registry imports an index kind's module the first time that kind is asked for, and
``lance_format.dataset`` loads search, index-build, maintenance and SQL-query modules when their
verbs run (issue 28: every Dagster code server, Spark worker and benchmark "first query" pays
what a process imports). Import state is per process, so each check runs a new interpreter.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from fresh_process import run_fresh as _fresh

#: Modules an open + plain / filtered / BTREE-indexed scan has no use for.
NOT_FOR_A_SCAN = ("lance_format.index.kinds.vector", "lance_format.index.kinds.inverted",
                  "lance_format.index.kinds.bloomfilter", "lance_format.index.kinds.zonemap",
                  "lance_format.index.kinds.ngram", "lance_format.index.vector", "lance_format.index.inverted",
                  "lance_format.index.build",
                  "lance_format.search.nearest", "lance_format.search.fulltext", "lance_format.maintenance.cleanup",
                  "lance_format.maintenance.compaction", "lance_format.optimize", "lance_format.sql_query",
                  "lance_format.evolution.merge_insert", "sqlglot")


def _table(n: int) -> pa.Table:
    rng = np.random.default_rng(7)
    vec = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 8, dtype=np.float32)), 8)
    return pa.table({"id": np.arange(n, dtype=np.int64), "x": rng.random(n), "vec": vec})


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A pylance dataset with a BTREE on ``id`` and an IVF_PQ on ``vec``."""
    lance = pytest.importorskip("lance")
    uri = str(tmp_path_factory.mktemp("paths") / "t.lance")
    ds = lance.write_dataset(_table(4000), uri, max_rows_per_file=1500)
    ds.create_scalar_index("id", "BTREE")
    ds.create_index("vec", "IVF_PQ", num_partitions=4, num_sub_vectors=2)
    return uri


def test_open_and_scans_load_no_search_build_maintenance_or_other_kinds(indexed: str) -> None:
    code = ("import lance_format as lf\n"
            f"ds = lf.dataset({indexed!r})\n"
            "rows = [ds.to_table().num_rows, ds.to_table(filter='x > 0.5 and id < 100').num_rows,\n"
            "        ds.to_table(filter='id = 5').column('id').to_pylist()]\n"
            "plan = ds.scanner(filter='id = 7').explain_plan()\n"
            f"out = lambda loaded: {{'rows': rows, 'kinds': loaded(['lance_format.index.kinds']),\n"
            f"                      'heavy': loaded({list(NOT_FOR_A_SCAN)!r})}}\n")
    out = _fresh(code)
    assert out["rows"][0] == 4000 and out["rows"][2] == [5]  # type: ignore[index]
    assert out["heavy"] == []
    assert out["kinds"] == ["lance_format.index.kinds", "lance_format.index.kinds.btree",
                            "lance_format.index.kinds.catalog"]


def test_a_nearest_query_loads_the_vector_kind_but_not_text_or_maintenance(indexed: str) -> None:
    lance = pytest.importorskip("lance")
    q = [0.5] * 8
    code = ("import lance_format as lf\n"
            f"ds = lf.dataset({indexed!r})\n"
            f"t = ds.to_table(columns=['id'], nearest={{'column': 'vec', 'q': {q!r}, 'k': 5, 'nprobes': 4,"
            " 'refine_factor': 50})\n"
            "out = lambda loaded: {'ids': sorted(t.column('id').to_pylist()), 'heavy': loaded(["
            "'lance_format.index.kinds.inverted', 'lance_format.search.fulltext', 'lance_format.index.build', "
            "'lance_format.maintenance.cleanup', 'lance_format.optimize', 'sqlglot']), "
            "'vector': 'lance_format.index.kinds.vector' in sys.modules}\n")
    out = _fresh(code)
    theirs = lance.dataset(indexed).to_table(columns=["id"], nearest={"column": "vec", "q": q, "k": 5, "nprobes": 4,
                                                                       "refine_factor": 50})
    # refine over every probed row: the exact top 5 on both sides
    assert out == {"ids": sorted(theirs.column("id").to_pylist()), "heavy": [], "vector": True}


def test_builds_and_compaction_in_a_fresh_process_load_their_kinds_on_demand(tmp_path: Path) -> None:
    import lance_format

    uri = str(tmp_path / "b.lance")
    lance_format.write_dataset(_table(3000), uri, max_rows_per_file=500)
    code = ("import lance_format as lf\n"
            f"ds = lf.dataset({uri!r})\n"
            "before = sorted(m for m in sys.modules if m.startswith('lance_format.index.kinds.'))\n"
            "ds.create_scalar_index('x', 'BITMAP')\n"
            "ds.create_index('id', 'ZONEMAP')\n"
            "ds.delete('id < 100')\n"
            "m = ds.optimize.compact_files(target_rows_per_fragment=3000)\n"
            "ds = lf.dataset(ds.uri)\n"
            "out = {'before': before, 'types': sorted(i['type'] for i in ds.list_indices()),\n"
            "       'rows': ds.count_rows(), 'frags': len(ds.get_fragments()), 'removed': m.fragments_removed,\n"
            "       'hit': ds.to_table(filter='id = 150').column('id').to_pylist(),\n"
            "       'vector': 'lance_format.index.kinds.vector' in sys.modules}\n")
    out = _fresh(code)
    assert out == {"before": ["lance_format.index.kinds.catalog"], "types": ["Bitmap", "ZoneMap"], "rows": 2900,
                   "frags": 1, "removed": 6, "hit": [150], "vector": False}


def test_kinds_pickled_here_unpickle_in_a_process_that_loaded_no_kind() -> None:
    # Build tasks carry their kind to process and Spark runners, whose workers start with no kind loaded.
    from lance_format.index import registry

    blobs = {name: pickle.dumps(registry.by_type(name)).hex() for name in ("BTREE", "IVF_HNSW_SQ", "FTS")}
    code = (f"import pickle\nblobs = {blobs!r}\n"
            "kinds = {n: pickle.loads(bytes.fromhex(b)) for n, b in blobs.items()}\n"
            "from lance_format.index import registry\n"
            "out = {n: [k.name, type(k) is type(registry.by_type(n))] for n, k in kinds.items()}\n"
            "out['same_vector'] = kinds['IVF_HNSW_SQ'] is registry.by_type('IVF_HNSW_SQ')\n")
    assert _fresh(code) == {"BTREE": ["BTREE", True], "IVF_HNSW_SQ": ["IVF_HNSW_SQ", True],
                            "FTS": ["INVERTED", True], "same_vector": True}


def test_the_dataset_modules_public_names_resolve_on_first_read() -> None:
    code = ("import lance_format.dataset\nd = sys.modules['lance_format.dataset']\n"
            "from lance_format.dataset import CleanupStats, CompactionMetrics, MergeInsertBuilder, SqlQueryBuilder\n"
            "from lance_format.maintenance.cleanup import CleanupStats as C\n"
            "from lance_format.sql_query import SqlQuery\n"
            "out = {'same': [CleanupStats is C, d.SqlQuery is SqlQuery],\n"
            "       'names': [CompactionMetrics.__name__, MergeInsertBuilder.__name__, SqlQueryBuilder.__name__],\n"
            "       'all': all(hasattr(d, n) for n in d.__all__), 'nope': hasattr(d, 'no_such_name')}\n")
    assert _fresh(code) == {"same": [True, True], "names": ["CompactionMetrics", "MergeInsertBuilder",
                                                            "SqlQueryBuilder"], "all": True, "nope": False}


#: Write-side modules (writers, encoders, the commit protocol, schema evolution, maintenance) that a
#: process which only opens and reads never loads (issue 28 item 7: ~0.1 s of CPU on a cold start).
WRITE_SIDE = ("lance_format.write", "lance_format.file.writer", "lance_format.file.legacy.writer",
              "lance_format.file.v2_0.encoder", "lance_format.file.v2_0.page_encode", "lance_format.file.v2_1.encoder",
              "lance_format.file.v2_1.fullzip_enc", "lance_format.file.v2_1.valuesenc", "lance_format.file.v2_1.shred",
              "lance_format.table.commit", "lance_format.table.conflicts", "lance_format.table.transaction",
              "lance_format.table.apply", "lance_format.table.rebase", "lance_format.table.writing",
              "lance_format.table.delete", "lance_format.table.detached", "lance_format.table.discard",
              "lance_format.table.auto_cleanup", "lance_format.table.codec.transaction",
              "lance_format.evolution.metadata", "lance_format.evolution.columns", "lance_format.evolution.batch_commit",
              "lance_format.evolution.update", "lance_format.evolution.rowops", "lance_format.evolution.udf",
              "lance_format.evolution.bases", "lance_format.evolution.branches", "lance_format.evolution.merge_columns",
              "lance_format.evolution.reader_columns", "lance_format.evolution.fragment_ops",
              "lance_format.evolution.fragment_columns", "lance_format.evolution.inspection",
              "lance_format.evolution.merge_insert", "lance_format.maintenance", "lance_format.index.build",
              "lance_format.index.vector.build", "lance_format.index.vector.kmeans")

_READS = {
    "scan": "t = ds.to_table(columns=['id', 'x']); s = ds.scanner(columns=['id'], limit=7).to_table()\n"
            "got = [t.num_rows, s.num_rows, float(round(sum(t.column('x').to_pylist()), 6))]\n",
    "filtered scan": "got = sorted(ds.to_table(columns=['id'], filter='x > 0.5 and id < 300').column('id').to_pylist())\n",
    "btree query": "got = ds.to_table(filter='id = 5').column('id').to_pylist() + [ds.count_rows('id < 42')]\n",
    "nearest query": "got = sorted(ds.to_table(columns=['id'], nearest={'column': 'vec', 'q': [0.5] * 8, 'k': 5, "
                     "'nprobes': 4, 'refine_factor': 50}).column('id').to_pylist())\n",
    "fragment reads": "fs = ds.get_fragments()\n"
                      "got = [[f.count_rows(), f.to_table(columns=['id'], limit=2).column('id').to_pylist()] for f in fs]\n",
}


@pytest.mark.parametrize("read", list(_READS))
def test_a_reading_process_loads_no_writer_encoder_commit_or_evolution_module(indexed: str, read: str) -> None:
    lance = pytest.importorskip("lance")
    code = (f"import lance_format as lf\nds = lf.dataset({indexed!r})\n{_READS[read]}"
            f"out = lambda loaded: {{'got': got, 'write_side': loaded({list(WRITE_SIDE)!r})}}\n")
    out = _fresh(code)
    ns: dict[str, object] = {"ds": lance.dataset(indexed)}
    exec(_READS[read], ns)  # the same read through pylance, the oracle
    assert out == {"got": ns["got"], "write_side": []}


def test_append_and_commit_in_a_fresh_process_load_the_write_side_on_first_use(tmp_path: Path) -> None:
    lance = pytest.importorskip("lance")
    uri = str(tmp_path / "w.lance")
    lance.write_dataset(_table(1000), uri)
    code = ("import lance_format as lf\nimport numpy as np, pyarrow as pa\n"
            f"ds = lf.dataset({uri!r})\n"
            "n0 = ds.count_rows(); meta = ds.schema_metadata\n"
            "before = [m for m in ('lance_format.table.commit', 'lance_format.file.writer') if m in sys.modules]\n"
            "more = pa.table({'id': np.arange(1000, 1100, dtype=np.int64), 'x': np.full(100, 0.25),\n"
            "                 'vec': ds.to_table(columns=['vec'], limit=100).column('vec')})\n"
            "ds = lf.write_dataset(more, ds.uri, mode='append')\n"
            "frags = lf.write_fragments(more, ds.uri)\n"
            "ds = lf.LanceDataset.commit(ds.uri, lf.LanceOperation.Append(frags), read_version=ds.version)\n"
            "from lance_format.dataset import LanceOperation, Transaction\n"
            "from lance_format.table import transaction as txn\n"
            "ds.update_config({'k': 'v'})\n"
            "out = {'n0': n0, 'meta': meta, 'before': before, 'rows': ds.count_rows(), 'version': ds.version,\n"
            "       'same': [LanceOperation is txn.LanceOperation, Transaction is txn.Transaction],\n"
            "       'frags': len(ds.get_fragments()), 'config': ds.config().get('k'),\n"
            "       'op': type(ds.read_transaction(3).operation).__name__}\n")
    out = _fresh(code)
    assert out == {"n0": 1000, "meta": {}, "before": [], "rows": 1200, "version": 4, "same": [True, True],
                   "frags": 3, "config": "v", "op": "Append"}
    theirs = lance.dataset(uri)
    assert theirs.count_rows() == 1200 and theirs.version == 4
    assert sorted(theirs.to_table(columns=["id"]).column("id").to_pylist()) == \
        sorted(list(range(1000)) + 2 * list(range(1000, 1100)))
