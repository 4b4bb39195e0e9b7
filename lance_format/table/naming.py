"""Every object key of a dataset is built here: manifests, transactions, data, deletion and index files.

Keys are relative to the dataset root (or to a base path for files with a ``base_id``).
Two manifest naming schemes exist (``rust/lance-table/src/io/commit.rs`` in lance):
V1 names a version ``{n}.manifest``; V2 names it ``{u64::MAX - n:020}.manifest`` so a
lexical listing yields the newest version first. A dataset never mixes the two.
"""

from __future__ import annotations

import enum
import uuid as _uuid

from lance_format.errors import CorruptFileError

VERSIONS_DIR = "_versions"
TRANSACTIONS_DIR = "_transactions"
DATA_DIR = "data"
DELETIONS_DIR = "_deletions"
INDICES_DIR = "_indices"
#: Tag and branch reference files (``{name}.json``; their keys are built, with name
#: validation, by ``table/tags.py`` and ``evolution/branches.py``).
TAGS_DIR = "_refs/tags"
BRANCHES_DIR = "_refs/branches"
HINT_KEY = f"{VERSIONS_DIR}/latest_version_hint.json"

_U64_MAX = (1 << 64) - 1
#: A detached version (``LanceDataset.commit(..., detached=True)``) has this bit set; its manifest
#: is ``_versions/d{n}.manifest``, outside the main lineage (``rust/lance/src/dataset/write/commit.rs``).
DETACHED_VERSION_MASK = 1 << 63


def detached_manifest_key(version: int) -> str:
    """The store key of detached version ``version``'s manifest."""
    return f"{VERSIONS_DIR}/d{version}.manifest"
_V2_NAME_LEN = 20 + len(".manifest")


class NamingScheme(enum.Enum):
    """How manifest files are named."""

    V1 = "v1"
    V2 = "v2"


def manifest_key(version: int, scheme: NamingScheme) -> str:
    """Return the store key of ``version``'s manifest under ``scheme``."""
    if version < 0 or version > _U64_MAX:
        raise ValueError(f"manifest version {version} is out of range")
    if scheme is NamingScheme.V2:
        return f"{VERSIONS_DIR}/{_U64_MAX - version:020d}.manifest"
    return f"{VERSIONS_DIR}/{version}.manifest"


def parse_manifest_name(name: str) -> tuple[int, NamingScheme] | None:
    """Parse a file name inside ``_versions/``.

    Returns:
        ``(version, scheme)``, or ``None`` for names that are not attached
        manifests (hint file, staging files, detached ``d…`` manifests).
    """
    if not name.endswith(".manifest") or name.startswith("d"):
        return None
    stem = name[: -len(".manifest")]
    if not stem.isdigit() or not stem.isascii():
        return None
    value = int(stem)
    if len(name) == _V2_NAME_LEN:
        if value > _U64_MAX:
            return None
        return _U64_MAX - value, NamingScheme.V2
    return value, NamingScheme.V1


def detect_scheme(names: list[str]) -> NamingScheme | None:
    """Return the naming scheme used by manifest ``names`` (``None`` if there are none).

    Raises:
        CorruptFileError: if both schemes occur (lance refuses such a directory).
    """
    schemes = {parsed[1] for n in names if (parsed := parse_manifest_name(n)) is not None}
    if len(schemes) > 1:
        raise CorruptFileError(f"{VERSIONS_DIR}/ mixes V1 and V2 manifest names")
    return next(iter(schemes), None)


def new_data_file_name() -> str:
    """Return a fresh data-file name relative to ``data/`` (as ``rust/lance/src/dataset/write.rs`` names them).

    The first 3 bytes of a random UUID become 24 ``0``/``1`` characters (good
    key-prefix entropy for S3 partitioning), the other 13 bytes 26 hex digits.
    """
    raw = _uuid.uuid4().bytes
    bits = "".join(f"{b:08b}" for b in raw[:3])
    return f"{bits}{raw[3:].hex()}.lance"


def data_file_key(path: str) -> str:
    """Return the store key of a data file whose manifest path (relative to ``data/``) is ``path``."""
    return f"{DATA_DIR}/{path}"


def transaction_file_name(read_version: int, txn_uuid: str) -> str:
    """Return the ``.txn`` name (relative to ``_transactions/``) of a transaction."""
    return f"{read_version}-{txn_uuid}.txn"


def transaction_key(file_name: str) -> str:
    """Return the store key of the ``.txn`` file named ``file_name`` (a manifest's ``transaction_file``)."""
    return f"{TRANSACTIONS_DIR}/{file_name}"


#: File extension of each deletion file kind (``rust/lance-table/src/io/deletion.rs`` in lance).
DELETION_EXTENSIONS = {"array": "arrow", "bitmap": "bin"}


def deletion_file_key(fragment_id: int, read_version: int, file_id: int, file_type: str) -> str:
    """Return ``_deletions/{fragment_id}-{read_version}-{file_id}.{arrow|bin}``.

    Raises:
        ValueError: for a kind other than ``"array"`` or ``"bitmap"``.
    """
    ext = DELETION_EXTENSIONS.get(file_type)
    if ext is None:
        raise ValueError(f"unknown deletion file type {file_type!r}")
    return f"{DELETIONS_DIR}/{fragment_id}-{read_version}-{file_id}.{ext}"


def index_dir(index_uuid: str) -> str:
    """Return the directory key of an index segment: ``_indices/{uuid}``."""
    return f"{INDICES_DIR}/{index_uuid}"


def index_file_key(index_uuid: str, file_name: str) -> str:
    """Return the store key of one file of an index segment: ``_indices/{uuid}/{file_name}``."""
    return f"{INDICES_DIR}/{index_uuid}/{file_name}"
