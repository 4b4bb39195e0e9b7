"""A minimal HTTP/1.1 client connection for the S3 client (:mod:`lance_format.storage.s3_http`).

``http.client`` costs ~45 ms of CPU to import in a fresh process (it loads the ``email``
package to parse headers, and ``ssl`` even for plain-HTTP endpoints) — as much as the rest of
opening a dataset on S3. An S3 exchange needs little of it: one request, a status line, header
lines, and a body sized by ``Content-Length`` or sent in chunks (RFC 9112). This module does
that on a socket, keeps the connection alive between requests, and imports ``ssl`` only when
the first HTTPS connection is made.
"""

from __future__ import annotations

import socket
from typing import Any

#: Longest status or header line accepted (http.client's limit).
MAX_LINE = 65536
#: Most header lines in one response.
MAX_HEADERS = 100


class HttpProtocolError(Exception):
    """The peer broke HTTP/1.1 (a malformed reply, or the connection closed mid-reply)."""


def split_host(host: str, default_port: int) -> tuple[str, int]:
    """``(name, port)`` of ``name[:port]`` (``[v6-address][:port]`` too)."""
    if host.startswith("["):
        name, _, rest = host[1:].partition("]")
        return name, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else default_port
    name, sep, port = host.rpartition(":")
    if sep and port.isdigit():
        return name, int(port)
    return host, default_port


class HttpConnection:
    """One keep-alive HTTP/1.1 connection to ``host`` (``name[:port]``), opened on first use.

    Not thread-safe: the S3 client keeps one per thread and host.

    Args:
        host: Host name or address, with an optional ``:port``.
        secure: Speak TLS (port 443 by default) instead of plain HTTP (port 80).
        timeout: Socket timeout in seconds for connecting and for every read.
    """

    def __init__(self, host: str, *, secure: bool, timeout: float = 60.0) -> None:
        self.host = host
        self.secure = secure
        self.timeout = timeout
        self._address = split_host(host, 443 if secure else 80)
        self._sock: Any = None
        self._file: Any = None

    def _connect(self) -> None:
        sock = socket.create_connection(self._address, self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.secure:
            import ssl  # only HTTPS endpoints pay for it

            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=self._address[0])
        self._sock = sock
        self._file = sock.makefile("rb")

    def close(self) -> None:
        """Close the connection (the next request opens a new one)."""
        if self._file is not None:
            self._file.close()
        if self._sock is not None:
            self._sock.close()
        self._sock = self._file = None

    def exchange(self, method: str, target: str, body: bytes | None,
                 headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        """Send one request and read its whole reply.

        Args:
            method: ``GET``, ``HEAD``, ``PUT``, ``POST`` or ``DELETE``.
            target: The request target (path and query, already quoted).
            body: The request body, or ``None``.
            headers: Request headers (``host`` included), sent as given.

        Returns:
            ``(status, headers with lower-case names, body)``.

        Raises:
            OSError: The connection failed or timed out.
            HttpProtocolError: The reply was malformed or cut short.
        """
        if self._sock is None:
            self._connect()
        lines = [f"{method} {target} HTTP/1.1"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if body or method in ("PUT", "POST"):
            lines.append(f"content-length: {len(body or b'')}")
        lines.append("accept-encoding: identity")  # bodies as stored: never compressed
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self._sock.sendall(head + body if body and len(body) < 65536 else head)
        if body and len(body) >= 65536:
            self._sock.sendall(body)
        status, version, got = self._read_head()
        while 100 <= status < 200:  # interim replies (100 Continue) carry no body
            status, version, got = self._read_head()
        data = self._read_body(method, status, got)
        connection = got.get("connection", "").lower()
        if connection == "close" or (version == "HTTP/1.0" and connection != "keep-alive"):
            self.close()
        return status, got, data

    def _line(self) -> bytes:
        line: bytes = self._file.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise HttpProtocolError(f"{self.host}: reply line longer than {MAX_LINE} bytes")
        return line

    def _read_head(self) -> tuple[int, str, dict[str, str]]:
        line = self._line()
        if not line:
            # a keep-alive connection the server had closed: the caller reconnects and retries
            raise HttpProtocolError(f"{self.host}: connection closed before the reply")
        version, _, rest = line.decode("latin-1").strip().partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/") or not code.isdigit():
            raise HttpProtocolError(f"{self.host}: malformed status line {line[:80]!r}")
        headers: dict[str, str] = {}
        for _ in range(MAX_HEADERS + 1):
            raw = self._line()
            if raw in (b"\r\n", b"\n", b""):
                return int(code), version, headers
            name, sep, value = raw.decode("latin-1").partition(":")
            if not sep:
                raise HttpProtocolError(f"{self.host}: malformed header line {raw[:80]!r}")
            key = name.strip().lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        raise HttpProtocolError(f"{self.host}: more than {MAX_HEADERS} header lines")

    def _read_body(self, method: str, status: int, headers: dict[str, str]) -> bytes:
        if method == "HEAD" or status in (204, 304):
            return b""
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return self._read_chunked()
        length = headers.get("content-length")
        if length is not None:
            if not length.strip().isdigit():
                raise HttpProtocolError(f"{self.host}: bad content-length {length!r}")
            return self._read_exactly(int(length))
        data: bytes = self._file.read()  # no length: the body runs to the end of the connection
        self.close()
        return data

    def _read_exactly(self, n: int) -> bytes:
        data: bytes = self._file.read(n)
        if len(data) != n:
            raise HttpProtocolError(f"{self.host}: reply body cut short ({len(data)} of {n} bytes)")
        return data

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size_line = self._line().split(b";", 1)[0].strip()
            try:
                size = int(size_line, 16)
            except ValueError:
                raise HttpProtocolError(f"{self.host}: bad chunk size {size_line[:20]!r}") from None
            if size == 0:
                while self._line() not in (b"\r\n", b"\n", b""):  # trailer lines
                    pass
                return b"".join(parts)
            parts.append(self._read_exactly(size))
            self._read_exactly(2)  # the CRLF after each chunk


#: Reason phrases of the statuses S3 replies with (error messages of body-less replies).
REASONS = {301: "Moved Permanently", 304: "Not Modified", 400: "Bad Request", 403: "Forbidden", 404: "Not Found",
           405: "Method Not Allowed", 409: "Conflict", 412: "Precondition Failed", 416: "Range Not Satisfiable",
           500: "Internal Server Error", 501: "Not Implemented", 503: "Service Unavailable", 504: "Gateway Timeout"}


__all__ = ["HttpConnection", "HttpProtocolError", "MAX_HEADERS", "MAX_LINE", "REASONS", "split_host"]
