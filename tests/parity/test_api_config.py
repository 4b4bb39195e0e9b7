"""Config and metadata edits (``update_config`` family, ``UpdateConfig``) behave as in pylance 14.0.2.

Each public call commits one ``UpdateConfig`` on both libraries; the resulting config, table
metadata, schema and field metadata must be equal, each library must read the other's dataset,
the ``.txn`` operation bytes must be pylance's, and every concurrent pair involving an
``UpdateConfig`` must be accepted, retried or refused as pylance does.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format._pb import transaction_pb2
from lance_format.errors import SchemaError
from tests.parity import conflict_ops as ops
from tests.parity.test_conflict_matrix import _classify

TABLE = pa.table({"a": [1, 2, 3], "s": pa.array([{"x": 1}] * 3)})


def _edits(ds: Any) -> list[Any]:
    """Every edit verb in turn; the return values, then the state read back by a new handle."""
    out = [
        ds.update_config({"k1": "v1", "k2": "v2"}),
        ds.update_config({"k1": None}),
        ds.delete_config_keys(["k2", "missing"]),
        ds.update_config({"a": "1", "gone": None}, replace=True),
        ds.update_metadata({"m": "1", "n": "2"}),
        ds.update_metadata({"n": None}),
        ds.update_schema_metadata({"sm": "1", "other": "2"}),
        ds.update_schema_metadata({"other": None}),
        ds.update_field_metadata({"a": {"fm": "1"}, "s.x": {"q": "2"}}),
        ds.update_field_metadata({"a": {"fm2": "1"}}, replace=True),
        ds.update_config({}),
        ds.config(), ds.metadata, ds.schema_metadata, ds.schema, ds.version,
    ]
    return out


def _state(ds: Any) -> tuple[Any, ...]:
    return ds.config(), ds.metadata, ds.schema_metadata, ds.schema, ds.version, ds.to_table()


def test_config_and_metadata_edits_equal_pylance(tmp_path: Path) -> None:
    results = {}
    for lib in (lance, lance_format):
        uri = str(tmp_path / f"{lib.__name__}.lance")
        results[lib] = _edits(lib.write_dataset(TABLE, uri))
        # each library reads the other's dataset the same way
        other = lance_format if lib is lance else lance
        assert _state(other.dataset(uri)) == _state(lib.dataset(uri))
    assert results[lance_format] == results[lance]


def test_deprecated_replace_verbs_equal_pylance(tmp_path: Path) -> None:
    states = []
    for lib in (lance, lance_format):
        ds = lib.write_dataset(TABLE, str(tmp_path / f"{lib.__name__}.lance"))
        ds.update_field_metadata({"a": {"old": "1"}})
        with pytest.warns(DeprecationWarning):
            ds.replace_schema_metadata({"x": "1"})
        with pytest.warns(DeprecationWarning):
            ds.replace_field_metadata("a", {"new": "2"})
        states.append(_state(ds))
    assert states[0] == states[1]


def _txn_op_bytes(uri: str, version: int) -> bytes:
    # the transaction of ``version`` was read at ``version - 1`` (its file name starts with it)
    candidates = list((Path(uri) / "_transactions").glob(f"{version - 1}-*.txn"))
    assert len(candidates) == 1, candidates
    pb = transaction_pb2.Transaction()
    pb.ParseFromString(candidates[0].read_bytes())
    return bytes(pb.update_config.SerializeToString())


@pytest.mark.parametrize("verb", [
    lambda ds: ds.update_config({"k": "v"}),
    lambda ds: ds.update_config({"k": None}, replace=True),
    lambda ds: ds.delete_config_keys(["k"]),
    lambda ds: ds.update_metadata({"k": "v"}, replace=True),
    lambda ds: ds.update_schema_metadata({"k": None}),
    lambda ds: ds.update_field_metadata({"s.x": {"k": "v"}}),
    lambda ds: ds.update_config({}),
], ids=["config", "config_replace", "delete_keys", "table_meta", "schema_meta", "field_meta", "empty"])
def test_update_config_txn_bytes_equal_pylance(tmp_path: Path, verb: Callable[[Any], Any]) -> None:
    got = []
    for lib in (lance, lance_format):
        uri = str(tmp_path / f"{lib.__name__}.lance")
        verb(lib.write_dataset(TABLE, uri))
        got.append(_txn_op_bytes(uri, 2))
    assert got[1] == got[0]


@pytest.mark.parametrize("call", [
    lambda ds: ds.update_field_metadata({"nope": {"a": "1"}}),
    lambda ds: ds.update_field_metadata({"s.nope": {"a": "1"}}),
], ids=["top", "nested"])
def test_unknown_field_is_refused_as_oserror(tmp_path: Path, call: Callable[[Any], Any]) -> None:
    for lib in (lance, lance_format):
        ds = lib.write_dataset(TABLE, str(tmp_path / f"{lib.__name__}.lance"))
        with pytest.raises(OSError, match="not found"):
            call(ds)
        assert ds.version == 1
    with pytest.raises(SchemaError, match="nope"):
        call(lance_format.dataset(str(tmp_path / "lance_format.lance")))


@pytest.mark.parametrize("call", [
    lambda ds: ds.update_config({1: "2"}),
    lambda ds: ds.update_config({"a": 2}),
    lambda ds: ds.update_config("x"),
    lambda ds: ds.delete_config_keys("abc"),
    lambda ds: ds.update_metadata({"a": b"x"}),
], ids=["int_key", "int_value", "not_a_dict", "keys_str", "bytes_value"])
def test_wrong_argument_types_are_type_errors(tmp_path: Path, call: Callable[[Any], Any]) -> None:
    for lib in (lance, lance_format):
        ds = lib.write_dataset(TABLE, str(tmp_path / f"{lib.__name__}.lance"))
        with pytest.raises(TypeError):
            call(ds)


# --- concurrent commits ---------------------------------------------------------------------


def _uc(**kw: Any) -> Callable[[Any, str, Any], Any]:
    def build(lib: Any, uri: str, ds: Any) -> Any:
        L = lib.LanceOperation
        args = {}
        for name, value in kw.items():
            if name == "field_metadata_updates":
                args[name] = {fid: L.UpdateMap(*v) for fid, v in value.items()}
            else:
                args[name] = L.UpdateMap(*value)
        return L.UpdateConfig(**args)
    return build


CONFIGS = {
    "cfg_k": _uc(config_updates=({"k": "v"},)),
    "cfg_j": _uc(config_updates=({"j": "v"},)),
    "cfg_replace_j": _uc(config_updates=({"j": "v"}, True)),
    "tmeta_k": _uc(table_metadata_updates=({"k": "v"},)),
    "smeta_k": _uc(schema_metadata_updates=({"k": "v"},)),
    "smeta_j": _uc(schema_metadata_updates=({"j": None},)),
    "fmeta0_k": _uc(field_metadata_updates={0: ({"k": "v"},)}),
    "fmeta1_k": _uc(field_metadata_updates={1: ({"k": "v"},)}),
}
KINDS = ("cfg_k", "tmeta_k", "smeta_k", "fmeta1_k")
PAIRS = ([(m, t) for m in KINDS for t in ops.OPERATIONS] + [(m, t) for m in ops.OPERATIONS for t in KINDS]
         + [(m, t) for m in CONFIGS for t in CONFIGS])
BUILDERS = {**ops.OPERATIONS, **CONFIGS}


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("config_conflict_bases")
    out = {}
    for name, lib in (("pylance", lance), ("ours", lance_format)):
        uri = root / f"{name}.lance"
        lib.write_dataset(ops.base_table(), str(uri), max_rows_per_file=ops.ROWS_PER_FRAGMENT)
        out[name] = uri
    return out


def _outcome(lib: Any, base: Path, work: Path, mine: str, theirs: str) -> tuple[str, Any]:
    uri = str(work / f"{'py' if ops.is_pylance(lib) else 'ours'}.lance")
    shutil.copytree(base, uri)
    their_op = BUILDERS[theirs](lib, uri, lib.dataset(uri, version=1))
    my_op = BUILDERS[mine](lib, uri, lib.dataset(uri, version=1))
    lib.LanceDataset.commit(uri, their_op, read_version=1)
    try:
        lib.LanceDataset.commit(uri, my_op, read_version=1)
    except Exception as exc:  # noqa: BLE001 - classified; other errors compared by builtin class
        try:
            return _classify(exc), None
        except Exception:  # noqa: BLE001
            return f"refused ({'OSError' if isinstance(exc, OSError) else type(exc).__name__})", None
    # pylance reads the result of ours; the edited state must be the same
    ds = lance.dataset(uri)
    return "accepted", (ds.config(), ds.metadata, ds.schema)


@pytest.mark.parametrize(("mine", "theirs"), PAIRS, ids=[f"{m}-over-{t}" for m, t in PAIRS])
def test_update_config_commit_outcome_equals_pylance(bases: dict[str, Path], tmp_path: Path, mine: str,
                                                     theirs: str) -> None:
    expected = _outcome(lance, bases["pylance"], tmp_path, mine, theirs)
    got = _outcome(lance_format, bases["ours"], tmp_path, mine, theirs)
    assert got == expected
