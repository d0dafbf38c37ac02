"""Copy a run's headline outputs into a plain run directory a person can open."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from prefect import task
from prefect.cache_policies import NONE

from storage import ArtifactStore
from storage.ref import ArtifactRef

RUN_FILE = "run.json"


@task(name="export-run", cache_policy=NONE, persist_result=False)
def export_run(store: ArtifactStore, run_dir: str, refs: dict[str, ArtifactRef], params: dict) -> str:
    """Write scores/summary/report/plot under run_dir, and run.json naming every artifact the run used.

    Files are written to a temporary name then renamed, so a run directory never holds half a file.
    """
    out = Path(run_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = {"scores": "scores.parquet", "summary": "summary.parquet", "report": "report.md",
             "plot": "separations.png", "ftc": "ftc.parquet", "ftc_summary": "ftc.json",
             "addtext_shift": "addtext_shift.parquet", "addtext_report": "addtext.md", "addtext_plot": "addtext.png",
             "addtext_scores": "addtext_scores.parquet"}
    for name, filename in names.items():
        if name in refs:
            tmp = out / f".{filename}.tmp"
            with store.local_copy(refs[name].key) as src:  # checked, and copied without reading it into memory
                shutil.copyfile(src, tmp)
            tmp.replace(out / filename)
        else:  # left by an earlier export to this directory with other options: it would not match run.json
            (out / filename).unlink(missing_ok=True)
    record = {"artifact_root": store.root, "params": params,
              "artifacts": {k: v.model_dump() for k, v in refs.items()}}
    tmp = out / f".{RUN_FILE}.tmp"
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True, default=str))
    tmp.replace(out / RUN_FILE)
    return str(out)
