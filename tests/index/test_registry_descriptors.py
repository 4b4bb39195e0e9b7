"""The registry's light descriptors describe the kinds their modules define, and load them on demand."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from lance_format.errors import UnsupportedIndexTypeError
from lance_format.index import registry
from lance_format.index.kinds import listed, vector
from lance_format.index.kinds.catalog import CATALOG

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("info", CATALOG, ids=lambda i: i.name)
def test_each_descriptor_agrees_with_the_kind_its_module_defines(info: object) -> None:
    from lance_format.index.kinds.catalog import KindInfo

    assert isinstance(info, KindInfo)
    kind = registry.load(info)
    assert (kind.name, tuple(kind.aliases), kind.details, kind.buildable, kind.family) == (
        info.name, info.aliases, info.details, info.buildable, info.family)
    assert kind.__module__ == info.module or type(kind).__module__ == info.module
    assert registry.load(info) is kind  # a singleton once loaded


def test_kinds_keeps_the_order_and_objects_of_the_eager_registry() -> None:
    from lance_format.index.kinds import bitmap, bloomfilter, btree, inverted, label_list, ngram, zonemap

    eager = (btree.KIND, bitmap.KIND, label_list.KIND, zonemap.KIND, bloomfilter.KIND, ngram.KIND,
             inverted.KIND, *vector.ALL, *listed.ALL)
    assert eager == registry.KINDS
    assert all(a is b for a, b in zip(registry.KINDS, eager, strict=True))


def test_lookups_return_the_module_singletons() -> None:
    from lance_format.index.kinds import btree, inverted

    assert registry.by_type("btree") is btree.KIND
    assert registry.by_type("FTS") is inverted.KIND is registry.by_type("INVERTED")
    assert registry.by_type("IVF_HNSW_SQ") is vector.kind_named("IVF_HNSW_SQ")
    with pytest.raises(UnsupportedIndexTypeError, match="FRAG_REUSE"):
        registry.by_type("FRAG_REUSE")
    with pytest.raises(UnsupportedIndexTypeError, match="NOPE"):
        registry.by_type("NOPE")
    assert "IVF_PQ" in registry.buildable_types() and "JSON" not in registry.buildable_types()


def test_loaded_kinds_pickle_to_the_same_singletons() -> None:
    # Build tasks carry their kind to Spark / process runners.
    for name in ("BTREE", "INVERTED", "IVF_PQ", "ZONEMAP"):
        kind = registry.by_type(name)
        back = pickle.loads(pickle.dumps(kind))
        assert back.name == kind.name and type(back) is type(kind)
    assert pickle.loads(pickle.dumps(registry.by_type("IVF_PQ"))) is registry.by_type("IVF_PQ")


def test_a_fresh_process_loads_only_the_kind_it_asks_for() -> None:
    code = ("import sys\nfrom lance_format.index import registry\n"
            "before = sorted(m for m in sys.modules if m.startswith('lance_format.index.kinds.'))\n"
            "registry.by_type('BTREE')\n"
            "after = sorted(m for m in sys.modules if m.startswith('lance_format.index.kinds.'))\n"
            "print(before, after)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ("['lance_format.index.kinds.catalog'] "
                                   "['lance_format.index.kinds.btree', 'lance_format.index.kinds.catalog']")
