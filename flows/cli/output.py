"""What the `larev` commands print: a run's score table, separations, notes and step timings; FTC summaries."""

from __future__ import annotations

import json
from pathlib import Path


def print_verdict(run_dir: str, steps=None, seconds: float | None = None, list_steps: bool = False) -> None:
    """What `larev run` and `larev score` print when their flow ends, short enough to read at a glance: the gold
    rationale against each other variant per metric with its interval and a word, one line on the steps run and
    cached, and where the full tables are (`print_results`, report.md)."""
    import polars as pl

    from larev.metrics.bootstrap import bootstrap_intervals
    from larev.reports import verdict_lines, verdict_table

    scores = pl.read_parquet(Path(run_dir) / "scores.parquet")
    summary = pl.read_parquet(Path(run_dir) / "summary.parquet")
    lines = verdict_lines(verdict_table(bootstrap_intervals(scores, n_boot=1000, seed=0), summary))
    print("\n" + "\n".join(lines if lines else source_lines(summary)))
    if steps:
        print_steps(steps, listed=list_steps)
    done = f" in {seconds:.0f} s" if seconds is not None else ""
    print(f"Finished{done}. Full tables, signatures and notes: larev show {run_dir} (--report: report.md); "
          f"outputs in {run_dir}")


def source_lines(summary, most: int = 8) -> list[str]:
    """A scored file's sources at a glance (no gold among them, so no verdict): each source's score per metric, at
    most `most` sources, and how to rank them against the run's own."""
    import polars as pl

    from larev.generate.degradations import is_degraded

    summary = summary.filter(~is_degraded(pl.col("source")))  # a source's degradations: its table 5.8 lines
    wide = summary.pivot(on="metric", index="source", values="score").sort("source")
    metrics = [c for c in wide.columns if c != "source"]
    width = max([len(m) for m in metrics] + [7]) + 1
    name_width = max([len(s) for s in wide["source"]] + [6]) + 1
    lines = ["Scores per source (the metric's mean over the file's rationales):",
             "source".ljust(name_width) + "".join(m.ljust(width) for m in metrics)]
    for row in wide.head(most).iter_rows(named=True):
        lines.append(row["source"].ljust(name_width) + "".join(
            ("-" if row[m] is None else f"{row[m]:+.3f}").ljust(width) for m in metrics))
    if wide.height > most:
        lines.append(f"... and {wide.height - most} more sources")
    n = summary.filter(pl.col("source").is_in(wide["source"].head(most).implode()))["n"].max()
    lines.append(f"On {n} rationales each at most. Against the run's own: larev compare, larev leaderboard.")
    return lines


def print_steps(steps, listed: bool = False) -> None:
    """One line: how many steps ran and came from cache; with `listed`, every step with its time."""
    from tasks.runtime.runner import StepRecord

    ran = sum(not s.cached for s in steps if isinstance(s, StepRecord))
    print(f"Steps: {ran} ran, {len(steps) - ran} cached" + ("" if listed else " (--steps lists them)"))
    if listed:
        width = max([20, *(len(s.step) for s in steps)])
        for s in steps:
            where = f"  on {s.where}" if getattr(s, "where", "local") != "local" else ""
            print(f"  {s.step:<{width}} {'cached' if s.cached else 'ran':<7} {s.seconds:7.1f}s{where}")


def print_results(run_dir: str, steps=None, seconds: float | None = None) -> None:
    import polars as pl

    from larev.reports import diagnose, reading_sentences, separation_table, variant_table

    summary = pl.read_parquet(Path(run_dir) / "summary.parquet")
    signatures = (dict(summary.select("metric", "signature").unique().sort("metric").iter_rows())
                  if "signature" in summary.columns else {})
    summary = summary.drop("signature", strict=False)
    with pl.Config(tbl_rows=80, tbl_cols=-1, tbl_hide_dataframe_shape=True, float_precision=3,
                   tbl_hide_column_data_types=True, tbl_width_chars=160):
        variants = variant_table(summary)
        if variants.height:
            print("\nWhat each metric says of each rationale variant (score_vs_empty: minus its score with no "
                  "rationale; reads: the evaluator's accuracy is outside chance; report.md explains each column):")
            print(variants)
            for sentence in reading_sentences(summary):
                print(f"  {sentence}")
        print("\nScores (nats for REV, LAREV, RORA; accuracy differences for RQ, LAS; accuracy of the evaluator with "
              "/ without the rationale):")
        print(summary)
        seps = separation_table(summary)
        if seps.width > 1:
            print("\nSeparations (gold minus degraded; all positive is what a good metric shows):")
            print(seps)
    if signatures:
        print("\nSignatures (what computed each metric's scores; only scores under one signature compare):")
        width = max(len(m) for m in signatures)
        for metric, signature in signatures.items():
            print(f"  {metric:<{width}}  {signature or 'unsigned'}")
    for note in diagnose(summary):
        print(f"\nNote: {note}")
    if steps:
        print()
        print_steps(steps, listed=True)
    written = [name for name in ("scores.parquet", "summary.parquet", "report.md", "separations.png",
                                 "test_split.jsonl", "run.json") if (Path(run_dir) / name).exists()]
    print(f"\nOutputs in {run_dir}: {', '.join(written)}")
    if seconds is not None:
        print(f"Finished in {seconds:.1f}s")


def print_ftc(path: Path) -> None:
    """The FTC summary of ftc.json, one block per rationale source."""
    payload = json.loads(path.read_text())
    print(f"FTC (task model: {payload['task_model']}, extractor: {payload['config']['extractor']}, "
          f"alpha {payload['config']['alpha']})")

    def fig(x):
        return "   n/a" if x is None else f"{x:6.3f}"

    for source, s in payload["by_source"].items():
        print(f"\n{source}: {s['n_examples']} explanations, counterfactuals built for {s['n_extracted']} of "
              f"{s['n']} (example, case) rows")
        print(f"  {'case':<6} {'n':>6} {'built':>6} {'delta':>6} {'K':>6} {'W':>6}")
        overall = {"n": s["n"], "n_extracted": s["n_extracted"],
                   **{f: s[f] for f in ("ftc_delta", "ftc_kl", "ftc_wasserstein")}}
        for case, c in {**s["by_case"], "all": overall}.items():
            print(f"  {case:<6} {c['n']:>6} {c['n_extracted']:>6} {fig(c['ftc_delta'])} {fig(c['ftc_kl'])} "
                  f"{fig(c['ftc_wasserstein'])}")
        reasons = list(s["unextracted_reasons"].items())[:4]
        if reasons:
            print("  no counterfactual: " + "; ".join(f"{reason} ({n})" for reason, n in reasons))


def print_human(results: dict, out: Path, seconds: float | None = None) -> None:
    """The headline of `larev bench human`: per metric the Spearman correlation with the human 'new and
    supporting' share and the acceptability pairwise accuracy beside its baselines."""
    def fig(x):
        return "  n/a" if x is None else f"{x:5.3f}"

    fine, accept = results.get("fine_grained", {}), results.get("acceptability", {})
    if fine:
        print("\nAgreement with people's 'new and supporting' judgements (fine-grained):")
        print(f"  {'metric':<8} {'spearman':>8}  {'95% interval':<16} {'pairwise':>8}")
        for metric, v in fine.items():
            lo, hi = v["spearman_ci"]
            print(f"  {metric:<8} {fig(v['spearman']):>8}  [{fig(lo)}, {fig(hi)}] {fig(v['pairwise']):>8}")
    if accept:
        print("\nPredicting acceptability (pairwise accuracy; gpt3_nll, length and chance are baselines):")
        for name, v in accept.items():
            lo, hi = v["ci"]
            print(f"  {name:<9} {fig(v['pairwise_accuracy'])}  [{fig(lo)}, {fig(hi)}]  ({v['pairs']} pairs)")
    print(f"\nHuman agreement in {out}: human.json, human.md, human.png, skipped.csv"
          + (f" ({seconds:.0f} s)" if seconds is not None else ""))
