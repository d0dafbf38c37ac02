"""Which Prefect API a CLI run talks to.

- `auto` (default): PREFECT_API_URL when set, else `local`.
- `local`: a persistent local Prefect server (UI included) at 127.0.0.1:<port>, started in the background
  (`start_local_server`) when it is not already up, so reruns skip the start-up and every run stays browsable
  in the UI. `make demo` uses this; `prefect server stop` ends it. The port is 4200 unless LAREV_SERVER_PORT says
  otherwise; its database and log live in PREFECT_HOME (~/.prefect unless set).
- `temporary`: Prefect's throwaway in-process server, booted in the background while the rest of the program
  imports, with its database in a throwaway PREFECT_HOME that is removed when the command ends: its runs vanish
  with the command and nothing is written to the user's ~/.prefect (~28 s more per command than a running local
  server).
- any http(s) URL: that Prefect API.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

LOCAL_PORT = 4200  # the local server's port unless LAREV_SERVER_PORT is set
PORT_VARIABLE = "LAREV_SERVER_PORT"


def local_port() -> int:
    """The port of the `local` server: LAREV_SERVER_PORT when set, else 4200."""
    value = os.environ.get(PORT_VARIABLE, "").strip()
    if not value:
        return LOCAL_PORT
    if not value.isdigit() or not 0 < int(value) < 65536:
        from larev.errors import ConfigError

        raise ConfigError(f"{PORT_VARIABLE}={value!r} is not a port number (1-65535)")
    return int(value)


def api_is_up(api_url: str, timeout: float = 1.0) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url.rstrip('/')}/health", timeout=timeout) as response:
            return response.status == 200
    except OSError:
        return False


def prefect_home() -> Path:
    from prefect.settings import get_current_settings

    return Path(os.environ.get("PREFECT_HOME") or get_current_settings().home).expanduser()


def start_local_server(port: int | None = None, wait_s: float = 90.0) -> str | None:
    """Start (or find) a background Prefect server on loopback (port: `local_port()` when None); its API URL, or
    None when it did not come up.

    The server is `prefect server start` in a session of its own, its output appended to
    PREFECT_HOME/larev-server.log and its pid in PREFECT_HOME/server.pid, so `prefect server stop` ends it.
    Not `--background`: Prefect 3.8 pipes that server's output to the starting process, which exits, so the
    server died of a broken pipe the first time it logged an error (a busy SQLite's 'database is locked')."""
    port = local_port() if port is None else port
    api_url = f"http://127.0.0.1:{port}/api"
    if api_is_up(api_url):
        return api_url
    home = prefect_home()
    home.mkdir(parents=True, exist_ok=True)
    pid_file, log_file = home / "server.pid", home / "larev-server.log"
    if pid_file.exists() and not _pid_alive(pid_file):
        pid_file.unlink(missing_ok=True)  # left by a server that died
    prefect_cli = Path(sys.executable).with_name("prefect")
    command = [str(prefect_cli) if prefect_cli.exists() else "prefect", "server", "start", "--host", "127.0.0.1",
               "--port", str(port), "--analytics-off"]
    try:
        with open(log_file, "ab") as log:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
    except OSError as exc:
        print(f"`prefect server start` failed: {exc}", file=sys.stderr)
        return None
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if api_is_up(api_url):
            pid_file.write_text(str(process.pid))
            _with_crash_detection(api_url)
            return api_url
        if process.poll() is not None:  # it said why in its log; waiting for it helps nobody
            tail = log_file.read_text(errors="replace").strip().splitlines()[-5:]
            print(f"`prefect server start` exited with code {process.returncode}: " + " | ".join(tail),
                  file=sys.stderr)
            return None
        time.sleep(0.25)
    process.terminate()
    return None


def _pid_alive(pid_file: Path) -> bool:
    try:
        os.kill(int(pid_file.read_text().strip()), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _with_crash_detection(api_url: str) -> None:
    """Give a server this process started the automation that marks killed runs Crashed (flows/service.py).

    Prefect's settings were built when it was imported, before PREFECT_API_URL named this server: the client
    must be pointed at it through temporary_settings (setting the variable alone sent the automation to a
    temporary server of its own)."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.service import ensure_crash_detection

    try:
        with temporary_settings(updates={PREFECT_API_URL: api_url}):
            ensure_crash_detection()
    except Exception as exc:  # noqa: BLE001 - a convenience: the run goes on without it
        print(f"warning: no crash detection on {api_url}: {exc}", file=sys.stderr)


EPHEMERAL_START_S = 120  # seconds the temporary server may take to answer its health check


def boot_ephemeral_api() -> threading.Thread:
    """Boot Prefect's temporary server in a background thread; join it before the first flow runs."""

    def boot():
        try:
            from prefect.server.api.server import SubprocessASGIServer

            # a fresh database's migrations can outlast Prefect's default wait on a slow machine; the flow's own
            # client would then start a second server on the same port (its failed bind prints a traceback) and
            # the first, no longer tracked, would outlive the command
            SubprocessASGIServer().start(timeout=EPHEMERAL_START_S)
        except Exception:  # the flow then starts its own temporary server
            pass

    thread = threading.Thread(target=boot, name="prefect-api-boot", daemon=True)
    thread.start()
    return thread


def throwaway_home() -> Path:
    """Point this process's Prefect at a new, empty PREFECT_HOME, removed when the process exits (its temporary
    servers stopped first, so none writes there afterwards); returns it. The settings Prefect built when it was
    imported are rebuilt, so its database is made there."""
    import atexit
    import shutil
    import tempfile

    import prefect.context

    home = Path(tempfile.mkdtemp(prefix="larev-prefect-"))
    os.environ["PREFECT_HOME"] = str(home)
    prefect.context.refresh_global_settings_context()

    def remove() -> None:
        stop_temporary_servers()
        shutil.rmtree(home, ignore_errors=True)

    atexit.register(remove)
    return home


def stop_temporary_servers() -> None:
    """Stop the temporary Prefect servers this process started (they would otherwise stop at interpreter exit)."""
    module = sys.modules.get("prefect.server.api.server")
    if module is None:
        return
    for server in list(getattr(module.SubprocessASGIServer, "_instances", {}).values()):
        try:
            server.stop()
        except Exception:  # noqa: BLE001 - stopping at exit: nothing left to report to
            pass


def choose_api(server: str) -> tuple[str, threading.Thread | None]:
    """Set up the Prefect API for this process; returns a description and a boot thread to join (or None)."""
    if server == "auto" and os.environ.get("PREFECT_API_URL"):
        return os.environ["PREFECT_API_URL"], None
    if server == "temporary":
        throwaway_home()
        return "temporary local Prefect server", boot_ephemeral_api()
    if server in ("auto", "local"):
        api_url = start_local_server()
        if api_url is None:
            print(f"warning: could not start a Prefect server on 127.0.0.1:{local_port()}; using a temporary one",
                  file=sys.stderr)
            return "temporary local Prefect server", boot_ephemeral_api()
        os.environ["PREFECT_API_URL"] = api_url
        return f"Prefect server {api_url} (UI: {api_url.removesuffix('/api')})", None
    os.environ["PREFECT_API_URL"] = server
    return server, None
