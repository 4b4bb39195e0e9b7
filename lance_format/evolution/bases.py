"""Multi-base datasets: data files written under other roots than the dataset's own.

pylance 14.0.2's ``write_dataset(..., initial_bases=[DatasetBasePath(...)],
target_bases=[name or path])``: creating a dataset registers the bases in the manifest
(``base_paths``, ids from 1; the ``Overwrite`` transaction lists them as
``initial_bases``) and writes the data files under the target base, each ``DataFile``
carrying the base's id. A base that is a dataset root keeps files in its ``data/``
directory, any other base holds them directly. Appends may target any registered base.
Deletion files, manifests and transactions stay in the dataset itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

from lance_format.errors import InvalidInputError
from lance_format.evolution.branches import write_first_version
from lance_format.schema import LanceSchema
from lance_format.storage import ObjectStore, open_store
from lance_format.table.commit import build_manifest, commit_transaction
from lance_format.table.discard import discard_fragment_files
from lance_format.table.manifest import Manifest
from lance_format.table.models import BasePath, FragmentMetadata
from lance_format.table.naming import DATA_DIR
from lance_format.table.transaction import LanceOperation, Transaction
from lance_format.table.versions import load_manifest
from lance_format.table.writing import prepare_write, write_fragment_files

if TYPE_CHECKING:
    pass


@dataclass(frozen=True)
class DatasetBasePath:
    """A base path (pylance's ``lance.DatasetBasePath``).

    Attributes:
        path: Absolute URI or path of the base.
        name: Optional alias used by ``target_bases``.
        is_dataset_root: Files live under ``{path}/data/`` rather than ``{path}/``.
        id: Base id (assigned from 1 when ``None``).
    """

    path: str
    name: str | None = None
    is_dataset_root: bool = False
    id: int | None = None


class _DataDirOf:
    """Adapter: ``child("data")`` is the directory data files go to in a base."""

    def __init__(self, target: ObjectStore):
        self._target = target

    def child(self, key: str) -> ObjectStore:
        return self._target


def _target_store(base: DatasetBasePath, options: Mapping[str, str] | None) -> ObjectStore:
    store = open_store(base.path, options)
    return store.child(DATA_DIR) if base.is_dataset_root else store


def _pick(bases: Sequence[DatasetBasePath], target: str, where: str) -> DatasetBasePath:
    for b in bases:
        if target in (b.name, b.path):
            return b
    raise InvalidInputError(f"{where}: target base {target!r} is not a registered base path "
                            f"({[b.name or b.path for b in bases]})")


def _write_into(base: DatasetBasePath, data: Any, schema_store: ObjectStore, options: Mapping[str, str] | None,
                mode: str, version: str | None, max_rows_per_file: int) -> tuple[list[FragmentMetadata], str, Any]:

    target, batches, lance_schema, _base, _rv, storage = prepare_write(
        data, schema_store, schema=None, mode=cast(Any, mode), data_storage_version=version)
    data_store = _target_store(base, options)
    frags = write_fragment_files(cast(ObjectStore, _DataDirOf(data_store)), target, batches, lance_schema,
                                 max_rows_per_file=max_rows_per_file, data_storage_version=storage)
    assert base.id is not None
    out = [dataclasses.replace(f, files=tuple(dataclasses.replace(df, base_id=base.id) for df in f.files))
           for f in frags]
    return out, storage, (lance_schema, data_store)


def write_into_bases(data: Any, uri: str, *, mode: Literal["create", "append"] = "create",
                     initial_bases: Sequence[DatasetBasePath] | None = None,
                     target_bases: Sequence[str] | None = None,
                     storage_options: Mapping[str, str] | None = None,
                     data_storage_version: str | None = None,
                     max_rows_per_file: int = 1024 * 1024,
                     enable_stable_row_ids: bool = False) -> tuple[ObjectStore, Manifest]:
    """Create a multi-base dataset, or append to one, writing data files into a target base.

    Args:
        data: Anything :func:`lance_format.write_dataset` accepts.
        uri: The dataset (manifests, transactions and deletions live here).
        mode: ``"create"`` registers ``initial_bases``; ``"append"`` uses the registered ones.
        initial_bases: Bases to register (create only).
        target_bases: One base (name or path) that receives the data files; the dataset
            itself when ``None``.
        storage_options: Backend options (used for the bases too).
        data_storage_version: Lance file version.
        max_rows_per_file: Rows per data file.
        enable_stable_row_ids: Stable row ids (create only).

    Raises:
        InvalidInputError: unknown target bases, duplicate ids/names, or bases on append.
        DatasetAlreadyExistsError: ``mode="create"`` on an existing dataset.

    Returns:
        The dataset's store and the committed manifest (``lance_format.write.write_dataset_with_bases``
        opens it). An append without ``target_bases`` is an ordinary append: the caller writes it.
    """
    if target_bases is not None and len(target_bases) != 1:
        raise InvalidInputError(f"{uri}: exactly one target base is supported, got {list(target_bases)}")
    store = open_store(uri, storage_options)
    if mode == "append":
        if initial_bases:
            raise InvalidInputError(f"{uri}: initial_bases can only be given when creating a dataset")
        current = load_manifest(store)
        registered = [DatasetBasePath(bp.path, bp.name, bp.is_dataset_root, bp.id) for bp in current.base_paths]
        if target_bases is None:
            raise InvalidInputError(f"{uri}: an append into a base needs target_bases")
        base = _pick(registered, target_bases[0], uri)
        frags, _v, (_s, data_store) = _write_into(base, data, store, storage_options, "append",
                                                  data_storage_version, max_rows_per_file)
        try:
            manifest = commit_transaction(store, Transaction(current.version, LanceOperation.Append(frags)),
                                          base=current)
        except BaseException:
            discard_fragment_files(data_store, frags, in_data_dir=False)
            raise
        return store, manifest
    if mode != "create":
        raise InvalidInputError(f"mode must be 'create' or 'append', got {mode!r}")
    bases = _assign_ids(list(initial_bases or []), uri)
    if target_bases is None:
        raise InvalidInputError(f"{uri}: creating with initial_bases needs target_bases (where data goes)")
    base = _pick(bases, target_bases[0], uri)
    frags, storage, (lance_schema, data_store) = _write_into(base, data, store, storage_options, "create",
                                                             data_storage_version, max_rows_per_file)
    initial = [BasePath(int(b.id or 0), b.path, b.is_dataset_root, b.name) for b in bases]
    txn = Transaction(0, LanceOperation.Overwrite(lance_schema, frags, initial_bases=initial))
    try:
        manifest = build_manifest(None, txn, version=1, data_storage_version=storage,
                                  enable_stable_row_ids=enable_stable_row_ids)

        written, _size = write_first_version(store, manifest, txn)
    except BaseException:
        discard_fragment_files(data_store, frags, in_data_dir=False)
        raise
    return store, written


def _assign_ids(bases: list[DatasetBasePath], where: str) -> list[DatasetBasePath]:
    used = {b.id for b in bases if b.id is not None}
    out = []
    nxt = 1
    for b in bases:
        if b.id is None:
            while nxt in used:
                nxt += 1
            b = dataclasses.replace(b, id=nxt)
            used.add(nxt)
        out.append(b)
    ids = [b.id for b in out]
    names = [b.name for b in out if b.name is not None]
    if len(set(ids)) != len(ids) or len(set(names)) != len(names):
        raise InvalidInputError(f"{where}: base path ids and names must be unique ({out})")
    return out


def _empty_schema() -> Any:

    return LanceSchema(())
