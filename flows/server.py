"""Which Prefect API a CLI run talks to.

- `auto` (default): PREFECT_API_URL when set, else Prefect's temporary local server, booted in the background
  while the rest of the program imports (it takes several seconds).
- `local`: a persistent local Prefect server (UI included) at 127.0.0.1:<port>, started in the background
  with `prefect server start --background` when it is not already up, so reruns skip the start-up and the
  runs stay browsable in the UI. `make demo` uses this; `prefect server stop` ends it.
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

LOCAL_PORT = 4200


def api_is_up(api_url: str, timeout: float = 1.0) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url.rstrip('/')}/health", timeout=timeout) as response:
            return response.status == 200
    except OSError:
        return False


def start_local_server(port: int = LOCAL_PORT, wait_s: float = 90.0) -> str | None:
    """Start (or find) a background Prefect server on loopback; its API URL, or None when it did not come up."""
    api_url = f"http://127.0.0.1:{port}/api"
    if api_is_up(api_url):
        return api_url
    prefect_cli = Path(sys.executable).with_name("prefect")
    command = [str(prefect_cli) if prefect_cli.exists() else "prefect", "server", "start", "--background",
               "--host", "127.0.0.1", "--port", str(port), "--analytics-off"]
    try:
        done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=wait_s)
        if done.returncode != 0 and "already running" in done.stdout + done.stderr:
            # a server.pid left by a server that died (its API is down): `prefect server stop` removes it
            subprocess.run([*command[:2], "stop"], check=False, capture_output=True, timeout=wait_s)
            done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=wait_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:  # it said why; waiting for an API that will not come up helps nobody
        print(f"`prefect server start` failed: {(done.stderr or done.stdout).strip()[-500:]}", file=sys.stderr)
        return None
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if api_is_up(api_url):
            _with_crash_detection(api_url)
            return api_url
        time.sleep(0.25)
    return None


def _with_crash_detection(api_url: str) -> None:
    """Give a server this process started the automation that marks killed runs Crashed (flows/service.py)."""
    from flows.service import ensure_crash_detection

    saved = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = api_url
    try:
        ensure_crash_detection()
    except Exception as exc:  # noqa: BLE001 - a convenience: the run goes on without it
        print(f"warning: no crash detection on {api_url}: {exc}", file=sys.stderr)
    finally:
        if saved is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = saved


def boot_ephemeral_api() -> threading.Thread:
    """Boot Prefect's temporary server in a background thread; join it before the first flow runs."""

    def boot():
        try:
            from prefect.server.api.server import SubprocessASGIServer

            SubprocessASGIServer().start()
        except Exception:  # the flow then starts its own temporary server
            pass

    thread = threading.Thread(target=boot, name="prefect-api-boot", daemon=True)
    thread.start()
    return thread


def choose_api(server: str) -> tuple[str, threading.Thread | None]:
    """Set up the Prefect API for this process; returns a description and a boot thread to join (or None)."""
    if server == "auto":
        if os.environ.get("PREFECT_API_URL"):
            return os.environ["PREFECT_API_URL"], None
        return "temporary local Prefect server", boot_ephemeral_api()
    if server == "local":
        api_url = start_local_server()
        if api_url is None:
            print(f"warning: could not start a Prefect server on 127.0.0.1:{LOCAL_PORT}; using a temporary one",
                  file=sys.stderr)
            return "temporary local Prefect server", boot_ephemeral_api()
        os.environ["PREFECT_API_URL"] = api_url
        return f"Prefect server {api_url} (UI: {api_url.removesuffix('/api')})", None
    os.environ["PREFECT_API_URL"] = server
    return server, None
