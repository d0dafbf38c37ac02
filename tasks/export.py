"""A run directory a person can open: the headline outputs, and run.json naming every artifact the run used.

run.json names the artifact store relative to the run directory when both lie inside the project (the working
directory the run was started from), e.g. `"artifact_root": "../../.larev/store"`: a project folder that is
copied or moved keeps reading and writing its own store. A store outside the project (another disk, S3) is
recorded as it is. Artifacts are named by their key inside the store; `read_run` resolves both again.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import polars as pl
from prefect import task
from prefect.cache_policies import NONE

from larev.errors import ConfigError
from larev.run_files import RUN_FILE, TEST_SPLIT_COLUMNS, TEST_SPLIT_FILE
from storage import ArtifactStore
from storage.ref import ArtifactRef


def recorded_root(store: ArtifactStore, run_dir: str | Path, project: str | Path | None = None) -> str:
    """How run.json names `store`: relative to `run_dir` when both are inside `project` (default: the working
    directory), else the store's root as it is."""
    if not store.is_local:
        return store.root
    project_dir = Path(project or os.getcwd()).resolve()
    run_path, root = Path(run_dir).resolve(), Path(store.root).resolve()
    if run_path.is_relative_to(project_dir) and root.is_relative_to(project_dir):
        return os.path.relpath(root, run_path)
    return store.root


def resolved_root(recorded: str, run_dir: str | Path) -> str:
    """The store root of a run.json entry: a relative one is resolved against the run directory."""
    if "://" in recorded or os.path.isabs(recorded):
        return recorded
    return str((Path(run_dir).resolve() / recorded).resolve())


def read_run(run_dir: str | Path) -> dict:
    """A finished run's run.json with `artifact_root` resolved and every artifact's URI inside that store."""
    path = Path(run_dir) / RUN_FILE
    if not path.exists():
        raise ConfigError(f"{run_dir} is not a finished larev run (no {RUN_FILE}); run `larev run` first")
    run = json.loads(path.read_text())
    root = resolved_root(run["artifact_root"], run_dir)
    if "://" not in root and not Path(root).is_dir():
        raise ConfigError(f"{path} names the artifact store {run['artifact_root']!r}, which resolves to {root}: "
                          "no such folder. Copy or move the store together with the run directory, or fix "
                          f"artifact_root in {RUN_FILE}")
    store = ArtifactStore(root)
    run["artifact_root"] = store.root
    run["artifacts"] = {k: {**v, "uri": store.uri(v["key"])} for k, v in run["artifacts"].items()}
    return run


def _scores_with_texts(store: ArtifactStore, scores_path: Path, rationales: ArtifactRef, dest: Path) -> None:
    """The score table with each row's rationale text after its source (streamed: a big table is never held
    whole)."""
    with store.local_copy(rationales.key) as texts:
        scores = pl.scan_parquet(scores_path)
        names = scores.collect_schema().names()
        joined = scores.join(pl.scan_parquet(texts).select("id", "source", "rationale"), on=["id", "source"],
                             how="left", maintain_order="left")
        joined.select("id", "source", "rationale", *[c for c in names if c not in ("id", "source")]).sink_parquet(dest)


@task(name="export-run", task_run_name="export-run", cache_policy=NONE, persist_result=False)
def export_run(store: ArtifactStore, run_dir: str, refs: dict[str, ArtifactRef], params: dict,
               backbone_weights: dict | None = None, extra: dict | None = None) -> str:
    """Write scores/summary/report/plot under run_dir, and run.json naming every artifact the run used and (a
    pipeline run) `backbone_weights`, the pretrained weights its evaluators start from (null for the embedded
    model); the scores carry each rationale's text, and a pipeline run's test split goes to test_split.jsonl
    (ids, texts, label, gold rationale: what a user's rationale file answers). `extra`: further run.json entries
    (a pipeline run: `signatures`, the preset each resolved setting came from, the data files' digests).

    Files are written to a temporary name then renamed, so a run directory never holds half a file.
    """
    out = Path(run_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = {"scores": "scores.parquet", "summary": "summary.parquet", "report": "report.md",
             "plot": "separations.png", "ftc": "ftc.parquet", "ftc_summary": "ftc.json",
             "addtext_shift": "addtext_shift.parquet", "addtext_report": "addtext.md", "addtext_plot": "addtext.png",
             "addtext_scores": "addtext_scores.parquet", "degradation_results": "results.json",
             "degradation_plot": "degradations.png"}
    for name, filename in names.items():
        if name in refs:
            tmp = out / f".{filename}.tmp"
            with store.local_copy(refs[name].key) as src:  # checked, and copied without reading it into memory
                if name == "scores" and "rationales" in refs:
                    _scores_with_texts(store, src, refs["rationales"], tmp)
                else:
                    shutil.copyfile(src, tmp)
            tmp.replace(out / filename)
        else:  # left by an earlier export to this directory with other options: it would not match run.json
            (out / filename).unlink(missing_ok=True)
    if "examples" in refs:  # the ids and texts a user's rationale file answers
        tmp = out / f".{TEST_SPLIT_FILE}.tmp"
        test = store.read_parquet(refs["examples"].key).filter(pl.col("split") == "test")
        test.select([c for c in TEST_SPLIT_COLUMNS if c in test.columns]).write_ndjson(tmp)
        tmp.replace(out / TEST_SPLIT_FILE)
    record = {"artifact_root": recorded_root(store, out), "params": params, "backbone_weights": backbone_weights,
              "artifacts": {k: v.model_dump() for k, v in refs.items()}, **(extra or {})}
    tmp = out / f".{RUN_FILE}.tmp"
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True, default=str))
    tmp.replace(out / RUN_FILE)
    return str(out)
