"""The test suite leaves nothing behind: its own Prefect home, no server on the user's port, no process alive.

`begin()` runs before anything imports Prefect (tests/conftest.py, at import): it gives the suite a home of its own
(HOME, so `~` of this process and of every process it starts is a fresh temporary folder) and points PREFECT_HOME
at another, gives a `larev --server local` started by a test a free port instead of 4200 (LAREV_SERVER_PORT), and
marks the environment every process the suite starts inherits (LAREV_TEST_SESSION). `leftovers()` runs when the
session finishes (after the session fixtures' teardown): processes still alive that the suite started (marked, or
below this process), a port 4200 opened during the suite, and anything written under the suite's ~/.prefect (a
process that ignored PREFECT_HOME). Only what the suite wrote is checked: the user's own ~/.prefect, where their
server or a benchmark may be writing meanwhile, is not the suite's home. The conftest then fails the suite, naming
them, and stops the processes.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

MARK = "LAREV_TEST_SESSION"
USER_PORT = 4200


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def _snapshot(folder: Path) -> dict[str, tuple[float, int]]:
    """path -> (mtime, size) of every file under `folder` ({} when it does not exist)."""
    if not folder.exists():
        return {}
    out = {}
    for path in folder.rglob("*"):
        try:
            if path.is_file():
                st = path.stat()
                out[str(path)] = (st.st_mtime, st.st_size)
        except OSError:
            continue
    return out


@dataclass
class Session:
    session_id: str
    prefect_home: Path
    user_prefect: Path
    user_prefect_before: dict[str, tuple[float, int]] = field(default_factory=dict)
    user_port_was_open: bool = False


def begin() -> Session:
    """Isolate this test process and everything it starts (see the module docstring)."""
    if "prefect" in sys.modules:
        raise RuntimeError("tests/isolation.py must run before Prefect is imported: its settings would keep the "
                           "user's PREFECT_HOME")
    home = Path(tempfile.mkdtemp(prefix="larev-tests-home-"))
    os.environ["HOME"] = str(home)
    user_prefect = home / ".prefect"  # what a process that ignored PREFECT_HOME would write to
    session = Session(session_id=uuid.uuid4().hex, prefect_home=Path(tempfile.mkdtemp(prefix="larev-tests-prefect-")),
                      user_prefect=user_prefect, user_prefect_before=_snapshot(user_prefect),
                      user_port_was_open=port_open(USER_PORT))
    os.environ["PREFECT_HOME"] = str(session.prefect_home)
    os.environ["LAREV_SERVER_PORT"] = str(free_port())
    os.environ[MARK] = session.session_id
    return session


def remove_homes(session: Session) -> None:
    """Remove the session's own HOME and PREFECT_HOME (after the check has read them)."""
    import shutil

    for folder in (session.user_prefect.parent, session.prefect_home):
        shutil.rmtree(folder, ignore_errors=True)


def _ours(proc, session_id: str, me: int, below_me: set[int]) -> bool:
    import psutil

    if proc.pid == me:
        return False
    if proc.pid in below_me:
        return True
    try:
        return proc.environ().get(MARK) == session_id
    except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess, OSError):
        return False


def _ends_with_us(proc) -> bool:
    """multiprocessing's resource tracker (started by torch / Dask): a child that reads a pipe from this process
    and exits when this process does."""
    import psutil

    try:
        return proc.ppid() == os.getpid() and "multiprocessing.resource_tracker" in " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return True


def stop_prefect_servers() -> None:
    """Stop the temporary Prefect servers this process started (the harness's, `--server temporary`): they would
    stop at interpreter exit, after the check."""
    from flows.server import stop_temporary_servers

    stop_temporary_servers()


def leftover_processes(session: Session) -> list:
    import psutil

    me = psutil.Process()
    below_me = {p.pid for p in me.children(recursive=True)}
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if _ours(proc, session.session_id, me.pid, below_me) and not _ends_with_us(proc):
            found.append(proc)
    return found


def describe(proc) -> str:
    try:
        return f"pid {proc.pid}: {' '.join(proc.cmdline())[:200]}"
    except Exception:  # noqa: BLE001 - gone meanwhile
        return f"pid {proc.pid}"


def leftovers(session: Session) -> list[str]:
    """What the suite left behind, one line each (empty: nothing). Call `stop_prefect_servers()` first at the end
    of a session: the temporary servers of this process would only stop at its exit."""
    return [f"process still alive: {describe(p)}" for p in leftover_processes(session)] + user_traces(session)


def user_traces(session: Session) -> list[str]:
    """Port 4200 opened during the session, files written under the user's Prefect home."""
    problems = []
    if not session.user_port_was_open and port_open(USER_PORT):
        problems.append(f"port {USER_PORT} was opened during the test session and is still open")
    after = _snapshot(session.user_prefect)
    changed = sorted(p for p, stat in after.items() if session.user_prefect_before.get(p) != stat)
    if changed:
        problems.append(f"written under {session.user_prefect}: " + ", ".join(changed[:5])
                        + (" ..." if len(changed) > 5 else ""))
    return problems


def stop(processes: list, timeout: float = 5.0) -> None:
    import psutil

    for proc in processes:
        try:
            proc.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(processes, timeout=timeout)
    for proc in alive:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
