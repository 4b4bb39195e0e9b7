"""Branches and shallow clones: new version histories that share the source's files.

Both write only metadata (as pylance 14.0.2 does, ``Dataset::create_branch`` /
``Dataset::shallow_clone`` in ``rust/lance/src/dataset.rs``; layout in
``lance/docs/table/branch_tag.md`` and ``layout.md``):

* the first manifest of the new history keeps the source's version number, adds a
  ``BasePath{is_dataset_root: true, path: <source dataset>}`` with the next free base id
  (named after the source branch when branching from a branch), and gives that id to
  every inherited data file, deletion file and index that had none;
* its transaction is a ``Clone`` (``is_shallow``, ``ref_name``, ``ref_version``,
  ``ref_path``, ``branch_name``), written as ``{version}-{uuid}.txn``;
* a branch lives in ``tree/{name}/`` of the root dataset and is described by
  ``_refs/branches/{name with '/' as %2F}.json``: ``parentBranch``, ``identifier``
  (``version_mapping``: the parent's pairs plus ``[version, 32 hex digits]``),
  ``parentVersion``, ``createAt`` (unix seconds), ``manifestSize``, ``metadata``.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from lance_format.errors import (
    CorruptFileError,
    DatasetAlreadyExistsError,
    InvalidInputError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    TagError,
)
from lance_format.storage import ObjectStore, open_store
from lance_format.table import tags as _tags
from lance_format.table.codec.manifest import encode_manifest
from lance_format.table.codec.transaction import clone_operation, encode_transaction
from lance_format.table.commit import run_after_commit
from lance_format.table.external_commit import put_manifest
from lance_format.table.manifest import OUR_WRITER_VERSION, Manifest, compute_feature_flags
from lance_format.table.models import BasePath, FragmentMetadata
from lance_format.table.naming import (
    BRANCHES_DIR,
    DATA_DIR,
    DELETIONS_DIR,
    INDICES_DIR,
    TRANSACTIONS_DIR,
    VERSIONS_DIR,
    NamingScheme,
    manifest_key,
    transaction_key,
)
from lance_format.table.transaction import Transaction
from lance_format.table.versions import find_latest, load_manifest, write_hint

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset

#: What a branch tree holds of its own; nested branches (``tree/a/b``) sit beside these.
_DATASET_DIRS = (VERSIONS_DIR, TRANSACTIONS_DIR, DELETIONS_DIR, DATA_DIR, INDICES_DIR)
_BRANCH_KEYS = ("parent_branch", "branch_identifier", "parent_version", "create_at", "manifest_size", "metadata")

Reference = int | str | tuple[str | None, int | None] | None


@dataclass(frozen=True, eq=False)
class Branch(Mapping[str, Any]):
    """One branch; also readable with pylance's dict keys (``branch["parent_version"]``)."""

    name: str
    parent_branch: str | None
    parent_version: int
    create_at: int
    manifest_size: int
    identifier: tuple[tuple[int, str], ...] = ()
    metadata: Mapping[str, str] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        if key == "branch_identifier":
            return list(self.identifier)
        if key not in _BRANCH_KEYS:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(_BRANCH_KEYS)

    def __len__(self) -> int:
        return len(_BRANCH_KEYS)


class Branches:
    """``ds.branches`` as in pylance: ``list()`` and ``delete(name)``."""

    def __init__(self, ds: LanceDataset):
        self._ds = ds

    def list(self) -> dict[str, Branch]:
        """Every branch by name."""
        return list_branches(self._ds._root_store)

    def delete(self, branch: str) -> None:
        """Delete ``branch``."""
        delete_branch(self._ds, branch)


def branch_file_key(name: str) -> str:
    """``_refs/branches/{name}.json`` with ``/`` written as ``%2F`` (object_store path encoding)."""
    _tags.validate_branch_name(name)
    return f"{BRANCHES_DIR}/{quote(name, safe='')}.json"


def _render_branch(parent: str | None, parent_version: int, mapping: list[tuple[int, str]], size: int) -> bytes:
    body = {"parentBranch": parent, "identifier": {"version_mapping": [[v, i] for v, i in mapping]},
            "parentVersion": parent_version, "createAt": int(time.time()), "manifestSize": size, "metadata": {}}
    return json.dumps(body, indent=2).encode()


def _parse_branch(name: str, data: bytes, where: str) -> Branch:
    try:
        obj = json.loads(data)
        mapping = tuple((int(v), str(i)) for v, i in (obj.get("identifier") or {}).get("version_mapping", []))
        return Branch(name, obj.get("parentBranch"), int(obj["parentVersion"]), int(obj.get("createAt", 0)),
                      int(obj["manifestSize"]), mapping, dict(obj.get("metadata") or {}))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CorruptFileError(f"{where}: malformed branch file: {exc}") from exc


def list_branches(root: ObjectStore) -> dict[str, Branch]:
    """Every branch of the root dataset by name."""
    out: dict[str, Branch] = {}
    for info in root.list(BRANCHES_DIR):
        rest = info.key[len(BRANCHES_DIR) + 1:]
        if "/" in rest or not rest.endswith(".json"):
            continue
        name = unquote(rest[: -len(".json")])
        try:
            _tags.validate_branch_name(name)
            out[name] = _parse_branch(name, root.read(info.key), root.uri(info.key))
        except (TagError, ObjectNotFoundError):
            continue
    return dict(sorted(out.items()))


def read_branch(root: ObjectStore, name: str) -> Branch:
    """The branch ``name``.

    Raises:
        InvalidInputError: if there is no such branch.
    """
    key = branch_file_key(name)
    try:
        return _parse_branch(name, root.read(key), root.uri(key))
    except ObjectNotFoundError:
        raise InvalidInputError(f"{root.uri('')}: branch {name!r} does not exist") from None


# -- resolving references ------------------------------------------------------------------


def resolve(ds: LanceDataset, reference: Reference) -> tuple[str | None, Manifest]:
    """``(branch, manifest)`` a pylance reference names.

    An int is a version of ``ds``'s branch, a str a tag, a tuple ``(branch, version)``
    (``None``/``"main"`` = main, version ``None`` = latest); ``None`` is ``ds``'s version.
    """
    root = ds._root_store
    if reference is None:
        return ds._branch, ds.manifest
    if isinstance(reference, bool):
        raise InvalidInputError(f"invalid reference {reference!r}")
    if isinstance(reference, int):
        return ds._branch, load_manifest(ds._store, reference)
    if isinstance(reference, str):
        tag = _tags.read_tag(root, reference)
        return tag.branch, load_manifest(_tags.branch_store(root, tag.branch), tag.version)
    if isinstance(reference, tuple) and len(reference) == 2:
        branch = None if reference[0] in (None, "main") else str(reference[0])
        return branch, load_manifest(_tags.branch_store(root, branch), reference[1])
    raise InvalidInputError(f"invalid reference {reference!r}: use a version, a tag or (branch, version)")


# -- writing the first version of a new history ---------------------------------------------


def _with_base(manifest: Manifest, source_path: str, name: str | None, branch: str | None) -> Manifest:
    """The source manifest re-rooted: inherited files point at a new base path."""
    base_id = max((bp.id for bp in manifest.base_paths), default=-1) + 1
    bases = (*manifest.base_paths, BasePath(base_id, source_path, True, name))

    def rebased(frag: FragmentMetadata) -> FragmentMetadata:
        files = tuple(df if df.base_id is not None else dataclasses.replace(df, base_id=base_id)
                      for df in frag.files)
        d = frag.deletion_file
        if d is not None and d.base_id is None:
            d = dataclasses.replace(d, base_id=base_id)
        return dataclasses.replace(frag, files=files, deletion_file=d)

    indices = tuple(_index_with_base(i, base_id) for i in manifest.indices)
    return manifest.replace(base_paths=bases, branch=branch, fragments=tuple(rebased(f) for f in manifest.fragments),
                            indices=indices)


def _index_with_base(index: Any, base_id: int) -> Any:
    if dataclasses.is_dataclass(index) and not isinstance(index, type):
        return index if getattr(index, "base_id", None) is not None else dataclasses.replace(index, base_id=base_id)
    if index.HasField("base_id"):
        return index
    copy = type(index)()
    copy.CopyFrom(index)
    copy.base_id = base_id
    return copy


def _clone_transaction(version: int, ref_name: str | None, ref_path: str, branch: str | None) -> Transaction:
    # The Clone message comes from the transaction codec (protobuf stays in table/codec).
    return Transaction(version, clone_operation(ref_version=version, ref_path=ref_path, ref_name=ref_name,
                                                branch_name=branch))


def write_first_version(target: ObjectStore, manifest: Manifest, txn: Transaction, *,
                        txn_bytes: bytes | None = None) -> tuple[Manifest, int]:
    """Write ``manifest`` (with ``txn``) as the first version in ``target``; returns it and its size.

    ``txn_bytes`` overrides the encoding of ``txn`` (for fields the models do not carry).

    Raises:
        DatasetAlreadyExistsError: if that version exists in ``target``.
    """

    reader, writer = compute_feature_flags(manifest, manifest.reader_feature_flags)
    manifest = manifest.replace(timestamp_ns=time.time_ns(), writer_version=OUR_WRITER_VERSION,
                                transaction_file=txn.file_name, tag="", transaction_bytes=None,
                                reader_feature_flags=reader, writer_feature_flags=writer)
    txn_bytes = encode_transaction(txn) if txn_bytes is None else txn_bytes
    target.write(transaction_key(txn.file_name), txn_bytes)
    data = encode_manifest(manifest, txn_bytes)
    key = manifest_key(manifest.version, NamingScheme.V2)
    try:
        # Through the external manifest store when the dataset has one (a branch or clone on
        # S3 commits like its root), else the object store's own create-only write.
        put_manifest(target, key, manifest.version, data)
    except ObjectAlreadyExistsError:
        target.delete(transaction_key(txn.file_name))
        raise DatasetAlreadyExistsError(f"{target.uri('')}: a dataset already exists there") from None
    write_hint(target, manifest.version)
    written = load_manifest(target, manifest.version)
    run_after_commit(target, written)  # the hooks every commit runs (auto-cleanup…)
    return written, len(data)


def create_branch(ds: LanceDataset, name: str, reference: Reference = None) -> LanceDataset:
    """Create branch ``name`` from ``reference`` and return the dataset on it.

    Raises:
        TagError: for an invalid name (``main``, ``..``, absolute paths ...).
        InvalidInputError: if the branch exists already.
    """
    root = ds._root_store
    key = branch_file_key(name)
    if root.exists(key):
        raise InvalidInputError(f"{root.uri('')}: branch {name!r} already exists")
    source_branch, source = resolve(ds, reference)
    source_store = _tags.branch_store(root, source_branch)
    target = _tags.branch_store(root, name)
    if find_latest(target) is not None:
        raise InvalidInputError(f"{target.uri('')}: branch directory is not empty")
    ref_path = source_store.uri("").rstrip("/")
    manifest = _with_base(source, ref_path, source_branch, name)
    txn = _clone_transaction(source.version, source_branch, ref_path, name)
    written, size = write_first_version(target, manifest, txn)
    mapping = list(read_branch(root, source_branch).identifier) if source_branch is not None else []
    mapping.append((source.version, uuid.uuid4().hex))
    try:
        root.put_if_absent(key, _render_branch(source_branch, source.version, mapping, size))
    except ObjectAlreadyExistsError:
        raise InvalidInputError(f"{root.uri('')}: branch {name!r} already exists") from None
    return ds._on_branch(name, written)


def delete_branch(ds: LanceDataset, name: str) -> None:
    """Delete branch ``name``: its file and its own tree (nested branches are kept).

    Raises:
        InvalidInputError: if there is no such branch or ``ds`` is checked out on it.
    """
    root = ds._root_store
    read_branch(root, name)
    if ds._branch == name:
        raise InvalidInputError(f"{root.uri('')}: cannot delete branch {name!r} while it is checked out")
    prefix = _tags.branch_dir(name)
    for sub in _DATASET_DIRS:
        for info in list(root.list(f"{prefix}/{sub}")):
            root.delete(info.key)
    root.delete(branch_file_key(name))


def shallow_clone(ds: LanceDataset, target_uri: str, reference: Reference = None, *,
                  storage_options: Mapping[str, str] | None = None) -> tuple[ObjectStore, Manifest]:
    """Write a new dataset at ``target_uri`` whose first version is ``reference`` of ``ds``.

    Only a manifest and a transaction are written; every data file stays in (and is
    read from) the source dataset through a base path.

    Returns:
        The new dataset's store and first manifest (``LanceDataset.shallow_clone`` opens it).

    Raises:
        DatasetAlreadyExistsError: if ``target_uri`` holds a dataset.
    """
    source_branch, source = resolve(ds, reference)
    ref_path = _tags.branch_store(ds._root_store, source_branch).uri("").rstrip("/")
    options = storage_options if storage_options is not None else ds._storage_options
    target = open_store(str(target_uri), options)
    if find_latest(target) is not None:
        raise DatasetAlreadyExistsError(f"{target.uri('')}: a dataset already exists there")
    manifest = _with_base(source, ref_path, source_branch, None)
    txn = _clone_transaction(source.version, source_branch, ref_path, None)
    written, _size = write_first_version(target, manifest, txn)
    return target, written
