"""larev as a Prefect service: the work pools, crash detection, the deployments, and where a worker runs a flow.

`larev service setup` (and docker/compose.yaml's setup job) prepares a Prefect server for larev in one go:

1. the work pools of deployments/prefect.yaml (`larev-cpu`, `larev-bench`, `larev-gpu` process pools,
   `larev-gpu-docker`), created when missing;
2. crash detection: an automation that marks a flow run Crashed when its heartbeats stop (a run whose process
   was SIGKILLed, or whose machine died). larev's runs send a heartbeat every `HEARTBEAT_SECONDS`
   (PREFECT_FLOWS_HEARTBEAT_FREQUENCY, set by the CLI and by the deployments' job variables); after
   `within` seconds without one, and without a final state, the run is marked Crashed. A crashed deployment
   run can be retried from the UI or with `prefect flow-run retry <id>`: it is the same flow run, and its
   training steps resume from their last checkpoint;
3. `prefect --no-prompt deploy --all --prefect-file deployments/prefect.yaml`.

`enter_larev_home` is the deployments' pull step: it runs on the worker when a flow run starts, so LAREV_HOME
is read on the worker (not filled in when the deployment is created).
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from larev.errors import ConfigError

#: The work pools deployments/prefect.yaml names, and their worker types.
WORK_POOLS = {"larev-cpu": "process", "larev-bench": "process", "larev-gpu": "process", "larev-gpu-docker": "docker"}
#: Seconds between a running flow's heartbeats (Prefect's minimum is 30).
HEARTBEAT_SECONDS = 30
#: Seconds without a heartbeat after which a running flow run is marked Crashed.
CRASH_AFTER_SECONDS = 90
CRASH_AUTOMATION = "larev: mark unresponsive runs crashed"
PROJECT_DIR = Path(__file__).resolve().parents[1]
PREFECT_FILE = PROJECT_DIR / "deployments" / "prefect.yaml"


def enter_larev_home(directory: str | None = None) -> dict[str, str]:
    """Prefect pull step: change into the larev project on this worker and return it as `directory`.

    The project is `directory` when given, else $LAREV_HOME as this worker has it, else the folder the running
    larev code was installed from. Relative paths of a deployment's parameters (the inbox, `runs/demo-nli`, the
    store) are then relative to it."""
    home = Path(directory or os.environ.get("LAREV_HOME") or PROJECT_DIR).expanduser().resolve()
    if not (home / "flows" / "pipeline.py").is_file():
        raise ConfigError(f"LAREV_HOME={home} is not a larev project (no flows/pipeline.py there): set LAREV_HOME on "
                          "this worker to the larev checkout it should run")
    os.chdir(home)
    return {"directory": str(home)}


def heartbeat_environment() -> None:
    """Make flow runs started by this process send heartbeats (unless the user chose another frequency)."""
    os.environ.setdefault("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", str(HEARTBEAT_SECONDS))


def crash_automation(within_seconds: int = CRASH_AFTER_SECONDS):
    """The automation that marks a running flow run Crashed after `within_seconds` without a heartbeat or a final
    state (Prefect's recipe for zombie runs)."""
    from prefect.automations import Automation
    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import EventTrigger, Posture
    from prefect.events.schemas.events import ResourceSpecification

    if within_seconds < 2 * HEARTBEAT_SECONDS:
        raise ConfigError(f"crash detection after {within_seconds} s would mark healthy runs crashed: heartbeats "
                          f"come every {HEARTBEAT_SECONDS} s; use at least {2 * HEARTBEAT_SECONDS}")
    return Automation(
        name=CRASH_AUTOMATION,
        description=f"A running flow run that sends no heartbeat for {within_seconds} s (its process was killed, "
                    "or its machine died) is marked Crashed; retry it to resume from its checkpoints.",
        trigger=EventTrigger(
            after={"prefect.flow-run.heartbeat"},
            expect={"prefect.flow-run.heartbeat", "prefect.flow-run.Completed", "prefect.flow-run.Failed",
                    "prefect.flow-run.Cancelled", "prefect.flow-run.Crashed"},
            match=ResourceSpecification({"prefect.resource.id": ["prefect.flow-run.*"]}),
            for_each={"prefect.resource.id"}, posture=Posture.Proactive, threshold=1,
            within=timedelta(seconds=within_seconds)),
        actions=[ChangeFlowRunState(state=StateType.CRASHED,
                                    message=f"no heartbeat for {within_seconds} s: the run's process was killed or "
                                            "its machine died; retry the run to resume from its checkpoints")],
    )


def ensure_crash_detection(within_seconds: int = CRASH_AFTER_SECONDS) -> str:
    """Create (or update) the crash-detection automation on the current Prefect API; its id."""
    from prefect.automations import Automation

    wanted = crash_automation(within_seconds)
    try:
        existing = Automation.read(name=CRASH_AUTOMATION)
    except ValueError:  # none by that name
        existing = None
    if existing is None:
        return str(wanted.create().id)
    wanted.id = existing.id
    wanted.update()
    return str(existing.id)


def ensure_work_pools(pools: dict[str, str] | None = None) -> list[str]:
    """Create the work pools that do not exist yet (with the Prefect CLI, which knows each type's job
    template); the names created."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    created = []
    with get_client(sync_client=True) as client:
        for name, kind in (pools or WORK_POOLS).items():
            try:
                client.read_work_pool(name)
                continue
            except ObjectNotFound:
                pass
            _prefect("work-pool", "create", name, "--type", kind)
            created.append(name)
    return created


def deploy_all(prefect_file: Path = PREFECT_FILE) -> None:
    """`prefect --no-prompt deploy --all` of the project's deployments (run from the project folder)."""
    _prefect("--no-prompt", "deploy", "--all", "--prefect-file", str(prefect_file), cwd=prefect_file.parents[1])


def _prefect(*args: str, cwd: Path | None = None) -> None:
    cli = Path(sys.executable).with_name("prefect")
    command = [str(cli) if cli.exists() else "prefect", *args]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise ConfigError(f"`prefect {' '.join(args)}` failed (exit {done.returncode}):\n{tail}")


def setup(*, deploy: bool = True, crash_after: int = CRASH_AFTER_SECONDS) -> dict:
    """Work pools, crash detection and (with `deploy`) every deployment on the current Prefect API."""
    created = ensure_work_pools()
    automation = ensure_crash_detection(crash_after)
    if deploy:
        deploy_all()
    return {"work_pools_created": created, "crash_automation": automation, "deployed": deploy}
