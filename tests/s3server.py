"""A real S3-protocol server on loopback for tests: moto's ThreadedMotoServer on 127.0.0.1, free port.

Use the module-scoped `s3_server` fixture (register it in tests/conftest.py with
`from tests.s3server import s3_server  # noqa: F401`), or `loopback_s3()` as a context manager.
While it runs, the AWS credential variables are set to dummies (and profile/endpoint variables are
removed), so nothing can reach a real AWS account; stores get the endpoint from `storage_options()`
or from `env()`.

moto keeps its S3 state per process, not per server: give every test its own bucket
(`S3Server.new_bucket()`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

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
