"""A loopback HTTP server speaking the Gemini generateContent wire format, for the real google-genai client.

`replies` is a queue of (status, text or None, delay_s) served first; when it is empty, `responder(request)`
(if set) decides, else the reply is 200 'ok'. `requests` records every request (path, model, key, JSON body);
`prompt(i)` is the text of request i. Use the `gemini` fixture (import it into the test module).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from larev.llm import GeminiGenerator

KEY = "test-key-0123456789"
PATH = re.compile(r"^/v1(beta)?/models/([^/:]+):generateContent$")

Reply = tuple[int, str | None, float]


class FakeGemini:
    """A loopback generateContent server (see the module doc)."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[dict] = []
        self.responder: Callable[[dict], Reply] | None = None
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                match = PATH.match(self.path)
                request = {"path": self.path, "model": match and match.group(2),
                           "key": self.headers.get("x-goog-api-key"), "body": json.loads(body or b"{}")}
                with fake.lock:
                    fake.requests.append(request)
                    queued = fake.replies.pop(0) if fake.replies else None
                if queued is not None:
                    status, text, delay = queued
                elif fake.responder is not None:
                    status, text, delay = fake.responder(request)
                else:
                    status, text, delay = 200, "ok", 0.0
                if match is None:
                    status, text = 404, None
                time.sleep(delay)
                if status == 200:
                    payload = {"candidates": [{"content": {"parts": [{"text": text}], "role": "model"},
                                               "finishReason": "STOP"}]}
                else:
                    payload = {"error": {"code": status, "message": f"status {status}", "status": "ERROR"}}
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    pass

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02},
                                       daemon=True)

    @staticmethod
    def prompt_of(request: dict) -> str:
        """The prompt text of a recorded request."""
        return request["body"]["contents"][0]["parts"][0]["text"]

    def prompt(self, i: int) -> str:
        return self.prompt_of(self.requests[i])

    def client(self, **kwargs) -> GeminiGenerator:
        kwargs.setdefault("api_key", KEY)
        kwargs.setdefault("sleep", lambda s: None)
        return GeminiGenerator(kwargs.pop("model", "gemini-test"), base_url=self.url, **kwargs)


@pytest.fixture
def gemini(monkeypatch) -> Iterator[FakeGemini]:
    """A running FakeGemini, shut down after the test."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    fake = FakeGemini()
    fake.thread.start()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()
