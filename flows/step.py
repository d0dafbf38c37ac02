"""One larev step, run where its deployment's work pool puts it: the GPU stages of a pipeline run, sent there by
`StepRunner` (tasks/runtime/runner.py) through `run_deployment` when the pipeline has a `gpu_deployment`.

The step writes its output and its cache record into the artifact store named in its arguments; the calling
flow then reads both from there (tasks/runtime/remote.py explains the protocol).
"""

from __future__ import annotations

from typing import Any

from prefect import flow
from pydantic import BaseModel, ConfigDict, Field

from storage import ArtifactStore
from tasks.runtime.runner import StepRunner
from tasks.runtime.remote import decode_arguments, encode_arguments, resolve_task


class StepParams(BaseModel):
    """Which larev step to run and its arguments (JSON, as tasks/runtime/remote.py encodes them)."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(..., pattern=r"^tasks\.[a-z_]+:[a-z_]+$",
                      description="the step's task as 'MODULE:FUNCTION', e.g. 'tasks.rev:train_model'")
    label: str = Field("step", description="the step's name in the calling run (names this flow run)")
    arguments: dict[str, Any] = Field(default_factory=dict,
                                      description="the task's arguments; the artifact store is given by its root")


@flow(name="larev-step", flow_run_name="{params.label}", log_prints=True)
def larev_step(params: StepParams) -> dict[str, Any]:
    """Run one larev step against the artifact store in its arguments; returns the step's result (JSON)."""
    task_obj = resolve_task(params.task)
    arguments = decode_arguments(task_obj, params.arguments)
    store = next((v for v in arguments.values() if isinstance(v, ArtifactStore)), None)
    if store is None:
        raise ValueError(f"step {params.task} was sent without its artifact store")
    steps = StepRunner(store)
    result = steps.run(task_obj, step_label=params.label, **arguments)
    return {"result": encode_arguments(task_obj, {"return": result}).get("return"),
            "cached": steps.records[-1].cached}
