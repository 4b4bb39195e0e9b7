"""The S3 client's HTTP/1.1 connection: reply framing, keep-alive, reconnects, and what it imports.

A scripted server on loopback answers each request with canned bytes; the S3 round trips
themselves are covered against moto in test_s3_client_choice.py and test_object_stores.py.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from lance_format.storage.http11 import HttpConnection, HttpProtocolError, split_host
from lance_format.storage.s3_http import S3HttpClient
from tests.storage.test_s3_client_choice import modules_after_open_and_take

HANG_UP = b"<hang up>"


class Scripted:
    """A loopback server: the n-th request on any connection gets ``replies[n]``.

    A reply of ``None`` closes the connection without answering (a stale keep-alive); a reply
    ending in :data:`HANG_UP` is sent, then the connection closes.
    """

    def __init__(self, replies: list[bytes | None]) -> None:
        self.replies = list(replies)
        self.requests: list[bytes] = []
        self.connections = 0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while self.replies:
            conn, _ = self._sock.accept()
            self.connections += 1
            with conn, conn.makefile("rb") as f:
                while self.replies:
                    head = b""
                    while not head.endswith(b"\r\n\r\n"):
                        line = f.readline()
                        if not line:
                            break
                        head += line
                    if not head:
                        break
                    length = [int(ln.split(b":")[1]) for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length")]
                    self.requests.append(head + (f.read(length[0]) if length else b""))
                    reply = self.replies.pop(0)
                    if reply is None:
                        break
                    conn.sendall(reply.removesuffix(HANG_UP))
                    if reply.endswith(HANG_UP):
                        break

    def close(self) -> None:
        self._sock.close()


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[Scripted]:
    srv = Scripted(request.param)
    yield srv
    srv.close()


def _ok(body: bytes, extra: str = "") -> bytes:
    return f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body


CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nETag: \"e\"\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n"


@pytest.mark.parametrize("server", [[_ok(b"one"), CHUNKED, b"HTTP/1.1 204 No Content\r\n\r\n", _ok(b"four")]],
                         indirect=True)
def test_replies_of_every_framing_arrive_whole_on_one_kept_alive_connection(server: Scripted) -> None:
    conn = HttpConnection(f"127.0.0.1:{server.port}", secure=False)
    assert conn.exchange("GET", "/a", None, {"host": "h"}) == (200, {"content-length": "3"}, b"one")
    status, headers, body = conn.exchange("GET", "/b?x=1", None, {"host": "h"})
    assert (status, body, headers["etag"]) == (200, b"hello world", '"e"')
    assert conn.exchange("DELETE", "/c", None, {"host": "h"})[0] == 204
    assert conn.exchange("PUT", "/d", b"payload", {"host": "h"})[2] == b"four"
    conn.close()
    assert server.connections == 1
    assert server.requests[0].startswith(b"GET /a HTTP/1.1\r\nhost: h\r\n")
    assert server.requests[3].endswith(b"content-length: 7\r\naccept-encoding: identity\r\n\r\npayload")


@pytest.mark.parametrize("server", [[b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n", _ok(b"x", "Connection: close\r\n"),
                                     _ok(b"y")]], indirect=True)
def test_head_replies_have_no_body_and_connection_close_reconnects(server: Scripted) -> None:
    conn = HttpConnection(f"127.0.0.1:{server.port}", secure=False)
    status, headers, body = conn.exchange("HEAD", "/k", None, {"host": "h"})
    assert (status, headers["content-length"], body) == (200, "99", b"")
    assert conn.exchange("GET", "/k", None, {"host": "h"})[2] == b"x"  # the server closes after this one
    assert conn.exchange("GET", "/k", None, {"host": "h"})[2] == b"y"
    assert server.connections == 2


@pytest.mark.parametrize("server", [[b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort" + HANG_UP]], indirect=True)
def test_a_reply_cut_short_is_a_protocol_error(server: Scripted) -> None:
    conn = HttpConnection(f"127.0.0.1:{server.port}", secure=False, timeout=5)
    with pytest.raises(HttpProtocolError, match="cut short"):
        conn.exchange("GET", "/k", None, {"host": "h"})


@pytest.mark.parametrize("server", [[_ok(b"first"), None, _ok(b"again")]], indirect=True)
def test_the_s3_client_retries_on_a_fresh_connection_when_a_kept_alive_one_was_closed(server: Scripted) -> None:
    client = S3HttpClient("us-east-1", f"http://127.0.0.1:{server.port}", "k", "s")
    assert client.get_object(Bucket="b", Key="x")["Body"].read() == b"first"
    assert client.get_object(Bucket="b", Key="x")["Body"].read() == b"again"
    assert server.connections == 2


def test_hosts_split_into_name_and_port() -> None:
    assert split_host("s3.us-east-1.amazonaws.com", 443) == ("s3.us-east-1.amazonaws.com", 443)
    assert split_host("127.0.0.1:9000", 80) == ("127.0.0.1", 9000)
    assert split_host("[::1]:9000", 80) == ("::1", 9000)
    assert split_host("[::1]", 443) == ("::1", 443)


def test_opening_on_an_http_endpoint_imports_neither_http_client_nor_ssl(s3_server: Any, s3_uri: str) -> None:
    names = ["http.client", "ssl", "email.parser"]
    assert modules_after_open_and_take(s3_uri, s3_server[2], names) == ([1, 2], [False, False, False])
