"""External manifest stores: commit arbitration for object stores without an atomic create.

Lance commits a version by creating its manifest only if no other writer created it first.
Object stores that cannot do that atomically (plain fsspec back ends, S3 implementations
without conditional writes) need a key-value store with a put-if-not-exists to arbitrate,
as described in lance's ``docs/src/format/table/transaction.md`` ("External Manifest Store")
and implemented by ``rust/lance-table/src/io/commit/external_manifest.rs``:

1. stage the manifest at ``_versions/{name}-{uuid}`` (``name`` the final file name);
2. put-if-not-exists ``(base_uri, version) -> staged path`` in the store: the commit is
   decided here, a conflict means another writer has the version;
3. copy the staged manifest to its final name, so readers without the store see it;
4. point the entry at the final path and delete the staged copy.

A reader that finds an entry still naming a staged path finishes steps 3 and 4 itself.

Keys follow lance's DynamoDB layout (``rust/lance-table/src/io/commit/dynamodb.rs``):
hash key ``base_uri`` (S), range key ``version`` (N), attributes ``path`` (S), ``committer``
(S) and ``size`` (N). ``base_uri`` and ``path`` are object-store paths without scheme and
bucket (``prefix/ds.lance``, ``prefix/ds.lance/_versions/1.manifest``), as object_store
spells them, so pylance's ``s3+ddb://bucket/prefix/ds.lance?ddbTableName=T`` sees our commits.
"""

from __future__ import annotations

import abc
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lance_format.errors import InvalidInputError, ObjectAlreadyExistsError, StorageError
from lance_format.storage.redact import redact_url

#: What our writers put in the ``committer`` attribute.
COMMITTER = "lance-dagster"


@dataclass(frozen=True)
class ManifestEntry:
    """One committed version as the external store records it.

    Attributes:
        version: The version number.
        path: Object-store path of its manifest: the staged copy until finalised.
        size: Manifest size in bytes, when recorded.
    """

    version: int
    path: str
    size: int | None = None

    @property
    def finalized(self) -> bool:
        """Whether ``path`` names the final manifest (``*.manifest``), not a staged copy."""
        return self.path.endswith(".manifest")


class ExternalManifestStore(abc.ABC):
    """A key-value store with put-if-not-exists that decides which writer gets a version."""

    @abc.abstractmethod
    def get(self, base_uri: str, version: int) -> ManifestEntry | None:
        """The entry of ``version``, ``None`` if the store has none."""

    @abc.abstractmethod
    def get_latest(self, base_uri: str) -> ManifestEntry | None:
        """The entry with the highest version, ``None`` if the dataset has none."""

    @abc.abstractmethod
    def put_if_not_exists(self, base_uri: str, version: int, path: str, size: int) -> None:
        """Record ``version`` unless it exists.

        Raises:
            ObjectAlreadyExistsError: if another writer recorded ``version`` first.
        """

    @abc.abstractmethod
    def put_if_exists(self, base_uri: str, version: int, path: str, size: int) -> None:
        """Point the existing entry of ``version`` at ``path`` (the finalised manifest)."""


class SQLiteManifestStore(ExternalManifestStore):
    """An external store in one SQLite file, for writers on a single host (or a shared disk
    with working POSIX locks). SQLite's primary key makes the insert the arbiter.

    Args:
        path: The database file (created with its table on first use).

    Raises:
        StorageError: if the database cannot be opened or its table created.
    """

    def __init__(self, path: str) -> None:
        self.path = str(path)
        # Errors and the repr name the file without any user:password@ part a URL may have carried.
        self._shown = redact_url(self.path)
        self._local = threading.local()
        try:
            with self._conn() as conn:
                conn.execute("CREATE TABLE IF NOT EXISTS manifests (base_uri TEXT NOT NULL, version INTEGER NOT "
                             "NULL, path TEXT NOT NULL, committer TEXT, size INTEGER, PRIMARY KEY (base_uri, version))")
        except sqlite3.Error as exc:
            raise StorageError(f"{self._shown}: cannot open the external manifest store: {exc}") from exc

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:  # one connection per thread: sqlite3 connections are not thread-safe
            conn = sqlite3.connect(self.path, timeout=30)
            self._local.conn = conn
        return conn

    def _one(self, sql: str, args: tuple[Any, ...]) -> ManifestEntry | None:
        try:
            row = self._conn().execute(sql, args).fetchone()
        except sqlite3.Error as exc:
            raise StorageError(f"{self._shown}: external manifest store read failed: {exc}") from exc
        return None if row is None else ManifestEntry(int(row[0]), str(row[1]), row[2])

    def get(self, base_uri: str, version: int) -> ManifestEntry | None:
        return self._one("SELECT version, path, size FROM manifests WHERE base_uri = ? AND version = ?",
                         (base_uri, version))

    def get_latest(self, base_uri: str) -> ManifestEntry | None:
        return self._one("SELECT version, path, size FROM manifests WHERE base_uri = ? "
                         "ORDER BY version DESC LIMIT 1", (base_uri,))

    def put_if_not_exists(self, base_uri: str, version: int, path: str, size: int) -> None:
        try:
            with self._conn() as conn:
                conn.execute("INSERT INTO manifests VALUES (?, ?, ?, ?, ?)",
                             (base_uri, version, path, COMMITTER, size))
        except sqlite3.IntegrityError as exc:
            raise ObjectAlreadyExistsError(f"{self._shown}: version {version} of {base_uri!r} "
                                           "is already committed") from exc
        except sqlite3.Error as exc:
            raise StorageError(f"{self._shown}: external manifest store write failed: {exc}") from exc

    def put_if_exists(self, base_uri: str, version: int, path: str, size: int) -> None:
        try:
            with self._conn() as conn:
                conn.execute("UPDATE manifests SET path = ?, size = ?, committer = ? "
                             "WHERE base_uri = ? AND version = ?", (path, size, COMMITTER, base_uri, version))
        except sqlite3.Error as exc:
            raise StorageError(f"{self._shown}: external manifest store write failed: {exc}") from exc

    def __repr__(self) -> str:
        return f"SQLiteManifestStore({self._shown!r})"


class DynamoDBManifestStore(ExternalManifestStore):
    """lance's DynamoDB external manifest store (the ``s3+ddb://`` commit handler).

    Args:
        table_name: An existing table with hash key ``base_uri`` (S) and range key ``version`` (N).
        storage_options: Credentials, region and ``dynamodb_endpoint`` / ``aws_endpoint`` (the
            same spellings the S3 store takes; never shown in reprs or errors).
    """

    def __init__(self, table_name: str, storage_options: Mapping[str, str] | None = None) -> None:
        if not table_name:
            raise InvalidInputError("DynamoDB external manifest store needs a table name (ddbTableName)")
        self.table_name = table_name
        self._shown = redact_url(table_name)  # errors and the repr never carry a user:password@ part
        self._opts = dict(storage_options or {})
        self._client_obj: Any = None

    @property
    def _client(self) -> Any:
        if self._client_obj is None:
            import boto3  # the aws extra; only needed when a DynamoDB store is used

            lowered = {k.lower(): v for k, v in self._opts.items()}

            def opt(*names: str) -> str | None:
                return next((str(lowered[n]) for n in names if lowered.get(n)), None)

            self._client_obj = boto3.session.Session(
                aws_access_key_id=opt("aws_access_key_id", "access_key_id"),
                aws_secret_access_key=opt("aws_secret_access_key", "secret_access_key"),
                aws_session_token=opt("aws_session_token", "session_token", "token"),
                region_name=opt("region", "aws_region", "aws_default_region"),
            ).client("dynamodb", endpoint_url=opt("dynamodb_endpoint", "aws_endpoint", "endpoint",
                                                  "endpoint_url", "aws_endpoint_url"))
        return self._client_obj

    def _call(self, action: str, **kwargs: Any) -> Any:
        import botocore.exceptions

        try:
            return getattr(self._client, action)(TableName=self.table_name, **kwargs)
        except botocore.exceptions.ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code == "ConditionalCheckFailedException":
                raise ObjectAlreadyExistsError(f"DynamoDB table {self._shown!r}: condition failed "
                                               f"({action})") from None
            raise StorageError(f"DynamoDB table {self._shown!r}: {action} failed: {code}") from None
        except botocore.exceptions.BotoCoreError as exc:
            raise StorageError(f"DynamoDB table {self._shown!r}: {action} failed: "
                               f"{type(exc).__name__}") from None

    @staticmethod
    def _entry(item: Mapping[str, Any] | None) -> ManifestEntry | None:
        if not item:
            return None
        try:
            size = item.get("size", {}).get("N")
            return ManifestEntry(int(item["version"]["N"]), str(item["path"]["S"]),
                                 int(size) if size is not None else None)
        except (KeyError, TypeError, ValueError) as exc:
            raise StorageError(f"DynamoDB entry is malformed: missing or mistyped {exc}") from None

    def get(self, base_uri: str, version: int) -> ManifestEntry | None:
        out = self._call("get_item", Key={"base_uri": {"S": base_uri}, "version": {"N": str(version)}},
                         ConsistentRead=True)
        return self._entry(out.get("Item"))

    def get_latest(self, base_uri: str) -> ManifestEntry | None:
        out = self._call("query", KeyConditionExpression="base_uri = :b",
                         ExpressionAttributeValues={":b": {"S": base_uri}},
                         ScanIndexForward=False, Limit=1, ConsistentRead=True)
        items = out.get("Items") or []
        return self._entry(items[0]) if items else None

    def _item(self, base_uri: str, version: int, path: str, size: int) -> dict[str, Any]:
        return {"base_uri": {"S": base_uri}, "version": {"N": str(version)}, "path": {"S": path},
                "committer": {"S": COMMITTER}, "size": {"N": str(size)}}

    def put_if_not_exists(self, base_uri: str, version: int, path: str, size: int) -> None:
        self._call("put_item", Item=self._item(base_uri, version, path, size),
                   ConditionExpression="attribute_not_exists(base_uri) AND attribute_not_exists(version)")

    def put_if_exists(self, base_uri: str, version: int, path: str, size: int) -> None:
        self._call("put_item", Item=self._item(base_uri, version, path, size),
                   ConditionExpression="attribute_exists(base_uri) AND attribute_exists(version)")

    def __repr__(self) -> str:  # no credentials
        return f"DynamoDBManifestStore(table_name={self._shown!r})"


__all__ = ["COMMITTER", "DynamoDBManifestStore", "ExternalManifestStore", "ManifestEntry", "SQLiteManifestStore"]
