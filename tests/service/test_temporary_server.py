"""`--server temporary` from the command line, as a user runs it: a real process with a fresh HOME, its own
throwaway Prefect server, and nothing left behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.service

REPO = Path(__file__).resolve().parents[2]


def test_a_command_on_a_temporary_server_leaves_nothing_under_prefect_home(tmp_path):
    """`--server temporary` keeps its database in a throwaway PREFECT_HOME removed when the command ends: a run
    with a fresh HOME (and no PREFECT_HOME) finishes its flow and leaves nothing under ~/.prefect and no throwaway
    home."""
    from larev.methods.leakage_aware.config import LarevConfig
    from larev.methods.rora.config import RoraConfig
    from tests.test_flows import tiny_params

    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    params = tiny_params(tmp_path, run_name="throwaway", larev=LarevConfig(enabled=False),
                         rora=RoraConfig(enabled=False))
    (tmp_path / "params.json").write_text(params.model_dump_json())
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_HOME", "PREFECT_API_URL")}
    env.update(HOME=str(home), TMPDIR=str(tmp))
    log = tmp_path / "command.log"
    with log.open("w") as out:
        code = subprocess.run([sys.executable, "-m", "flows.cli", "run", "--params", str(tmp_path / "params.json"),
                               "--server", "temporary", "--no-progress"], cwd=REPO,
                              env=env, stdout=out, stderr=subprocess.STDOUT, timeout=600).returncode
    assert code == 0, log.read_text()[-2000:]
    assert (tmp_path / "runs" / "throwaway" / "run.json").is_file()  # the flow ran on the temporary server
    assert not [p for p in (home / ".prefect").rglob("*")]  # Prefect makes the folder at import; nothing in it
    assert not list(tmp.glob("larev-prefect-*"))  # the throwaway home is gone with the command
    assert not _processes_started_under(tmp)  # nor any server it started


def _processes_started_under(tmp: Path) -> list[int]:
    """Live processes whose environment names a path under `tmp` (the command's TMPDIR, where its throwaway
    PREFECT_HOME was)."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if str(tmp).encode() in environ.read_bytes():
                found.append(int(environ.parent.name))
        except OSError:  # gone, or not ours to read
            continue
    return found
