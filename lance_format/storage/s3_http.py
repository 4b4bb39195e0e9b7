"""A small S3 REST client on the standard library (a socket HTTP/1.1 connection, SigV4 signing).

Opening a dataset on S3 through botocore costs about 0.3 s of CPU before the first request:
importing botocore (~0.17 s) and building a client (~0.14 s: the S3 service model and the
endpoint rules). pylance's Rust ``object_store`` pays neither. This client speaks the handful of
S3 calls a store makes (GET with ranges, HEAD, PUT with ``If-None-Match``, DELETE,
``ListObjectsV2``, ``DeleteObjects``, multipart uploads) with the same method names, arguments
and response shapes as a botocore client, so :class:`~lance_format.storage.s3.S3Store` uses
either. It is chosen only when the storage options carry the credentials (or ask for unsigned
requests) and name the region or an endpoint; everything else (profiles, instance metadata, SSO,
region discovery) is left to botocore's credential chain.

Signing follows AWS Signature Version 4 (the ``s3`` service, payload hash signed). Requests are
retried like botocore's ``standard`` mode: connection failures, 5xx and throttling replies, up to
five attempts with exponential back-off.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import hashlib
import hmac
import random
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any, BinaryIO
from xml.etree import ElementTree

from lance_format.storage.http11 import REASONS, HttpConnection, HttpProtocolError

_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
_RETRY_STATUS = {500, 502, 503, 504}
_RETRY_CODES = {"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "InternalError",
                "RequestTimeTooSkewed"}
MAX_ATTEMPTS = 5
_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


class S3HttpError(Exception):
    """A failed S3 request, shaped like botocore's ``ClientError`` (``response["Error"]["Code"]``).

    Attributes:
        response: ``{"Error": {"Code", "Message"}, "ResponseMetadata": {"HTTPStatusCode"}}``.
    """

    def __init__(self, operation: str, status: int, code: str, message: str) -> None:
        super().__init__(f"An error occurred ({code or status}) when calling the {operation} operation: {message}")
        self.response: dict[str, Any] = {"Error": {"Code": code or str(status), "Message": message},
                                          "ResponseMetadata": {"HTTPStatusCode": status}}


class S3ConnectionError(Exception):
    """The endpoint could not be reached after every retry."""


class _Body:
    """The ``Body`` of a GET response (botocore's ``StreamingBody`` offers the same ``read``)."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def read(self) -> bytes:
        return self._data


def _quote(text: str, safe: str = "/") -> str:
    return urllib.parse.quote(text, safe=safe + "-_.~")


def _sign(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


class _Paginator:
    def __init__(self, client: S3HttpClient) -> None:
        self._client = client

    def paginate(self, Bucket: str, Prefix: str = "", PaginationConfig: Mapping[str, Any] | None = None
                 ) -> Iterator[dict[str, Any]]:
        size = (PaginationConfig or {}).get("PageSize")
        token: str | None = None
        while True:
            query = {"list-type": "2", "prefix": Prefix}
            if size:
                query["max-keys"] = str(size)
            if token:
                query["continuation-token"] = token
            _status, _headers, body = self._client._request("ListObjectsV2", "GET", Bucket, "", query)
            root = ElementTree.fromstring(body)
            contents = [{"Key": c.findtext(f"{_NS}Key", ""), "Size": int(c.findtext(f"{_NS}Size", "0")),
                         "LastModified": _timestamp(c.findtext(f"{_NS}LastModified"))}
                        for c in root.iter(f"{_NS}Contents")]
            yield {"Contents": contents}
            token = root.findtext(f"{_NS}NextContinuationToken")
            if root.findtext(f"{_NS}IsTruncated") != "true" or not token:
                return


def _timestamp(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


class S3HttpClient:
    """S3 calls over HTTP(S) with static credentials (see the module docs).

    Thread-safe: each thread keeps its own connection per host.

    Args:
        region: Signing region.
        endpoint: ``http(s)://host[:port]``, or ``None`` for AWS (``s3.{region}.amazonaws.com``).
        access_key: Access key id (``None`` with ``secret_key`` ``None``: unsigned requests).
        secret_key: Secret access key.
        token: Session token, if the credentials are temporary.
        virtual_hosted: Address buckets as ``bucket.host`` instead of ``host/bucket``.
    """

    def __init__(self, region: str, endpoint: str | None, access_key: str | None, secret_key: str | None,
                 token: str | None = None, *, virtual_hosted: bool = False) -> None:
        self.region = region
        if endpoint:
            parts = urllib.parse.urlsplit(endpoint)
            self._secure = parts.scheme.lower() == "https"
            self._host = parts.netloc
            self._base = parts.path.rstrip("/")
            self._virtual = virtual_hosted
        else:
            self._secure = True
            self._host = f"s3.{region}.amazonaws.com"
            self._base = ""
            self._virtual = True  # AWS's default for DNS-compatible bucket names
        self._access_key, self._secret_key, self._token = access_key, secret_key, token
        self._local = threading.local()
        #: Requests sent, by S3 operation name (for tests and diagnostics).
        self.calls: Counter[str] = Counter()

    # -- transport -----------------------------------------------------------------
    def _target(self, bucket: str, key: str) -> tuple[str, str]:
        path = f"/{_quote(key)}" if key else "/"
        if self._virtual and "." not in bucket and bucket.lower() == bucket:
            return f"{bucket}.{self._host}", self._base + path
        return self._host, f"{self._base}/{_quote(bucket)}" + (path if key else "")

    def _connection(self, host: str) -> HttpConnection:
        # http11, not http.client: the latter's import (email, ssl) cost as much CPU as the rest of an open
        conns: dict[str, HttpConnection] | None = getattr(self._local, "conns", None)
        if conns is None:
            conns = self._local.conns = {}
        conn = conns.get(host)
        if conn is None:
            conn = conns[host] = HttpConnection(host, secure=self._secure, timeout=60)
        return conn

    def _drop(self, host: str) -> None:
        conn = getattr(self._local, "conns", {}).pop(host, None)
        if conn is not None:
            conn.close()

    def _headers(self, method: str, host: str, path: str, query: Mapping[str, str], body: bytes,
                 extra: Mapping[str, str], amz_date: str | None = None) -> dict[str, str]:
        amz_date = amz_date or dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        payload = hashlib.sha256(body).hexdigest() if body else _EMPTY_SHA256
        headers = {"host": host, "x-amz-date": amz_date, "x-amz-content-sha256": payload,
                   **{k.lower(): v for k, v in extra.items()}}
        if self._secret_key is None:
            return headers
        if self._token:
            headers["x-amz-security-token"] = self._token
        canonical_query = "&".join(f"{_quote(k, '')}={_quote(v, '')}" for k, v in sorted(query.items()))
        names = sorted(headers)
        canonical = "\n".join([method, path, canonical_query,
                               "".join(f"{n}:{' '.join(str(headers[n]).split())}\n" for n in names),
                               ";".join(names), payload])
        scope = f"{amz_date[:8]}/{self.region}/s3/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
        key = _sign(_sign(_sign(_sign(f"AWS4{self._secret_key}".encode(), amz_date[:8]), self.region), "s3"),
                    "aws4_request")
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={self._access_key}/{scope}, "
                                    f"SignedHeaders={';'.join(names)}, Signature={signature}")
        return headers

    def _request(self, operation: str, method: str, bucket: str, key: str, query: Mapping[str, str] | None = None,
                 body: bytes = b"", headers: Mapping[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        query = dict(query or {})
        host, path = self._target(bucket, key)
        url = path + ("?" + "&".join(f"{_quote(k, '')}={_quote(v, '')}" for k, v in sorted(query.items()))
                      if query else "")
        self.calls[operation] += 1
        for attempt in range(1, MAX_ATTEMPTS + 1):
            signed = self._headers(method, host, path, query, body, headers or {})
            try:
                status, got, data = self._connection(host).exchange(method, url, body or None, signed)
            except (OSError, HttpProtocolError) as exc:
                self._drop(host)  # a dead keep-alive connection, a reset, a timeout: reconnect
                if attempt == MAX_ATTEMPTS:
                    raise S3ConnectionError(f"{method} {host}{url}: {exc}") from exc
                self._back_off(attempt)
                continue
            if status < 300 or (status == 304 and method == "GET"):
                return status, got, data
            code, message = _error(data, status)
            if (status in _RETRY_STATUS or code in _RETRY_CODES) and attempt < MAX_ATTEMPTS:
                self._back_off(attempt)
                continue
            raise S3HttpError(operation, status, code, message)
        raise AssertionError("unreachable")

    @staticmethod
    def _back_off(attempt: int) -> None:
        time.sleep(min(20.0, random.random() * 2 ** attempt * 0.05))

    # -- the calls S3Store makes (botocore's names and shapes) -------------------------
    def get_object(self, Bucket: str, Key: str, Range: str | None = None) -> dict[str, Any]:
        _s, headers, data = self._request("GetObject", "GET", Bucket, Key,
                                          headers={"range": Range} if Range else None)
        return {"Body": _Body(data), "ContentLength": len(data), "ETag": headers.get("etag")}

    def head_object(self, Bucket: str, Key: str) -> dict[str, Any]:
        _s, headers, _d = self._request("HeadObject", "HEAD", Bucket, Key)
        return {"ContentLength": int(headers.get("content-length", "0")), "ETag": headers.get("etag")}

    def put_object(self, Bucket: str, Key: str, Body: bytes, IfNoneMatch: str | None = None) -> dict[str, Any]:
        extra = {"if-none-match": IfNoneMatch} if IfNoneMatch else {}
        _s, headers, _d = self._request("PutObject", "PUT", Bucket, Key, body=bytes(Body), headers=extra)
        return {"ETag": headers.get("etag")}

    def delete_object(self, Bucket: str, Key: str) -> dict[str, Any]:
        self._request("DeleteObject", "DELETE", Bucket, Key)
        return {}

    def delete_objects(self, Bucket: str, Delete: Mapping[str, Any]) -> dict[str, Any]:
        root = ElementTree.Element("Delete", xmlns=_NS[1:-1])
        if Delete.get("Quiet"):
            ElementTree.SubElement(root, "Quiet").text = "true"
        for obj in Delete["Objects"]:
            ElementTree.SubElement(ElementTree.SubElement(root, "Object"), "Key").text = obj["Key"]
        body = ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)
        # S3 requires an integrity header on DeleteObjects.
        md5 = base64.b64encode(hashlib.md5(body, usedforsecurity=False).digest()).decode()
        _s, _h, data = self._request("DeleteObjects", "POST", Bucket, "", {"delete": ""}, body,
                                     {"content-md5": md5, "content-type": "application/xml"})
        errors = [{"Key": e.findtext(f"{_NS}Key", ""), "Code": e.findtext(f"{_NS}Code", ""),
                   "Message": e.findtext(f"{_NS}Message", "")}
                  for e in ElementTree.fromstring(data).iter(f"{_NS}Error")] if data.strip() else []
        return {"Errors": errors}

    def get_paginator(self, name: str) -> _Paginator:
        if name != "list_objects_v2":
            raise ValueError(f"no paginator {name!r}")
        return _Paginator(self)

    def upload_fileobj(self, fh: BinaryIO, bucket: str, key: str, chunk: int) -> None:
        """Upload ``fh`` from its start: one PUT up to ``chunk`` bytes, a multipart upload above."""
        fh.seek(0)
        first = fh.read(chunk)
        second = fh.read(chunk)
        if not second:
            self.put_object(bucket, key, first)
            return
        _s, _h, data = self._request("CreateMultipartUpload", "POST", bucket, key, {"uploads": ""})
        upload_id = ElementTree.fromstring(data).findtext(f"{_NS}UploadId", "")
        etags: list[str] = []
        try:
            part = first
            while part:
                _s, headers, _d = self._request("UploadPart", "PUT", bucket, key,
                                                {"partNumber": str(len(etags) + 1), "uploadId": upload_id}, part)
                etags.append(headers.get("etag", ""))
                part, second = second, (fh.read(chunk) if second else b"")
            root = ElementTree.Element("CompleteMultipartUpload", xmlns=_NS[1:-1])
            for number, etag in enumerate(etags, 1):
                node = ElementTree.SubElement(root, "Part")
                ElementTree.SubElement(node, "PartNumber").text = str(number)
                ElementTree.SubElement(node, "ETag").text = etag
            body = ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)
            _s, _h, data = self._request("CompleteMultipartUpload", "POST", bucket, key, {"uploadId": upload_id},
                                         body, {"content-type": "application/xml"})
            if b"<Error>" in data:  # S3 may report a failed completion inside a 200 reply
                code, message = _error(data, 200)
                raise S3HttpError("CompleteMultipartUpload", 200, code, message)
        except BaseException:
            # the upload is unusable either way; if the abort fails too, lifecycle rules reap it
            with contextlib.suppress(S3HttpError, S3ConnectionError):
                self._request("AbortMultipartUpload", "DELETE", bucket, key, {"uploadId": upload_id})
            raise


def _error(data: bytes, status: int) -> tuple[str, str]:
    """(code, message) of an S3 error reply (HEAD replies have no body: the status speaks)."""
    if data.strip():
        try:
            root = ElementTree.fromstring(data)
            return root.findtext("Code", "") or root.findtext(f"{_NS}Code", ""), \
                root.findtext("Message", "") or root.findtext(f"{_NS}Message", "")
        except ElementTree.ParseError:
            pass
    return {404: "NotFound", 412: "PreconditionFailed", 403: "Forbidden"}.get(status, str(status)), \
        REASONS.get(status, "")


__all__ = ["MAX_ATTEMPTS", "S3ConnectionError", "S3HttpClient", "S3HttpError"]
