"""The suite's own isolation check (tests/isolation.py) finds what a test leaves behind."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests import isolation
from tests.conftest import SESSION


def test_the_session_has_its_own_prefect_home_and_server_port():
    from prefect.settings import get_current_settings

    assert Path(os.environ["PREFECT_HOME"]) == SESSION.prefect_home
    assert Path(get_current_settings().home) == SESSION.prefect_home  # Prefect read it: nothing goes to ~/.prefect
    assert int(os.environ["LAREV_SERVER_PORT"]) != isolation.USER_PORT
    from flows.server import local_port

    assert local_port() == int(os.environ["LAREV_SERVER_PORT"])


def test_a_process_the_suite_started_is_found_and_stopped():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    try:
        assert sleeper.pid in {p.pid for p in isolation.leftover_processes(SESSION)}
        isolation.stop([p for p in isolation.leftover_processes(SESSION) if p.pid == sleeper.pid])
        assert sleeper.wait(timeout=10) is not None
        assert sleeper.pid not in {p.pid for p in isolation.leftover_processes(SESSION)}
    finally:
        sleeper.kill()


def test_an_opened_user_port_and_a_write_under_the_user_prefect_home_are_reported(tmp_path, monkeypatch):
    home = tmp_path / "user-prefect"
    home.mkdir()
    (home / "profiles.toml").write_text("old")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    monkeypatch.setattr(isolation, "USER_PORT", port)
    session = isolation.Session("not-this-session", tmp_path / "own", home, isolation._snapshot(home),
                                user_port_was_open=False)
    assert isolation.user_traces(session) == []
    listener.listen()
    (home / "prefect.db").write_text("new")
    try:
        problems = isolation.user_traces(session)
    finally:
        listener.close()
    assert any(f"port {port} was opened" in p for p in problems)
    assert any("prefect.db" in p and "profiles.toml" not in p for p in problems)


def test_a_session_that_leaves_a_process_fails_and_the_process_is_stopped(tmp_path):
    """The session-finish check itself, on an inner pytest session with this suite's conftest hook."""
    import psutil

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "conftest.py").write_text("from tests.conftest import SESSION, pytest_sessionfinish  # noqa: F401\n")
    pid_file = tmp_path / "pid"
    (tmp_path / "test_leak.py").write_text(
        "import subprocess, sys\n"
        "def test_leaves_a_process_behind():\n"
        "    p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True)\n"
        f"    open({str(pid_file)!r}, 'w').write(str(p.pid))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_HOME", isolation.MARK, "PREFECT_API_URL")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env={**env, "PYTHONPATH": str(root)}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout and "isolation check failed" in done.stdout
    assert f"process still alive: pid {pid_file.read_text()}" in done.stdout
    assert not psutil.pid_exists(int(pid_file.read_text())) or \
        psutil.Process(int(pid_file.read_text())).status() == psutil.STATUS_ZOMBIE
