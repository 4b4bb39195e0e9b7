"""Tags: named references to a dataset version (``_refs/tags/{name}.json``).

pylance 14.0.2 writes pretty-printed JSON (2-space indent, camelCase keys, no
trailing newline)::

    {
      "branch": null,
      "version": 5,
      "createdAt": "2026-11-21T20:40:29.714024386Z",
      "updatedAt": "2026-11-21T20:40:29.714024386Z",
      "manifestSize": 776,
      "metadata": {}
    }

Older files carry only ``branch``, ``version`` and ``manifestSize``; both are
read. ``manifestSize`` must be the exact size of the tagged manifest, which
lance uses as the known object size on checkout. Tags always live at the root
dataset, whichever branch they point into.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lance_format.errors import (
    CorruptFileError,
    InvalidInputError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    TagError,
    TagNotFoundError,
)
from lance_format.storage.base import ObjectStore
from lance_format.table.naming import TAGS_DIR

_U64_MAX = 2**64 - 1
#: Longest name a local file system stores (NAME_MAX); a tag is the file ``{name}.json`` and a
#: branch segment a directory, so longer names would fail half-way with ENAMETOOLONG.
_NAME_MAX = 255
_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|z|[+-]\d{2}:\d{2})$"
)


@dataclass(frozen=True)
class Tag:
    """One tag.

    Attributes:
        name: Tag name (also the file name).
        version: Tagged version number.
        manifest_size: Size in bytes of that version's manifest file.
        branch: Branch the version belongs to; ``None`` is the main branch.
        created_at: Creation time (UTC); ``None`` for old-style files.
        updated_at: Last update time (UTC); ``None`` for old-style files.
        metadata: Free-form string metadata.
    """

    name: str
    version: int
    manifest_size: int
    branch: str | None = None
    created_at: dt.datetime | None = None
    updated_at: dt.datetime | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)


def validate_tag_name(name: str) -> None:
    """Check ``name`` against lance's tag rules (``check_valid_tag``).

    Raises:
        TagError: if the name is empty, has characters other than
            alphanumerics, ``.``, ``-``, ``_``, starts or ends with ``.``,
            ends with ``.lock`` or contains ``..``.
    """
    if not isinstance(name, str):
        raise TagError(f"invalid tag name {name!r}: must be a string, got {type(name).__name__}")
    if not name:
        raise TagError(f"invalid tag name {name!r}: cannot be empty")
    if len(name.encode("utf-8", "surrogatepass")) > _NAME_MAX - len(".json"):
        raise TagError(f"invalid tag name {name[:40]!r}... ({len(name)} characters): longer than "
                       f"{_NAME_MAX - len('.json')} bytes")
    if not all(c.isalnum() or c in ".-_" for c in name):
        raise TagError(f"invalid tag name {name!r}: only alphanumerics, '.', '-' and '_' are allowed")
    if name.startswith("."):
        raise TagError(f"invalid tag name {name!r}: cannot begin with a dot")
    if name.endswith("."):
        raise TagError(f"invalid tag name {name!r}: cannot end with a dot")
    if name.endswith(".lock"):
        raise TagError(f"invalid tag name {name!r}: cannot end with .lock")
    if ".." in name:
        raise TagError(f"invalid tag name {name!r}: cannot contain two consecutive dots")


def validate_branch_name(name: str) -> None:
    """Check ``name`` against lance's branch rules (``lance/docs/table/branch_tag.md``).

    Branch names become directories (``tree/{name}/``), so anything that could leave
    that directory (``..``, an absolute path, a backslash) is refused.

    Raises:
        TagError: naming the rule the name breaks.
    """
    if not isinstance(name, str):
        raise TagError(f"invalid branch name {name!r}: must be a string, got {type(name).__name__}")
    if not name:
        raise TagError(f"invalid branch name {name!r}: cannot be empty")
    if name.startswith("/") or name.endswith("/"):
        raise TagError(f"invalid branch name {name!r}: cannot start or end with '/'")
    if "//" in name or ".." in name or "\\" in name:
        raise TagError(f"invalid branch name {name!r}: cannot contain '//', '..' or a backslash")
    for segment in name.split("/"):
        if len(segment.encode("utf-8", "surrogatepass")) > _NAME_MAX:
            raise TagError(f"invalid branch name {name[:40]!r}...: a segment is longer than {_NAME_MAX} bytes")
        if not all(c.isalnum() or c in ".-_" for c in segment):
            raise TagError(f"invalid branch name {name!r}: only alphanumerics, '.', '-', '_' and '/' are allowed")
    if name.endswith(".lock"):
        raise TagError(f"invalid branch name {name!r}: cannot end with .lock")
    if name == "main":
        raise TagError("invalid branch name 'main': reserved for the main branch")


def branch_dir(name: str) -> str:
    """Directory of branch ``name`` relative to the root dataset (``tree/{name}``)."""
    validate_branch_name(name)
    return f"tree/{name}"


def branch_store(root: ObjectStore, branch: str | None) -> ObjectStore:
    """The store of ``branch``'s own dataset under ``root`` (``root`` itself for main, ``None``)."""
    return root if branch is None else root.child(branch_dir(branch))


def tag_key(name: str) -> str:
    """Return the key of tag ``name``'s file relative to the root dataset."""
    validate_tag_name(name)
    return f"{TAGS_DIR}/{name}.json"


def format_timestamp_ns(ns: int) -> str:
    """Format nanoseconds since the epoch as RFC 3339 UTC with 9 fractional digits and ``Z``."""
    secs, frac = divmod(ns, 1_000_000_000)
    base = dt.datetime.fromtimestamp(secs, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{frac:09d}Z"


def parse_timestamp(text: str, where: str) -> dt.datetime:
    """Parse an RFC 3339 timestamp (nanoseconds are truncated to microseconds).

    Raises:
        CorruptFileError: naming ``where`` if the text is not RFC 3339.
    """
    match = _RFC3339.match(text) if isinstance(text, str) else None
    if match is None:
        raise CorruptFileError(f"{where}: invalid RFC 3339 timestamp {text!r}")
    year, month, day, hour, minute, second, frac, zone = match.groups()
    micros = int((frac or "0").ljust(9, "0")[:6])
    if zone in ("Z", "z"):
        tz = dt.UTC
    else:
        sign = 1 if zone[0] == "+" else -1
        tz = dt.timezone(sign * dt.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    try:
        value = dt.datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), micros, tzinfo=tz
        )
    except ValueError as exc:
        raise CorruptFileError(f"{where}: invalid timestamp {text!r}: {exc}") from exc
    return value.astimezone(dt.UTC)


def _u64(value: Any, what: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _U64_MAX:
        raise CorruptFileError(f"{where}: {what} must be an unsigned 64-bit integer, got {value!r}")
    return value


def parse_tag(name: str, data: bytes, where: str) -> Tag:
    """Parse tag JSON (new or old style); ``where`` names the file in errors.

    Raises:
        CorruptFileError: on invalid JSON or missing / mistyped fields.
    """
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise CorruptFileError(f"{where}: tag file is not valid JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise CorruptFileError(f"{where}: tag file must hold a JSON object")
    for required in ("version", "manifestSize"):
        if required not in obj:
            raise CorruptFileError(f"{where}: tag file lacks {required!r}")
    branch = obj.get("branch")
    if branch is not None and not isinstance(branch, str):
        raise CorruptFileError(f"{where}: 'branch' must be a string or null, got {branch!r}")
    if branch is not None:
        try:
            validate_branch_name(branch)
        except TagError as exc:
            raise CorruptFileError(f"{where}: {exc}") from exc
    metadata = obj.get("metadata") or {}
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise CorruptFileError(f"{where}: 'metadata' must map strings to strings")
    created = obj.get("createdAt")
    updated = obj.get("updatedAt")
    return Tag(
        name=name,
        version=_u64(obj["version"], "'version'", where),
        manifest_size=_u64(obj["manifestSize"], "'manifestSize'", where),
        branch=branch,
        created_at=None if created is None else parse_timestamp(created, f"{where} createdAt"),
        updated_at=None if updated is None else parse_timestamp(updated, f"{where} updatedAt"),
        metadata=dict(metadata),
    )


def _render(
    version: int,
    manifest_size: int,
    branch: str | None,
    created: str,
    updated: str,
    metadata: Mapping[str, str],
) -> bytes:
    body = {
        "branch": branch,
        "version": version,
        "createdAt": created,
        "updatedAt": updated,
        "manifestSize": manifest_size,
        "metadata": dict(metadata),
    }
    return json.dumps(body, indent=2, ensure_ascii=False).encode("utf-8")


def _check_args(name: str, version: int, manifest_size: int, branch: str | None) -> None:
    validate_tag_name(name)
    if isinstance(version, bool) or not isinstance(version, int) or not 0 < version <= _U64_MAX:
        raise TagError(f"tag {name!r}: version must be a positive integer, got {version!r}")
    if isinstance(manifest_size, bool) or not isinstance(manifest_size, int) or manifest_size <= 0:
        raise TagError(f"tag {name!r}: manifest_size must be a positive integer, got {manifest_size!r}")
    if branch is not None:
        validate_branch_name(branch)


def write_tag(
    store: ObjectStore,
    name: str,
    version: int,
    manifest_size: int,
    *,
    branch: str | None = None,
    metadata: Mapping[str, str] | None = None,
    must_not_exist: bool = True,
) -> Tag:
    """Create tag ``name`` pointing at ``version`` (of ``branch``).

    Args:
        store: Store rooted at the root dataset.
        name: Tag name (see :func:`validate_tag_name`).
        version: Version to tag; the caller checks that it exists.
        manifest_size: Exact byte size of that version's manifest.
        branch: Branch of the version; ``None`` for main.
        metadata: Optional string metadata.
        must_not_exist: Create atomically and fail if the tag exists; if
            False, replace any existing tag.

    Returns:
        The written :class:`Tag`.

    Raises:
        TagError: if the name or arguments are invalid, or the tag exists.
    """
    _check_args(name, version, manifest_size, branch)
    now = format_timestamp_ns(time.time_ns())
    data = _render(version, manifest_size, branch, now, now, metadata or {})
    key = tag_key(name)
    if must_not_exist:
        try:
            store.put_if_absent(key, data)
        except ObjectAlreadyExistsError as exc:
            raise TagError(f"tag {name!r} already exists ({store.uri(key)})") from exc
    else:
        store.write(key, data)
    return parse_tag(name, data, store.uri(key))


def update_tag(
    store: ObjectStore,
    name: str,
    version: int,
    manifest_size: int,
    *,
    branch: str | None = None,
) -> Tag:
    """Point existing tag ``name`` at another version, keeping ``createdAt`` and metadata.

    Raises:
        TagNotFoundError: if the tag does not exist.
        TagError: if the arguments are invalid.
    """
    _check_args(name, version, manifest_size, branch)
    key = tag_key(name)
    raw = _read_raw(store, name)
    old = parse_tag(name, raw, store.uri(key))
    now = format_timestamp_ns(time.time_ns())
    # Keep createdAt verbatim (our datetime only holds microseconds).
    created_text = json.loads(raw).get("createdAt") if old.created_at is not None else None
    created = created_text if isinstance(created_text, str) else now
    data = _render(version, manifest_size, branch, created, now, old.metadata)
    store.write(key, data)
    return parse_tag(name, data, store.uri(key))


def _read_raw(store: ObjectStore, name: str) -> bytes:
    key = tag_key(name)
    try:
        return store.read(key)
    except ObjectNotFoundError as exc:
        raise TagNotFoundError(f"tag {name!r} does not exist ({store.uri(key)})") from exc


def read_tag(store: ObjectStore, name: str) -> Tag:
    """Read tag ``name``.

    Raises:
        TagNotFoundError: if it does not exist.
        CorruptFileError: if its file is malformed.
    """
    return parse_tag(name, _read_raw(store, name), store.uri(tag_key(name)))


def list_tags(store: ObjectStore) -> dict[str, Tag]:
    """Return every tag of the dataset by name (sorted by name).

    Files that are not ``{valid name}.json`` are ignored.
    """
    tags: dict[str, Tag] = {}
    for info in store.list(TAGS_DIR):
        rest = info.key[len(TAGS_DIR) + 1 :]
        if "/" in rest or not rest.endswith(".json"):
            continue
        name = rest[: -len(".json")]
        try:
            validate_tag_name(name)
            tags[name] = read_tag(store, name)
        except (TagError, TagNotFoundError):
            continue  # not a tag file, or deleted while listing
    return dict(sorted(tags.items()))


#: What a tag may point at, as pylance's ``Tags.create(tag, reference)``: ``None`` (the checked-out
#: version), a version number, another tag's name, or ``(branch, version)``.
TagReference = int | str | tuple[str | None, int | None] | None


def reference_arg(reference: Any, version: Any = None) -> TagReference:
    """The one reference of ``Tags.create/update(tag, reference)`` or of our older ``version=`` keyword.

    Raises:
        InvalidInputError: both are given, or the value is none of the accepted kinds (a
            ``ValueError`` too, as pylance's).
    """
    if reference is not None and version is not None:
        raise InvalidInputError(f"tag reference given twice ({reference!r:.40} and version={version!r:.40}); "
                                "pass one")
    ref = reference if reference is not None else version
    if ref is None or isinstance(ref, (int, str, tuple)):
        return ref  # a tuple's contents are checked by checkout_version
    raise InvalidInputError(f"tag reference must be an int, a str or a (branch, version) tuple, got "
                            f"{type(ref).__name__} {ref!r:.40}")


def delete_tag(store: ObjectStore, name: str) -> None:
    """Delete tag ``name``.

    Raises:
        TagNotFoundError: if it does not exist.
    """
    key = tag_key(name)
    if not store.exists(key):
        raise TagNotFoundError(f"tag {name!r} does not exist ({store.uri(key)})")
    store.delete(key)


__all__ = [
    "TAGS_DIR",
    "Tag",
    "TagReference",
    "branch_dir",
    "delete_tag",
    "format_timestamp_ns",
    "list_tags",
    "parse_tag",
    "parse_timestamp",
    "read_tag",
    "reference_arg",
    "tag_key",
    "update_tag",
    "validate_branch_name",
    "validate_tag_name",
    "write_tag",
]
