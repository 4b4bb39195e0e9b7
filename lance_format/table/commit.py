"""The commit protocol: one function builds a manifest from base + operation, one loop commits it.

``build_manifest`` is pure (base manifest + transaction -> next manifest).
``commit_transaction`` is the only retry loop: check conflicts against every version
committed since the read version, rebuild on the newest version, write the ``.txn``
file, then put-if-absent the manifest. A lost race backs off (slotted, with jitter)
and tries again, a bounded number of times.
"""

from __future__ import annotations

import dataclasses
import operator
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from lance_format.errors import (
    CommitConflictError,
    DatasetAlreadyExistsError,
    DatasetNotFoundError,
    InvalidInputError,
    ObjectAlreadyExistsError,
    VersionNotFoundError,
)
from lance_format.schema import LanceSchema
from lance_format.storage import ObjectStore
from lance_format.table import conflicts
from lance_format.table.fragment import FragmentMetadata, check_data_path
from lance_format.table.manifest import (
    FLAG_STABLE_ROW_IDS,
    OUR_WRITER_VERSION,
    Manifest,
    check_feature_flags,
    compute_feature_flags,
    encode_manifest_pb,
    kept_prefix,
    manifest_from_pb,
)
from lance_format.table.naming import TRANSACTIONS_DIR, NamingScheme, manifest_key
from lance_format.table.rebase import DeletionRebase
from lance_format.table.transaction import (
    LanceOperation,
    Transaction,
    data_files_of,
    encode_transaction,
)
from lance_format.table.versions import (
    find_latest,
    load_manifest,
    load_transaction,
    remember_written,
    write_hint,
)

#: Default data storage version for new datasets: 2.2, pylance 14.0.2's "stable" default.
DEFAULT_DATA_STORAGE_VERSION = "2.2"
DEFAULT_MAX_RETRIES = 20

#: Hook that rewrites our transaction after a concurrent Delete/Update on the same fragments.
DeletionRebaser = Callable[[ObjectStore, Transaction, Manifest, Manifest], Transaction]


def _now_ns() -> int:
    return time.time_ns()


def _resolve_schema(schema: LanceSchema | object, base: Manifest | None) -> LanceSchema:
    if isinstance(schema, LanceSchema):
        return schema
    import pyarrow as pa

    if not isinstance(schema, pa.Schema):
        raise InvalidInputError(f"expected a pyarrow or Lance schema, got {type(schema).__name__}")
    if base is None:
        return LanceSchema.from_arrow(schema)
    # Project/Merge with an Arrow schema: keep the ids of fields that already exist.
    known = {f.name: f for f in base.schema.fields}
    new_fields = [f for f in schema if f.name not in known]
    extra = LanceSchema.from_arrow(pa.schema(new_fields), start_id=base.schema.max_field_id() + 1)
    extra_by_name = {f.name: f for f in extra.fields}
    fields = tuple(known[f.name] if f.name in known else extra_by_name[f.name] for f in schema)
    meta = {k.decode() if isinstance(k, bytes) else k: v for k, v in (schema.metadata or {}).items()}
    return LanceSchema(fields=fields, metadata=meta)


def _format_of(frags: tuple[FragmentMetadata, ...], fallback: str) -> str:
    for frag in frags:
        for df in frag.files:
            major, minor = df.file_version
            if (major, minor) in ((0, 3), (2, 0)):
                return "2.0"
            return f"{major}.{minor}"
    return fallback


def _assign_ids(frags: Sequence[FragmentMetadata], next_id: int, *, keep_nonzero: bool = False
                ) -> tuple[tuple[FragmentMetadata, ...], int]:
    out = []
    for frag in frags:
        if keep_nonzero and frag.id != 0:
            out.append(frag)
            continue
        out.append(frag.with_id(next_id))
        next_id += 1
    return tuple(out), next_id


def _next_fragment_id(base: Manifest | None) -> int:
    if base is None:
        return 0
    if base.max_fragment_id is not None:
        return base.max_fragment_id + 1
    return max((f.id for f in base.fragments), default=-1) + 1


def build_manifest(base: Manifest | None, txn: Transaction, *, version: int,
                   load_version: Callable[[int], Manifest] | None = None,
                   data_storage_version: str | None = None,
                   enable_stable_row_ids: bool = False) -> Manifest:
    """Apply ``txn`` to ``base`` (``None`` for a new dataset) and return the next manifest.

    Args:
        base: The newest committed manifest, or ``None`` when creating the dataset.
        txn: The transaction to apply.
        version: Version number of the new manifest.
        load_version: Loads an old manifest (needed by Restore).
        data_storage_version: ``data_format`` for a new/overwritten dataset whose
            fragments do not reveal it.
        enable_stable_row_ids: Turn on stable row ids (only when creating the dataset).

    Raises:
        DatasetNotFoundError: for operations other than Overwrite on a missing dataset.
        InvalidInputError: for an operation that does not fit the base.
    """
    op = txn.operation
    L = LanceOperation
    for df in data_files_of(op):
        check_data_path(df.path, f"transaction {txn.uuid}")
    if base is None and not isinstance(op, L.Overwrite):
        raise DatasetNotFoundError(f"cannot apply {op.kind} to a dataset that does not exist yet")
    next_id = _next_fragment_id(base)
    high_water = base.max_fragment_id if base is not None else None

    if isinstance(op, L.Restore):
        if load_version is None:
            raise InvalidInputError("Restore needs access to old versions")
        assert base is not None
        old = load_version(op.version)
        hw = max((x for x in (base.max_fragment_id, old.max_fragment_id) if x is not None), default=None)
        # Keep the high-water marks: ids handed out after ``old`` must never be reused.
        new = old.replace(max_fragment_id=hw, next_row_id=max(base.next_row_id, old.next_row_id))
        return _finish(new, base, txn, version)

    assert base is not None or isinstance(op, L.Overwrite)
    schema = base.schema if base is not None else None
    frags = base.fragments if base is not None else ()
    data_format = base.data_format if base is not None else None
    config = dict(base.config) if base is not None else {}
    indices = base.indices if base is not None else ()

    if isinstance(op, L.Append):
        new_frags, next_id = _assign_ids(op.fragments, next_id)
        frags = frags + new_frags
    elif isinstance(op, L.Overwrite):
        schema = _resolve_schema(op.new_schema, None)
        frags, next_id = _assign_ids(op.fragments, next_id)
        data_format = ("lance", _format_of(frags, data_storage_version or DEFAULT_DATA_STORAGE_VERSION))
        config.update(op.config_upsert_values or {})
        indices = ()
    elif isinstance(op, L.Delete):
        updated = {f.id: f for f in op.updated_fragments}
        gone = set(op.deleted_fragment_ids)
        frags = tuple(updated.get(f.id, f) for f in frags if f.id not in gone)
    elif isinstance(op, L.Update):
        updated = {f.id: f for f in op.updated_fragments}
        gone = set(op.removed_fragment_ids)
        new_frags, next_id = _assign_ids(op.new_fragments, next_id)
        frags = tuple(updated.get(f.id, f) for f in frags if f.id not in gone) + new_frags
    elif isinstance(op, L.Merge):
        schema = _resolve_schema(op.schema, base)
        frags = tuple(op.fragments)  # existing fragments with their ids (0 is a real id here)
    elif isinstance(op, L.Project):
        schema = _resolve_schema(op.schema, base)
    elif isinstance(op, L.ReserveFragments):
        if op.num_fragments < 0:
            raise InvalidInputError("ReserveFragments needs a non-negative count")
        next_id += op.num_fragments
        high_water = next_id - 1 if op.num_fragments else high_water
    elif isinstance(op, L.Rewrite):
        old_ids = {f.id for g in op.groups for f in g.old_fragments}
        rewritten: tuple[FragmentMetadata, ...] = ()
        for g in op.groups:
            assigned, next_id = _assign_ids(g.new_fragments, next_id, keep_nonzero=True)
            rewritten += assigned
        missing = old_ids - {f.id for f in frags}
        if missing:
            raise CommitConflictError(f"rewrite of fragments {sorted(missing)} that no longer exist")
        frags = tuple(f for f in frags if f.id not in old_ids) + rewritten
        swap = {r.old_id: r for r in op.rewritten_indices}
        indices = tuple(_swap_index(i, swap) for i in indices)
    elif isinstance(op, L.CreateIndex):
        from lance_format.table.transaction import index_to_pb

        removed = {i.uuid for i in op.removed_indices}
        kept = tuple(i for i in indices if _uuid_of(i) not in removed)
        indices = kept + tuple(index_to_pb(i) for i in op.new_indices)
    else:
        raise InvalidInputError(f"this library cannot commit a {op.kind} operation")

    assert schema is not None and data_format is not None
    frags = tuple(sorted(frags, key=operator.attrgetter("id")))
    ids = [f.id for f in frags]
    if len(set(ids)) != len(ids):
        raise InvalidInputError(f"duplicate fragment ids in the new version: {ids}")
    top = max([x for x in (high_water, max(ids, default=None), next_id - 1 if next_id else None)
               if x is not None], default=None)
    if top is not None and top < 0:
        top = None
    stable = (base.uses_stable_row_ids if base is not None else enable_stable_row_ids)
    next_row_id = base.next_row_id if base is not None else 0
    if stable:
        frags, next_row_id = _assign_row_ids(frags, next_row_id, version)
    new = Manifest(
        schema=schema,
        fragments=frags,
        version=version,
        max_fragment_id=top,
        data_format=data_format,
        config=config,
        table_metadata=dict(base.table_metadata) if base is not None else {},
        indices=indices,
        next_row_id=next_row_id,
        raw=base.raw if base is not None else None,
        raw_fragments=base.raw_fragments if base is not None else None,
        reader_feature_flags=FLAG_STABLE_ROW_IDS if stable else 0,
    )
    return _finish(new, base, txn, version)


def _assign_row_ids(frags: tuple[FragmentMetadata, ...], next_row_id: int, version: int
                    ) -> tuple[tuple[FragmentMetadata, ...], int]:
    # Fragments new in this commit get the next contiguous range of stable row ids
    # (done here, at build time, so a retried commit re-assigns them; FACTS g).
    from lance_format.table.rowids import encode_row_id_range, encode_uniform_versions

    out = []
    for frag in frags:
        if frag.row_id_meta is None:
            end = next_row_id + frag.physical_rows
            versions = encode_uniform_versions(frag.physical_rows, version)
            frag = dataclasses.replace(frag, row_id_meta=encode_row_id_range(next_row_id, end),
                                       created_at_version_meta=versions, last_updated_at_version_meta=versions)
            next_row_id = end
        out.append(frag)
    return tuple(out), next_row_id


def _uuid_of(index_pb: Any) -> str:
    import uuid as _uuid

    raw: bytes = index_pb.uuid.uuid
    return str(_uuid.UUID(bytes=raw)) if len(raw) == 16 else raw.hex()


def _swap_index(index_pb: Any, swap: dict[str, LanceOperation.RewrittenIndex]) -> Any:
    import uuid as _uuid

    r = swap.get(_uuid_of(index_pb))
    if r is None:
        return index_pb
    new = type(index_pb)()
    new.CopyFrom(index_pb)
    new.uuid.uuid = _uuid.UUID(r.new_id).bytes
    if r.new_details_type_url:
        new.index_details.type_url = r.new_details_type_url
        new.index_details.value = r.new_details_value
    new.index_version = r.new_index_version
    return new


def _finish(new: Manifest, base: Manifest | None, txn: Transaction, version: int) -> Manifest:
    # The flags depend only on fields this final replace leaves alone.
    base_flags = base.reader_feature_flags if base is not None else 0
    reader, writer = compute_feature_flags(new, base_flags)
    return new.replace(version=version, timestamp_ns=_now_ns(), writer_version=OUR_WRITER_VERSION,
                       transaction_file=txn.file_name, tag="", transaction_bytes=None,
                       reader_feature_flags=reader, writer_feature_flags=writer)


def _backoff(attempt: int, unit: float) -> None:
    slots = 1 << min(attempt + 2, 6)
    time.sleep(random.randrange(slots) * unit)


def commit_transaction(
    store: ObjectStore,
    txn: Transaction,
    *,
    enable_v2_manifest_paths: bool = True,
    max_retries: int = DEFAULT_MAX_RETRIES,
    data_storage_version: str | None = None,
    must_not_exist: bool = False,
    rebase_deletions: DeletionRebaser | None = None,
    enable_stable_row_ids: bool = False,
    base: Manifest | None = None,
    observed: tuple[int, NamingScheme] | None = None,
) -> Manifest:
    """Commit ``txn`` as the next version of the dataset in ``store``.

    Args:
        store: Store rooted at the dataset.
        txn: The transaction (its ``read_version`` is the version it was built on;
            0 for a new dataset or a blind overwrite).
        enable_v2_manifest_paths: Naming scheme for a *new* dataset (existing ones keep theirs).
        max_retries: How many lost races to retry before giving up.
        data_storage_version: ``data_format`` for a new dataset without fragments.
        must_not_exist: Fail with :class:`DatasetAlreadyExistsError` if any version exists.
        enable_stable_row_ids: Use stable row ids (only when creating the dataset).
        base: The manifest of ``txn.read_version`` if the caller already has it.
        rebase_deletions: Merges deletion vectors when a concurrent Delete/Update touched
            the same fragments; without it such a race is a retryable conflict.
        observed: ``(latest version, naming scheme)`` as the caller just saw them. The first
            attempt trusts it instead of looking again; put-if-absent of the next version
            is the arbiter, so a stale value only costs a retry (which looks properly).

    Returns:
        The committed manifest.

    Raises:
        CommitConflictError: if a concurrent commit conflicts, or retries run out. The deletion
            files rebases wrote for this commit are removed first.
        DatasetAlreadyExistsError: see ``must_not_exist``.
    """
    read_version = txn.read_version
    base_read = None
    if read_version > 0:
        base_read = base if base is not None and base.version == read_version else \
            load_manifest(store, read_version)
        check_feature_flags(base_read, store.uri(""), for_write=True)
    base_files: dict[int, Any] | None = None  # built only if there is something to check against
    checked = read_version
    blind = read_version == 0 or isinstance(txn.operation, LanceOperation.Restore)
    attempt = 0
    started = time.monotonic()
    unit = 0.0
    trusted = observed if observed is not None and observed[0] >= 1 else None
    scheme: NamingScheme | None
    try:
        while True:
            if trusted is not None:
                (latest, scheme), trusted = trusted, None
            else:
                found = find_latest(store)
                latest, scheme = (found[0], found[2]) if found is not None else (0, None)
            if must_not_exist and latest:
                raise DatasetAlreadyExistsError(f"{store.uri('')}: dataset already exists (version {latest})")
            if blind:
                checked = max(checked, latest)
            seen: Manifest | None = None  # the newest concurrent manifest, read for the conflict check
            for v in range(checked + 1, latest + 1):
                try:
                    theirs_manifest = load_manifest(store, v)
                except VersionNotFoundError:
                    continue  # cleaned up meanwhile
                seen = theirs_manifest
                theirs = load_transaction(store, theirs_manifest)
                if theirs is None:
                    raise CommitConflictError(f"{store.uri('')}: version {v} has no transaction; "
                                              f"cannot check {txn.operation.kind} for conflicts")
                if base_files is None:
                    base_files = {f.id: f.files for f in base_read.fragments} if base_read is not None else {}
                outcome = conflicts.check(txn, theirs, base_files)
                if outcome is conflicts.Outcome.REBASE_DELETIONS:
                    if rebase_deletions is None and base_read is not None:
                        rebase_deletions = DeletionRebase(base_read)
                    if rebase_deletions is None:
                        outcome = conflicts.Outcome.RETRYABLE
                    else:
                        assert base_read is not None
                        txn = rebase_deletions(store, txn, theirs_manifest, base_read)
                        continue
                conflicts.raise_for(outcome, txn, theirs, v)
            checked = latest
            if scheme is None:
                scheme = NamingScheme.V2 if enable_v2_manifest_paths else NamingScheme.V1
            if latest and base_read is not None and latest == base_read.version:
                current: Manifest | None = base_read
            elif seen is not None and seen.version == latest:
                # Already read and decoded for the conflict check: only the write check is left.
                check_feature_flags(seen, store.uri(manifest_key(latest, scheme)), for_write=True)
                current = seen
            else:
                current = load_manifest(store, latest, for_write=True) if latest else None
            manifest = build_manifest(current, txn, version=latest + 1,
                                      load_version=lambda v: load_manifest(store, v),
                                      data_storage_version=data_storage_version,
                                      enable_stable_row_ids=enable_stable_row_ids)
            txn_bytes = encode_transaction(txn)
            store.write(f"{TRANSACTIONS_DIR}/{txn.file_name}", txn_bytes)
            data, written = encode_manifest_pb(manifest, txn_bytes)
            key = manifest_key(latest + 1, scheme)
            try:
                store.put_if_absent(key, data)
            except ObjectAlreadyExistsError:
                attempt += 1
                if attempt > max_retries:
                    raise CommitConflictError(
                        f"{store.uri('')}: gave up committing {txn.operation.kind} after {max_retries} "
                        "retries (too many concurrent writers)") from None
                if not unit:
                    unit = min(max((time.monotonic() - started) * 1.1, 0.002), 0.05)
                _backoff(attempt, unit)
                continue
            write_hint(store, latest + 1)
            # What reading the file back gives, so the next append on this dataset need not
            # decode it again. Fragments whose stored bytes were carried over from the base
            # are decoded models already (``raw_fragments``); only re-encoded ones are decoded.
            target = sorted(manifest.fragments, key=operator.attrgetter("id"))
            kept = tuple(target[:kept_prefix(manifest, target)])
            decoded = manifest_from_pb(written, store.uri(key), indices=manifest.indices,
                                       transaction_bytes=txn_bytes, known_fragments=kept)
            remember_written(store, key, data, decoded)
            if isinstance(rebase_deletions, DeletionRebase):
                rebase_deletions.discard_written(store, manifest)  # vectors superseded by later rebases
            return manifest.replace(raw=written, transaction_bytes=txn_bytes, raw_fragments=decoded.fragments)
    except CommitConflictError:
        # Giving up: the deletion vectors our rebases wrote are referenced by no manifest.
        if isinstance(rebase_deletions, DeletionRebase):
            rebase_deletions.discard_written(store, None)
        raise
