"""A real S3-protocol server on loopback for tests: moto's ThreadedMotoServer on 127.0.0.1, free port.

Use the module-scoped `s3_server` fixture (register it in tests/conftest.py with
`from tests.s3server import s3_server  # noqa: F401`), or `loopback_s3()` as a context manager.
While it runs, the AWS credential variables are set to dummies (and profile/endpoint variables are
removed), so nothing can reach a real AWS account; stores get the endpoint from `storage_options()`
or from `env()`.

moto keeps its S3 state per process, not per server: give every test its own bucket
(`S3Server.new_bucket()`).

`FaultyS3Proxy` sits in front of such a server and answers chosen requests with an S3 error (503 SlowDown by
default), forwarding the others verbatim: fault injection for the client's retries.
"""

from __future__ import annotations

import http.client
import logging
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from moto.server import ThreadedMotoServer

DUMMY_KEY = "testing"
DUMMY_SECRET = "testing"
REGION = "us-east-1"

_CLEARED_ENV = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL",
                "AWS_ENDPOINT_URL_S3", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE")


@dataclass(frozen=True)
class S3Server:
    """A running loopback S3 server and how to reach it."""

    endpoint_url: str

    def storage_options(self) -> dict[str, Any]:
        """`storage_options` for an ArtifactStore (s3fs) pointing at this server."""
        return {"key": DUMMY_KEY, "secret": DUMMY_SECRET,
                "client_kwargs": {"endpoint_url": self.endpoint_url, "region_name": REGION}}

    def env(self) -> dict[str, str]:
        """Environment variables that point AWS clients at this server."""
        return {"AWS_ACCESS_KEY_ID": DUMMY_KEY, "AWS_SECRET_ACCESS_KEY": DUMMY_SECRET,
                "AWS_DEFAULT_REGION": REGION, "AWS_ENDPOINT_URL": self.endpoint_url}

    def client(self) -> Any:
        """A boto3 S3 client for this server."""
        return boto3.client("s3", endpoint_url=self.endpoint_url, region_name=REGION,
                            aws_access_key_id=DUMMY_KEY, aws_secret_access_key=DUMMY_SECRET)

    def new_bucket(self, prefix: str = "larev-test") -> str:
        """Create a bucket with a unique name and return the name."""
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name


@contextmanager
def loopback_s3() -> Iterator[S3Server]:
    """Run a moto S3 server on 127.0.0.1 (a free port) with dummy AWS credentials in the environment."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()  # the port the OS picked for port=0
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(logging.getLogger("werkzeug"), "level", logging.ERROR)  # no per-request log lines
            for name in _CLEARED_ENV:
                mp.delenv(name, raising=False)
            mp.setenv("AWS_ACCESS_KEY_ID", DUMMY_KEY)
            mp.setenv("AWS_SECRET_ACCESS_KEY", DUMMY_SECRET)
            mp.setenv("AWS_DEFAULT_REGION", REGION)
            yield S3Server(endpoint_url=f"http://{host}:{port}")
    finally:
        server.stop()


@pytest.fixture(scope="module")
def s3_server() -> Iterator[S3Server]:
    """A loopback S3 server shared by the tests of one module, stopped after them."""
    with loopback_s3() as server:
        yield server


# --------------------------------------------------------------------------------------- fault injection

#: Headers that belong to one HTTP hop; the proxy sets its own.
_HOP_HEADERS = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
                          "upgrade", "expect"})


@dataclass
class ProxiedRequest:
    """One request the proxy saw: method, path (with query), its headers, and the status it got."""

    method: str
    path: str
    headers: dict[str, str]
    status: int


class FaultyS3Proxy:
    """A loopback HTTP proxy in front of an S3 endpoint that answers chosen requests with an S3 error.

    `fail(request_number, method, path) -> bool` picks the requests to fail (request_number counts from 1);
    a failed request gets `status` with an S3 XML error body (`code`, `message`), every other one is forwarded
    verbatim (method, path, query, headers, body) to `upstream` and its response relayed. `requests` records
    what the proxy saw; point a store at `endpoint_url` (e.g. `S3Server(proxy.endpoint_url).storage_options()`).
    """

    def __init__(self, upstream: str, fail: Any = None, *, status: int = 503, code: str = "SlowDown",
                 message: str = "Please reduce your request rate.") -> None:
        self.upstream = urlsplit(upstream)
        self.fail = fail
        self.status, self.code, self.message = status, code, message
        self.requests: list[ProxiedRequest] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _proxy_handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="faulty-s3-proxy", daemon=True)
        host, port = self._server.server_address[:2]
        self.endpoint_url = f"http://{host}:{port}"

    def __enter__(self) -> "FaultyS3Proxy":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    @property
    def failed(self) -> list[ProxiedRequest]:
        """The requests the proxy answered with its error."""
        return [r for r in self.requests if r.status == self.status]

    def _decide(self, method: str, path: str) -> bool:
        with self._lock:
            number = len(self.requests) + 1
            return bool(self.fail and self.fail(number, method, path))

    def _record(self, request: ProxiedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def error_body(self) -> bytes:
        return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{self.code}</Code><Message>{self.message}'
                f"</Message><RequestId>faulty-proxy</RequestId><HostId>faulty-proxy</HostId></Error>").encode()


def fail_next(k: int) -> Any:
    """A `FaultyS3Proxy.fail` policy: fail the next k requests the proxy sees, forward the rest."""
    left = [k]

    def policy(number: int, method: str, path: str) -> bool:
        if left[0] > 0:
            left[0] -= 1
            return True
        return False

    return policy


def fail_always(number: int, method: str, path: str) -> bool:
    """A `FaultyS3Proxy.fail` policy: fail every request."""
    return True


def _proxy_handler(proxy: FaultyS3Proxy) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a real S3 endpoint

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - no per-request log lines
            pass

        def _read_body(self) -> bytes:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                chunks = []
                while True:
                    size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                            pass
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _handle(self) -> None:
            body = self._read_body()
            headers = {k: v for k, v in self.headers.items()}
            # each request is recorded before its response is written: a client that has its answer must find
            # it in `requests` (recorded after, a test could read the list before the handler thread appended)
            if proxy._decide(self.command, self.path):
                payload = proxy.error_body()
                proxy._record(ProxiedRequest(self.command, self.path, headers, proxy.status))
                self.send_response_only(proxy.status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)
                return
            conn = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=60)
            try:
                conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for name, value in self.headers.items():
                    if name.lower() not in _HOP_HEADERS and name.lower() != "content-length":
                        conn.putheader(name, value)
                if body or self.command in ("PUT", "POST"):
                    conn.putheader("Content-Length", str(len(body)))
                conn.endheaders(body or None)
                resp = conn.getresponse()
                data = resp.read()
                proxy._record(ProxiedRequest(self.command, self.path, headers, resp.status))
                self.send_response_only(resp.status, resp.reason)
                for name, value in resp.getheaders():
                    lower = name.lower()
                    if lower in _HOP_HEADERS or (lower == "content-length" and self.command != "HEAD"):
                        continue
                    self.send_header(name, value)
                if self.command != "HEAD":
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
            finally:
                conn.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

    return Handler
