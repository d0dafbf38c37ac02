"""The docker/ files agree with the repository: images build from files that exist, and the compose services
start the workers of the work pools that deployments/prefect.yaml uses."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def _copied_sources(dockerfile: Path) -> list[str]:
    sources = []
    for line in dockerfile.read_text().splitlines():
        match = re.match(r"^COPY\s+(?!--)(.+)\s+\S+$", line.strip())
        if match:
            sources += match.group(1).split()
    return sources


def test_dockerfiles_copy_files_that_exist_and_install_the_project():
    for name in ("Dockerfile.cpu", "Dockerfile.cuda"):
        dockerfile = REPO / "docker" / name
        text = dockerfile.read_text()
        missing = [s for s in _copied_sources(dockerfile) if not (REPO / s).exists()]
        assert not missing, f"{name} copies files that do not exist: {missing}"
        assert "-c constraints.txt" in text and 'LAREV_HOME=/opt/larev' in text
        assert re.search(r"^USER\s+larev", text, re.M), f"{name} should not run as root"
    assert "download.pytorch.org/whl/cu" in (REPO / "docker" / "Dockerfile.cuda").read_text()


def test_compose_runs_server_database_object_store_and_a_worker_per_pool():
    compose = yaml.safe_load((REPO / "docker" / "compose.yaml").read_text())
    services = compose["services"]
    assert {"postgres", "prefect-server", "minio", "setup", "cpu-worker", "gpu-worker"} <= set(services)
    assert "postgresql+asyncpg" in services["prefect-server"]["environment"]["PREFECT_API_DATABASE_CONNECTION_URL"]
    for service in services.values():
        build = service.get("build")
        if build:
            assert (REPO / "docker" / build["context"] / build["dockerfile"]).is_file()
    deployments = yaml.safe_load((REPO / "deployments" / "prefect.yaml").read_text())
    pools = {p["name"] for p in deployments["definitions"]["work_pools"].values()}
    started = {s["command"][s["command"].index("--pool") + 1] for s in services.values()
               if isinstance(s.get("command"), list) and "--pool" in s["command"]}
    assert started == {"larev-cpu", "larev-gpu"} and started <= pools
    from flows.service import WORK_POOLS

    setup = services["setup"]["command"][-1]
    assert "larev service setup" in setup and set(WORK_POOLS) == pools  # it creates the pools prefect.yaml uses
    gpu = services["gpu-worker"]["deploy"]["resources"]["reservations"]["devices"][0]
    assert gpu["capabilities"] == ["gpu"] and services["gpu-worker"]["image"] == "larev:cuda"
    worker_env = services["cpu-worker"]["environment"]
    assert worker_env["PREFECT_API_URL"].startswith("http://prefect-server:4200")
    assert worker_env["AWS_ENDPOINT_URL"] == "http://minio:9000"


def test_compose_dask_profile_gives_workers_the_prefect_api_and_the_artifact_store():
    services = yaml.safe_load((REPO / "docker" / "compose.yaml").read_text())["services"]
    scheduler, worker = services["dask-scheduler"], services["dask-worker"]
    assert scheduler["profiles"] == worker["profiles"] == ["dask"]
    assert "8786" in scheduler["command"] and "tcp://dask-scheduler:8786" in worker["command"]
    # a sharded step reports to the Prefect server and reads the models from the shared store
    assert worker["environment"]["PREFECT_API_URL"].startswith("http://prefect-server:4200")
    assert worker["environment"]["AWS_ENDPOINT_URL"] == "http://minio:9000"
