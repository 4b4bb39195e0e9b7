"""S3 backend (a standard-library client, or botocore) with conditional-PUT commits; registers ``s3://``.

Create-only writes send ``If-None-Match: *`` like object_store's default
``S3ConditionalPut::ETagMatch`` does for lance, so two writers racing for the
same manifest name cannot both succeed. The store needs an S3 implementation
that honours conditional writes (AWS since 2024, MinIO, moto >= 5.0.x).

Recognised ``storage_options`` (pylance / object_store spellings):

* ``aws_access_key_id`` / ``access_key_id``, ``aws_secret_access_key`` /
  ``secret_access_key``, ``aws_session_token`` / ``session_token`` / ``token``
* ``region`` / ``aws_region`` / ``aws_default_region``
* ``endpoint`` / ``aws_endpoint`` / ``endpoint_url`` / ``aws_endpoint_url``
* ``allow_http`` (required for ``http://`` endpoints), ``virtual_hosted_style_request``,
  ``skip_signature`` / ``aws_skip_signature``

Two clients, the same requests:

* With the keys in ``storage_options`` (or ``skip_signature``) and a region (option, else
  ``AWS_REGION`` / ``AWS_DEFAULT_REGION``; ``us-east-1`` with a custom endpoint), requests go
  through :mod:`lance_format.storage.s3_http`, a small SigV4 client on a socket HTTP/1.1 connection: opening
  a dataset then costs no botocore import and no client build (~0.3 s of CPU together).
* Otherwise, or with ``LANCE_FORMAT_S3_CLIENT=botocore`` in the environment, botocore's client
  with its default credential chain (the one boto3 uses: environment, ``AWS_PROFILE`` and shared
  config files, SSO, instance metadata) and its region discovery; boto3's transfer manager does
  its multipart uploads.
"""

from __future__ import annotations

import builtins
import datetime as dt
import os
import threading
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, BinaryIO

from lance_format.errors import (
    InvalidInputError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    StorageError,
    UnsupportedSchemeError,
)
from lance_format.storage import register_scheme
from lance_format.storage.base import ObjectInfo, ObjectStore, normalize_key
from lance_format.storage.redact import redact_url
from lance_format.storage.s3_http import S3ConnectionError, S3HttpClient, S3HttpError
from lance_format.storage.spool import SpooledWriter

#: Writers switch to multipart uploads above this size, in parts of this size.
MULTIPART_CHUNK = 16 * 1024 * 1024

_KEY_ALIASES: dict[str, tuple[str, ...]] = {
    "access_key": ("aws_access_key_id", "access_key_id"),
    "secret_key": ("aws_secret_access_key", "secret_access_key"),
    "token": ("aws_session_token", "session_token", "token"),
    "region": ("region", "aws_region", "aws_default_region"),
    "endpoint": ("endpoint", "aws_endpoint", "endpoint_url", "aws_endpoint_url"),
    "allow_http": ("allow_http", "aws_allow_http"),
    "virtual_hosted": ("virtual_hosted_style_request", "aws_virtual_hosted_style_request"),
    "skip_signature": ("skip_signature", "aws_skip_signature"),
}
_NOT_FOUND_CODES = {"NoSuchKey", "404", "NotFound"}
_CONFLICT_CODES = {"PreconditionFailed", "412", "ConditionalRequestConflict", "409"}

#: Keys per ``DeleteObjects`` request (the service maximum).
DELETE_BATCH = 1000

#: One botocore session for the process: its loader parses the S3 service model once, so every
#: client after the first is cheap. Clients are thread-safe and cost a service-model parse plus
#: endpoint resolution (tens of ms) to build, so they are shared by option set for the process
#: (object_store keeps one client per store the same way; pylance has none to build).
_BOTO_SESSION: Any = None
_CLIENTS: dict[tuple[tuple[str, str], ...], Any] = {}
_CLIENTS_LOCK = threading.Lock()
#: Environment variable choosing the client: ``botocore`` forces botocore's (``auto``, the default,
#: takes the standard-library client whenever the options allow it).
CLIENT_ENV = "LANCE_FORMAT_S3_CLIENT"
#: Exceptions a request may raise: the standard-library client's, and botocore's once it is loaded.
_ERRORS: tuple[type[Exception], ...] = (S3HttpError, S3ConnectionError)


def _option(opts: Mapping[str, str], name: str) -> str | None:
    lowered = {k.lower(): v for k, v in opts.items()}
    for alias in _KEY_ALIASES[name]:
        value = lowered.get(alias)
        if value is not None and str(value) != "":
            return str(value)
    return None


def _truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() in ("1", "true", "yes", "on")


def _check_endpoint(endpoint: str) -> None:
    """Refuse an endpoint boto3 would reject later with a bare ``ValueError`` (or misroute)."""
    try:
        parts = urllib.parse.urlsplit(endpoint)
        port = parts.port  # raises ValueError when out of range or not a number
    except ValueError as exc:
        raise InvalidInputError(f"storage_options endpoint {redact_url(endpoint)!r} is not a valid URL: "
                                f"{exc}") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise InvalidInputError(f"storage_options endpoint {redact_url(endpoint)!r} is not a valid URL "
                                "(expected http://host[:port] or https://host[:port])")
    if port is not None and not 0 < port < 65536:
        raise InvalidInputError(f"storage_options endpoint {redact_url(endpoint)!r} has an invalid port {port}")


def _check_options(opts: Mapping[str, str]) -> None:
    endpoint = _option(opts, "endpoint")
    if endpoint:
        _check_endpoint(endpoint)
    if endpoint and endpoint.lower().startswith("http://") and not _truthy(_option(opts, "allow_http")):
        raise InvalidInputError(
            f"S3 endpoint {redact_url(endpoint)!r} uses plain HTTP; pass storage_options allow_http='true'"
        )


def _parse_timestamp(value: Any) -> dt.datetime:
    """S3's ISO 8601 timestamps (``2024-05-01T10:00:00.000Z``, every listed object has one) read by
    the standard library; anything else (HTTP-date headers) by botocore's parser.

    botocore's default goes through ``dateutil``, about 1 ms a timestamp: most of the CPU of
    listing a directory of a thousand files.
    """
    if isinstance(value, str) and value.endswith("Z") and "T" in value:
        try:
            return dt.datetime.fromisoformat(value)
        except ValueError:
            pass
    import botocore.utils

    parsed: dt.datetime = botocore.utils.parse_timestamp(value)
    return parsed


def _http_client(opts: Mapping[str, str]) -> S3HttpClient | None:
    """The standard-library client for ``opts``, or ``None`` when botocore must resolve something.

    Taken when the credentials are in the options (or requests go unsigned) and the region is
    known without botocore's configuration files.
    """
    if os.environ.get(CLIENT_ENV, "auto").strip().lower() == "botocore":
        return None
    unsigned = _truthy(_option(opts, "skip_signature"))
    access, secret = _option(opts, "access_key"), _option(opts, "secret_key")
    if not unsigned and not (access and secret):
        return None
    endpoint = _option(opts, "endpoint")
    region = _option(opts, "region") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not region:
        if not endpoint:
            return None  # botocore finds it in the config files
        region = "us-east-1"  # object_store's default for custom endpoints
    return S3HttpClient(region, endpoint, None if unsigned else access, None if unsigned else secret,
                        None if unsigned else _option(opts, "token"),
                        virtual_hosted=_truthy(_option(opts, "virtual_hosted")))


def _client(opts: Mapping[str, str]) -> Any:
    """The process's S3 client for this option set (built on first use).

    The standard-library client when the options allow it (see the module docs), else botocore's.
    Either way boto3 is not imported to open or read: it adds only its resource layer and the
    transfer manager, which botocore-backed stores use for multipart uploads.
    """
    cache_key = tuple(sorted((str(k), str(v)) for k, v in opts.items()))
    client = _CLIENTS.get(cache_key)
    if client is not None:
        return client
    _check_options(opts)
    with _CLIENTS_LOCK:  # one build per option set, even when threads open the dataset together
        client = _CLIENTS.get(cache_key)
        if client is None:
            client = _http_client(opts) or _boto_client(opts)
            _CLIENTS[cache_key] = client
    return client


def _boto_client(opts: Mapping[str, str]) -> Any:
    """A botocore S3 client for ``opts`` (imports botocore on first use)."""
    global _BOTO_SESSION, _ERRORS
    try:
        import botocore
        import botocore.config
        import botocore.exceptions
        import botocore.session
    except ImportError:
        raise UnsupportedSchemeError(
            "s3:// without access keys and a region in storage_options resolves credentials through "
            "botocore's chain, which is not installed (pip install 'lance-dagster[s3]'); or pass "
            "aws_access_key_id, aws_secret_access_key and aws_region") from None

    _ERRORS = (S3HttpError, S3ConnectionError, botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError)
    endpoint = _option(opts, "endpoint")
    config_kwargs: dict[str, Any] = {
        "retries": {"mode": "standard", "max_attempts": 5},
        "max_pool_connections": 32,
        # object_store/pylance default to path-style requests for custom endpoints.
        "s3": {"addressing_style": "virtual" if _truthy(_option(opts, "virtual_hosted")) else "path"}
        if endpoint
        else {},
    }
    if _truthy(_option(opts, "skip_signature")):
        config_kwargs["signature_version"] = botocore.UNSIGNED
    if _BOTO_SESSION is None:
        _BOTO_SESSION = botocore.session.get_session()
        _BOTO_SESSION.get_component("response_parser_factory").set_parser_defaults(
            timestamp_parser=_parse_timestamp)
    return _BOTO_SESSION.create_client(
        "s3",
        region_name=_option(opts, "region"),
        endpoint_url=endpoint,
        aws_access_key_id=_option(opts, "access_key"),
        aws_secret_access_key=_option(opts, "secret_key"),
        aws_session_token=_option(opts, "token"),
        config=botocore.config.Config(**config_kwargs),
    )


def _has_response(exc: Exception) -> bool:
    # botocore's ClientError and S3HttpError carry the service's reply; the others are transport errors.
    return isinstance(getattr(exc, "response", None), dict)


def _error_code(exc: Any) -> tuple[str, int]:
    err = exc.response.get("Error", {}) or {}
    status = int((exc.response.get("ResponseMetadata", {}) or {}).get("HTTPStatusCode", 0) or 0)
    return str(err.get("Code", "")), status


class S3Store(ObjectStore):
    """Objects below ``s3://bucket/prefix``.

    Args:
        root: ``s3://bucket`` or ``s3://bucket/prefix``.
        storage_options: Credentials, region and endpoint (see module docs).

    Raises:
        InvalidInputError: if the URI has no bucket or the options are inconsistent.
    """

    #: Keys per list_objects_v2 request (None: the service maximum, 1000).
    list_page_size: int | None = None

    def __init__(self, root: str, storage_options: Mapping[str, str] | None = None) -> None:
        rest = root.split("://", 1)[1] if "://" in root else root
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise InvalidInputError(f"S3 URI {root!r} names no bucket")
        self._bucket = bucket
        self._prefix = normalize_key(prefix.strip("/")) if prefix.strip("/") else ""
        self._opts = dict(storage_options or {})
        _check_options(self._opts)
        self._client_obj: Any = None
        self.root = f"s3://{bucket}" + (f"/{self._prefix}" if self._prefix else "")

    @property
    def _client(self) -> Any:
        # Resolved on first use: building a store (URI parsing, option checks) makes no requests.
        client = self._client_obj
        if client is None:
            client = self._client_obj = _client(self._opts)
        return client

    def _key(self, key: str) -> str:
        key = normalize_key(key)
        if not key:
            return self._prefix
        return f"{self._prefix}/{key}" if self._prefix else key

    def _fail(self, key: str, action: str, exc: Exception) -> StorageError:
        """Map a boto error for ``key`` to our exception hierarchy."""
        if _has_response(exc):
            code, status = _error_code(exc)
            if code in _NOT_FOUND_CODES or (status == 404 and code != "NoSuchBucket"):
                return ObjectNotFoundError(f"{self.uri(key)}: not found")
            if code == "NoSuchBucket":
                return ObjectNotFoundError(f"{self.uri(key)}: bucket {self._bucket!r} does not exist")
            return StorageError(f"{self.uri(key)}: {action} failed: {code or status}: {exc}")
        return StorageError(f"{self.uri(key)}: {action} failed: {exc}")

    # -- reads ---------------------------------------------------------------
    def read(self, key: str) -> bytes:
        try:
            resp = self._client.get_object(Bucket=self._bucket, Key=self._key(key))
            return bytes(resp["Body"].read())
        except _ERRORS as exc:
            raise self._fail(key, "read", exc) from exc

    def read_range(self, key: str, start: int, length: int) -> bytes:
        if start < 0 or length < 0:
            raise StorageError(f"{self.uri(key)}: invalid range start={start} length={length}")
        if length == 0:
            self.size(key)  # still report a missing object
            return b""
        try:
            resp = self._client.get_object(
                Bucket=self._bucket, Key=self._key(key), Range=f"bytes={start}-{start + length - 1}"
            )
            return bytes(resp["Body"].read())
        except _ERRORS as exc:
            code, status = _error_code(exc) if _has_response(exc) else ("", 0)
            if code == "InvalidRange" or status == 416:
                return b""  # start at or past the end: like a short local read
            raise self._fail(key, "ranged read", exc) from exc

    def size(self, key: str) -> int:
        try:
            resp = self._client.head_object(Bucket=self._bucket, Key=self._key(key))
            return int(resp["ContentLength"])
        except _ERRORS as exc:
            raise self._fail(key, "head", exc) from exc

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        base = self._key(prefix)
        list_prefix = f"{base}/" if base else ""
        strip = len(self._prefix) + 1 if self._prefix else 0
        try:
            paging = {"PageSize": self.list_page_size} if self.list_page_size else {}
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self._bucket, Prefix=list_prefix, PaginationConfig=paging
            )
            for page in pages:
                for obj in page.get("Contents", []) or []:
                    modified = obj.get("LastModified")
                    if isinstance(modified, dt.datetime) and modified.tzinfo is None:
                        modified = modified.replace(tzinfo=dt.UTC)
                    yield ObjectInfo(str(obj["Key"])[strip:], int(obj["Size"]), modified)
        except _ERRORS as exc:
            code = _error_code(exc)[0] if _has_response(exc) else ""
            raise StorageError(f"{self.uri(prefix)}: list failed: {code}: {exc}") from exc

    # -- writes --------------------------------------------------------------
    def write(self, key: str, data: bytes) -> None:
        try:
            self._client.put_object(Bucket=self._bucket, Key=self._key(key), Body=bytes(data))
        except _ERRORS as exc:
            raise self._fail(key, "write", exc) from exc

    def put_if_absent(self, key: str, data: bytes) -> None:
        try:
            self._client.put_object(
                Bucket=self._bucket, Key=self._key(key), Body=bytes(data), IfNoneMatch="*"
            )
        except _ERRORS as exc:
            code, status = _error_code(exc) if _has_response(exc) else ("", 0)
            if code in _CONFLICT_CODES or status in (409, 412):
                raise ObjectAlreadyExistsError(f"{self.uri(key)}: already exists") from exc
            raise self._fail(key, "create-only write", exc) from exc

    def open_writer(self, key: str) -> BinaryIO:
        s3_key = self._key(key)

        def commit(fh: BinaryIO, _size: int) -> None:
            client = self._client
            if isinstance(client, S3HttpClient):
                try:
                    client.upload_fileobj(fh, self._bucket, s3_key, MULTIPART_CHUNK)
                except _ERRORS as exc:
                    raise self._fail(key, "upload", exc) from exc
                return
            # boto3's transfer manager does the multipart upload; imported here, on the first
            # write, so opening and reading a dataset never pays for it.
            import boto3.exceptions
            import boto3.s3.inject
            from boto3.s3.transfer import TransferConfig

            config = TransferConfig(
                multipart_threshold=MULTIPART_CHUNK, multipart_chunksize=MULTIPART_CHUNK, use_threads=False
            )
            try:
                # The botocore client has no upload_fileobj method; boto3 attaches the same one.
                boto3.s3.inject.upload_fileobj(client, fh, self._bucket, s3_key, Config=config)
            except _ERRORS as exc:
                raise self._fail(key, "upload", exc) from exc
            except boto3.exceptions.S3UploadFailedError as exc:
                raise StorageError(f"{self.uri(key)}: upload failed: {exc}") from exc

        return SpooledWriter(commit)  # type: ignore[return-value]

    def delete(self, key: str) -> None:
        try:
            self._client.delete_object(Bucket=self._bucket, Key=self._key(key))
        except _ERRORS as exc:
            err = self._fail(key, "delete", exc)
            if not isinstance(err, ObjectNotFoundError) or "bucket" in str(err):
                raise err from exc

    def delete_many(self, keys: Sequence[str]) -> tuple[tuple[str, ...], dict[str, str]]:
        """Delete ``keys`` with ``DeleteObjects``, :data:`DELETE_BATCH` keys a request.

        Returns:
            The keys deleted (missing keys count, as S3 reports them deleted), and the keys the
            service refused with its error code and message.
        """
        done: builtins.list[str] = []
        failed: dict[str, str] = {}
        for start in range(0, len(keys), DELETE_BATCH):
            chunk = list(keys[start:start + DELETE_BATCH])
            full = {self._key(k): k for k in chunk}
            try:
                # Quiet mode: the response lists only failures, so a large batch's reply stays small.
                resp = self._client.delete_objects(
                    Bucket=self._bucket, Delete={"Objects": [{"Key": k} for k in full], "Quiet": True}
                )
            except _ERRORS as exc:
                reason = str(self._fail(chunk[0], "bulk delete", exc))
                failed.update(dict.fromkeys(chunk, reason))
                continue
            refused = {str(e.get("Key", "")): f"{e.get('Code', '')}: {e.get('Message', '')}"
                       for e in resp.get("Errors", []) or []}
            for s3_key, key in full.items():
                if s3_key in refused:
                    failed[key] = f"{self.uri(key)}: delete failed: {refused[s3_key]}"
                else:
                    done.append(key)
        return tuple(done), failed

    @property
    def store_path(self) -> str:
        # object_store paths are relative to the bucket (lance's DynamoDB ``base_uri``).
        return self._prefix

    def child(self, key: str) -> S3Store:
        key = normalize_key(key)
        if not key:
            return self
        store = S3Store.__new__(S3Store)
        store.external = self.external
        store.commit_lock = self.commit_lock
        store._bucket = self._bucket
        store._prefix = self._key(key)
        store._opts = self._opts
        store._client_obj = self._client_obj
        store.root = self.uri(key)
        store._session = self._session
        return store


def _factory(uri: str, storage_options: Mapping[str, str]) -> ObjectStore:
    return S3Store(uri, storage_options)


register_scheme("s3", _factory)

__all__ = ["S3Store", "MULTIPART_CHUNK"]
