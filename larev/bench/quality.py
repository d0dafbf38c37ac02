"""`larev bench quality`: the machine-readable results of one run of the whole protocol.

results.json = {"scores": {METRIC: {VARIANT: float}}, "accuracy": {METRIC: {VARIANT: float}},
                "separations": {METRIC: {"gold-leaky": ..., "SUM": ...}}, "n_test": int, "seconds": float}
With the stress tests (`larev ftc` / `larev addtext` on the gold rationales), also
"ftc": {"task_model", "extractor", "alpha", "n_examples", "n", "n_extracted", "ftc_delta", "ftc_kl",
        "ftc_wasserstein", "by_case": {CASE: {...}}, "unextracted_reasons": {REASON: int}} and
"addtext": {METRIC: {KIND: {"mean_shift", "rise_share", "n"}, "all": {...}}}.
METRIC is rev, larev (and larev_<ablation>), rora, rq, las. `scores` are the aggregate scores (REV eq. 6, LAREV
eq. 4.4, RORA eq. 10 averaged; RQ's mean accuracy gain; LAS's macro-average), `accuracy` the accuracy of the
evaluator that reads the rationale. An undefined value (LAS with an empty group) is null.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl

from larev.metrics.bootstrap import bootstrap_intervals
from larev.metrics.scores import VARIANTS, separations
from larev.reports import markdown_table, separation_plot, separation_table


def _number(x) -> float | None:
    """JSON has no NaN: an undefined value is null."""
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def quality_results(summary: pl.DataFrame, *, n_test: int, seconds: float | None,
                    intervals: pl.DataFrame | None = None) -> dict:
    """results.json's content from a run's summary (metric, source, score, accuracy_with, ...) and, when given,
    the bootstrap intervals (`larev.metrics.bootstrap.bootstrap_intervals`)."""
    scores: dict[str, dict[str, float | None]] = {}
    accuracy: dict[str, dict[str, float | None]] = {}
    for row in summary.filter(pl.col("source").is_in(VARIANTS)).iter_rows(named=True):
        scores.setdefault(row["metric"], {})[row["source"]] = _number(row["score"])
        accuracy.setdefault(row["metric"], {})[row["source"]] = _number(row["accuracy_with"])
    seps = {m: {k: _number(v) for k, v in separations(summary, m).items()} for m in scores}
    out = {"scores": scores, "accuracy": accuracy, "separations": seps, "n_test": n_test,
           "seconds": None if seconds is None else round(seconds, 1)}
    if intervals is not None:
        out["intervals"] = {}
        for row in intervals.iter_rows(named=True):
            out["intervals"].setdefault(row["metric"], {})[row["quantity"]] = [_number(row["ci_low"]),
                                                                                _number(row["ci_high"])]
    return out


def stress_results(ftc: dict | None, shift: pl.DataFrame | None, *, source: str = "gold") -> dict:
    """results.json's "ftc" entry (from ftc.json of `larev ftc`) and "addtext" section (from the AddText shift
    table) for the rationales of `source`; the keys are absent when the test was not run."""
    out: dict = {}
    if ftc is not None and source in ftc["by_source"]:
        s = ftc["by_source"][source]
        out["ftc"] = {"task_model": ftc["task_model"], "extractor": ftc["config"]["extractor"],
                      "alpha": ftc["config"]["alpha"],
                      **{k: s[k] for k in ("n_examples", "n", "n_extracted", "ftc_delta", "ftc_kl", "ftc_wasserstein",
                                           "by_case", "unextracted_reasons")}}
    if shift is not None:
        from larev.stress.addtext.shift import per_kind

        addtext: dict[str, dict] = {}
        for row in per_kind(shift).filter(pl.col("orig_source") == source).iter_rows(named=True):
            addtext.setdefault(row["metric"], {})[row["addtext_kind"]] = {
                "mean_shift": _number(row["mean_shift"]), "rise_share": _number(row["rise_share"]), "n": int(row["n"])}
        out["addtext"] = addtext
    return out


def _with_interval(estimate, interval) -> str:
    if estimate is None:
        return "nan"
    if not interval or interval[0] is None:
        return f"{estimate:.3f}"
    return f"{estimate:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"


def quality_markdown(summary: pl.DataFrame, results: dict, *, title: str) -> str:
    """The score table (metric x variant), the separations with their sum (with 95 % intervals when the results
    carry them), and the evaluator accuracies."""
    metrics = list(results["scores"])
    ci = results.get("intervals", {})
    wide = pl.DataFrame([{"metric": m, **{v: _with_interval(results["scores"][m].get(v), ci.get(m, {}).get(v))
                                          for v in VARIANTS}} for m in metrics])
    acc = pl.DataFrame([{"metric": m, **{v: results["accuracy"][m].get(v) for v in VARIANTS}} for m in metrics])
    pairs = ["gold-leaky", "gold-gold_leaky", "gold-vacuous", "SUM"]
    seps = pl.DataFrame([{"metric": m, **{p: _with_interval(results["separations"][m].get(p), ci.get(m, {}).get(p))
                                          for p in pairs}} for m in metrics if results["separations"].get(m)])
    seconds = results.get("seconds")
    note = " Brackets: paired bootstrap 95 % intervals over test examples." if ci else ""
    return "\n".join([
        f"# {title}", "",
        f"{results['n_test']} test examples" + (f", {seconds:.0f} s." if seconds is not None else ".") + note, "",
        "## Mean score per rationale variant", "",
        "Nats for REV, LAREV and RORA; accuracy differences for RQ and LAS (LAS: nan = a group is empty).", "",
        markdown_table(wide), "",
        "## Separations: gold minus each degraded variant (all positive = the metric ranks gold first)", "",
        markdown_table(seps) if seps.height else markdown_table(separation_table(summary)), "",
        "## Accuracy of the evaluator that reads the rationale", "", markdown_table(acc), ""])


def write_quality_outputs(run_dir: Path, out: Path, *, title: str, seconds: float | None, n_boot: int,
                          stress_dir: Path | None = None) -> None:
    """results.json / results.md / results.csv (bootstrap intervals) and separations.png in `out` from a finished
    run directory, with the FTC and AddText results of `stress_dir` (a `stress-test` flow's output) when given."""
    summary = pl.read_parquet(run_dir / "summary.parquet")
    scores = pl.read_parquet(run_dir / "scores.parquet")
    n_test = scores.filter(pl.col("source") == "gold")["id"].n_unique()
    intervals = bootstrap_intervals(scores, n_boot=n_boot, seed=0) if n_boot > 0 else None
    results = quality_results(summary, n_test=n_test, seconds=seconds, intervals=intervals)
    markdown = quality_markdown(summary, results, title=title)
    out.mkdir(parents=True, exist_ok=True)
    if stress_dir is not None:
        ftc, shift = stress_dir / "ftc.json", stress_dir / "addtext_shift.parquet"
        results |= stress_results(json.loads(ftc.read_text()) if ftc.exists() else None,
                                  pl.read_parquet(shift) if shift.exists() else None)
        if (stress_dir / "addtext.md").exists():
            markdown += "\n\n" + (stress_dir / "addtext.md").read_text().replace("# AddText", "## AddText", 1)
        if "ftc" in results:
            f = results["ftc"]
            markdown += (f"\n\n## FTC of the gold explanations\n\nTask model {f['task_model']}, {f['extractor']} "
                         f"extractor: counterfactuals for {f['n_extracted']} of {f['n']} (example, case) rows; "
                         + ", ".join(f"{k} {f[k]:.3f}" for k in ("ftc_delta", "ftc_kl", "ftc_wasserstein")
                                     if f[k] is not None) + ".\n")
        if (stress_dir / "addtext.png").exists():
            (out / "addtext.png").write_bytes((stress_dir / "addtext.png").read_bytes())
    (out / "results.json").write_text(json.dumps(results, indent=2))
    (out / "results.md").write_text(markdown)
    if intervals is not None:
        intervals.write_csv(out / "results.csv")
    (out / "separations.png").write_bytes(separation_plot(summary, intervals))
