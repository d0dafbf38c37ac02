"""StepRunner.map_chains: independent chains of cached steps, one after another or at once through Prefect's
thread-pool task runner, with the step records grouped by chain either way."""

from __future__ import annotations

import threading

import pytest
from prefect import flow

from larev.errors import ConfigError
from storage import ArtifactStore
from tasks.runtime.cache import larev_task
from tasks.runtime.outputs import put_bytes
from tasks.runtime.runner import StepRunner

pytestmark = pytest.mark.usefixtures("prefect_harness")
BARRIER: dict[str, threading.Barrier] = {}


@larev_task("chain-step")
def chain_step(store: ArtifactStore, source: str, stage: int, barrier: str = "") -> str:
    """A cached step; with `barrier`, it waits until every chain has reached the same point (it can only pass
    when the chains run at the same time)."""
    if barrier:
        BARRIER[barrier].wait()  # each test's barrier carries its timeout
    return put_bytes(store, f"{source}-{stage}.txt", f"{source}:{stage}".encode()).key


def run_chains(root: str, concurrent: int, barrier: str = "") -> tuple[list[str], list[tuple[str, bool]]]:
    @flow(name="larev-test-chains")
    def chains_flow():
        steps = StepRunner(ArtifactStore(root), concurrent_chains=concurrent)

        def chain(source: str) -> str:
            first = steps.run(chain_step, source, 1, barrier, step_label=f"first-{source}")
            return steps.run(chain_step, source, 2, step_label=f"second-{source}") + "|" + first

        out = steps.map_chains(chain, ["gold", "leaky", "vacuous"], name="test-chain")
        return out, [(r.step, r.cached) for r in steps.records]

    return chains_flow()


def test_chains_run_at_once_on_the_task_runner_and_records_stay_grouped(tmp_path):
    sources = ("gold", "leaky", "vacuous")
    BARRIER["together"] = threading.Barrier(3, timeout=20)
    results, records = run_chains(str(tmp_path), concurrent=3, barrier="together")
    # all three passed a barrier that needs all three at once; each chain's result comes back in item order
    assert [tuple(r.rsplit("/", 1)[-1] for r in result.split("|")) for result in results] == [
        (f"{s}-2.txt", f"{s}-1.txt") for s in sources]
    assert records == [(f"{stage}-{s}", False) for s in sources for stage in ("first", "second")]
    # the same chains one at a time: second steps come from the cache (the barrier-less first steps are new keys)
    again, records = run_chains(str(tmp_path), concurrent=1)
    assert [r.split("|")[0] for r in again] == [r.split("|")[0] for r in results]
    assert records == [(f"{stage}-{s}", stage == "second") for s in sources for stage in ("first", "second")]


def test_one_at_a_time_chains_cannot_meet_at_a_barrier(tmp_path):
    BARRIER["apart"] = threading.Barrier(2, timeout=1)
    with pytest.raises(threading.BrokenBarrierError):
        run_chains_two(str(tmp_path))


def run_chains_two(root: str):
    @flow(name="larev-test-chains-sequential")
    def sequential():
        steps = StepRunner(ArtifactStore(root), concurrent_chains=1)
        return steps.map_chains(lambda s: steps.run(chain_step, s, 1, "apart"), ["gold", "leaky"], name="apart")

    return sequential()


def test_a_failed_chain_fails_the_map_and_a_bad_width_is_refused(tmp_path):
    @flow(name="larev-test-chains-failing")
    def failing():
        steps = StepRunner(ArtifactStore(str(tmp_path)), concurrent_chains=2)

        def chain(source: str) -> str:
            if source == "leaky":
                raise ValueError("leaky chain broke")
            return steps.run(chain_step, source, 1)

        return steps.map_chains(chain, ["gold", "leaky"], name="failing")

    with pytest.raises(ValueError, match="leaky chain broke"):
        failing()
    with pytest.raises(ConfigError, match="concurrent_chains must be at least 1"):
        StepRunner(ArtifactStore(str(tmp_path)), concurrent_chains=0)


@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_stores_result_block_is_written_once_then_read_until_its_data_changes(tmp_path, request, where):
    """Every pipeline run asks for its store's result block: the first saves it, later ones only read it (the
    document's `updated` time stays; on S3 too, whose block carries nested settings), and a block whose data changed
    under the same name is saved again."""
    from prefect.client.orchestration import get_client

    from tasks.runtime.results import result_storage_for, saved_block

    if where == "s3":
        server = request.getfixturevalue("s3_server")
        store = ArtifactStore(f"s3://{server.new_bucket()}/runs", storage_options=server.storage_options())
    else:
        store = ArtifactStore(tmp_path / "store")
    first = result_storage_for(store)
    with get_client(sync_client=True) as client:
        written = client.read_block_document(first._block_document_id)
        again = result_storage_for(store)
        assert again._block_document_id == first._block_document_id
        assert client.read_block_document(first._block_document_id).updated == written.updated
        elsewhere = first.basepath + "-elsewhere"
        moved = saved_block(type(first)(**{**first.model_dump(include=set(type(first).model_fields)),
                                           "basepath": elsewhere}), written.name)
        assert moved._block_document_id == first._block_document_id
        assert client.read_block_document(first._block_document_id).data["basepath"] == elsewhere
