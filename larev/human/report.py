"""human.json / human.md / human.png: per metric, how its scores agree with the human judgements of one
annotation file (larev/human/annotations.py), beside the baselines a user would reach for.

human.json = {"fine_grained": {METRIC: {"spearman", "spearman_ci", "kendall", "pairwise", "pairwise_ci", "pairs",
                                        "n", "by_source": {SOURCE: {"metric", "human", "n"}},
                                        "pairwise_minus_rev": {"difference", "ci", "pairs"}}},
              "acceptability": {METRIC_OR_BASELINE: {"pairwise_accuracy", "ci", "pairs",
                                                     "minus_rev": {"difference", "ci", "pairs"}}},
              "files": {FILE: {"kind", "task", "instances", "explanations", "skipped", "notes", "seconds"}}}
Baselines (acceptability): gpt3_nll (the generator's own likelihood, lower = better: the paper's baseline),
length (longer = better) and chance (a seeded random score). `minus_rev` / `pairwise_minus_rev`: the scorer's
pairwise accuracy minus REV's with a paired interval (the same instances resampled for both; REV is the reference
method a new metric has to beat). Scores are the metrics' pointwise scores (REV eq. 6,
LAREV eq. 4.4, RORA eq. 10, RQ / LAS: the accuracy gain of the simulator on that rationale).
"""

from __future__ import annotations


import numpy as np
import polars as pl

from larev.human.agreement import (kendall_tau_b, paired_pairwise_difference, pairwise_accuracy, pairwise_credits,
                                   spearman, spearman_interval)
from larev.human.annotations import Annotations
from larev.reports import json_number, markdown_table, png_bytes, with_interval

METRIC_ORDER = ("rev", "larev", "rora", "rq", "las")
REFERENCE = "rev"  # every other scorer's pairwise agreement is also reported minus this one's, paired
BASELINES = ("gpt3_nll", "length", "chance")


def judged_scores(judgements: pl.DataFrame, scores: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Per metric (METRIC_ORDER first), the judgements of each annotated (id, source) with the metric's pointwise
    `score` beside them (explanations the metric did not score left out)."""
    part = scores.filter(pl.col("source").is_in(judgements["source"].unique().implode())).select(
        "metric", "id", "source", "score")
    metrics = sorted(part["metric"].unique().to_list(),
                     key=lambda m: (METRIC_ORDER.index(m) if m in METRIC_ORDER else len(METRIC_ORDER), m))
    return {m: judgements.join(part.filter(pl.col("metric") == m).drop("metric"), on=["id", "source"],
                               how="inner").drop_nulls("score") for m in metrics}


def fine_grained_agreement(annotations: Annotations, scores: pl.DataFrame, *, n_boot: int = 1000,
                           seed: int = 0) -> dict:
    """Per metric: Spearman (with its interval) and Kendall between the score and the human share of 'new and
    supporting' judgements over every explanation, within-instance pairwise agreement, and the means per source."""
    out, credits_of = {}, {}
    for metric, frame in judged_scores(annotations.judgements.select("id", "source", "human"), scores).items():
        if frame.height < 2:
            continue
        credits = credits_of[metric] = pairwise_credits(frame, "score", "human")
        pairwise = pairwise_accuracy(credits, n_boot=n_boot, seed=seed)
        by_source = {r["source"]: {"metric": json_number(r["metric"]), "human": json_number(r["human"]),
                                   "n": r["n"]}
                     for r in frame.group_by("source", maintain_order=True)
                     .agg(metric=pl.col("score").mean(), human=pl.col("human").mean(), n=pl.len())
                     .sort("source").iter_rows(named=True)}
        out[metric] = {
            "spearman": json_number(spearman(frame["score"], frame["human"])),
            "spearman_ci": [json_number(v) for v in spearman_interval(frame, "score", "human", n_boot=n_boot,
                                                                  seed=seed)],
            "kendall": json_number(kendall_tau_b(frame["score"], frame["human"])),
            "pairwise": json_number(pairwise["accuracy"]), "pairwise_ci": [json_number(v) for v in pairwise["ci"]],
            "pairs": pairwise["pairs"], "n": frame.height, "by_source": by_source}
    add_minus_reference(out, credits_of, "pairwise_minus_rev", n_boot, seed)
    return out


def add_minus_reference(out: dict, credits_of: dict[str, pl.DataFrame], key: str, n_boot: int, seed: int) -> None:
    """Under `key` in every entry of `out` but REFERENCE's: `paired_pairwise_difference` of its credits against
    REFERENCE's, as human.json stores it (nothing when REFERENCE was not scored)."""
    if REFERENCE not in credits_of:
        return
    for name, entry in out.items():
        if name != REFERENCE:
            result = paired_pairwise_difference(credits_of[name], credits_of[REFERENCE], n_boot=n_boot, seed=seed)
            entry[key] = {"difference": json_number(result["difference"]),
                          "ci": [json_number(v) for v in result["ci"]], "pairs": result["pairs"]}


def acceptability_agreement(annotations: Annotations, scores: pl.DataFrame, *, n_boot: int = 1000,
                            seed: int = 0) -> dict:
    """Per metric and baseline: within-instance pairwise accuracy on explanations with different acceptable
    votes (does the one more people accepted score higher?), with an interval over instances."""
    judged = annotations.judgements.select("id", "source", "votes", "gpt3_nll", "length")
    candidates = judged_scores(judged, scores)
    if judged["gpt3_nll"].null_count() < judged.height:
        candidates["gpt3_nll"] = judged.drop_nulls("gpt3_nll").with_columns(score=-pl.col("gpt3_nll"))
    candidates["length"] = judged.with_columns(score=pl.col("length"))
    rng = np.random.default_rng(seed + 1)
    candidates["chance"] = judged.with_columns(score=pl.Series(rng.random(judged.height)))
    out, credits_of = {}, {}
    for name, frame in candidates.items():
        credits = credits_of[name] = pairwise_credits(frame, "score", "votes")
        result = pairwise_accuracy(credits, n_boot=n_boot, seed=seed)
        out[name] = {"pairwise_accuracy": json_number(result["accuracy"]),
                     "ci": [json_number(v) for v in result["ci"]], "pairs": result["pairs"]}
    add_minus_reference(out, credits_of, "minus_rev", n_boot, seed)
    return out


def human_markdown(results: dict, *, title: str) -> str:
    """The tables of human.json as Markdown."""
    lines = [f"# {title}", ""]
    for name, info in results.get("files", {}).items():
        lines.append(f"- `{name}` ({info['kind'].replace('_', '-')}, {info['task']}): {info['instances']} "
                     f"instances, {info['explanations']} explanations scored, {info['skipped']} set aside"
                     + (f" ({'; '.join(info['notes'])})" if info["notes"] else "")
                     + (f", {info['seconds']:.0f} s" if info.get("seconds") is not None else ""))
    lines.append("")
    fine = results.get("fine_grained", {})
    if fine:
        lines += ["## Agreement with 'new and supporting' judgements (fine-grained)", "",
                  "Human = share of annotators who found new information that supports the label. Spearman "
                  "and pairwise agreement (of two explanations of one question that people rank differently, the "
                  "share the metric orders the same way; ties 1/2) with 95 % bootstrap intervals over questions.",
                  "",
                  markdown_table(pl.DataFrame([{
                      "metric": m, "spearman": with_interval(v["spearman"], v["spearman_ci"], missing="n/a"),
                      "kendall": "n/a" if v["kendall"] is None else f"{v['kendall']:.3f}",
                      "pairwise": with_interval(v["pairwise"], v["pairwise_ci"], missing="n/a"),
                      "pairwise_minus_rev": minus_rev_cell(v.get("pairwise_minus_rev")), "pairs": v["pairs"]}
                      for m, v in fine.items()])), "",
                  "### Mean per explanation source (metric score / human share)", ""]
        sources = sorted({s for v in fine.values() for s in v["by_source"]})
        rows = [{"metric": m, **{s: (f"{v['by_source'][s]['metric']:.3f} / {v['by_source'][s]['human']:.3f}"
                                     if s in v["by_source"] and v["by_source"][s]["metric"] is not None else "n/a")
                                 for s in sources}} for m, v in fine.items()]
        lines += [markdown_table(pl.DataFrame(rows)), ""]
    accept = results.get("acceptability", {})
    if accept:
        lines += ["## Predicting acceptability (pairwise accuracy within instances)", "",
                  "Of two explanations of one instance with different 'acceptable' votes, the share where the one "
                  "more people accepted scores higher (ties 1/2); 95 % bootstrap intervals over instances. "
                  "Baselines: gpt3_nll (lower = better), length (longer = better), chance (a random score). "
                  "minus_rev: the scorer's accuracy minus REV's, with a paired interval (the same instances "
                  "resampled for both).", "",
                  markdown_table(pl.DataFrame([
                      {"scorer": k, "pairwise_accuracy": with_interval(v["pairwise_accuracy"], v["ci"], missing="n/a"),
                       "minus_rev": minus_rev_cell(v.get("minus_rev")), "pairs": v["pairs"]}
                      for k, v in accept.items()])), ""]
    return "\n".join(lines)


def minus_rev_cell(entry: dict | None) -> str:
    """A paired difference from REV as a table cell ('-' for REV itself or a file without REV's scores)."""
    if not entry:
        return "-"
    return with_interval(entry["difference"], entry["ci"], missing="n/a")


def human_plot(results: dict, fine_frames: dict[str, pl.DataFrame] | None = None) -> bytes:
    """PNG: per metric, score against the human share (fine-grained; one point per explanation, jittered, with
    the per-source means), and the pairwise accuracies with intervals beside the baselines (acceptability)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fine_frames = fine_frames or {}
    accept = results.get("acceptability", {})
    panels = len(fine_frames) + (1 if accept else 0)
    fig, axes = plt.subplots(1, max(1, panels), figsize=(3.2 * max(1, panels), 3.2), dpi=110, squeeze=False)
    rng = np.random.default_rng(0)
    for ax, (metric, frame) in zip(axes[0], fine_frames.items()):
        human = frame["human"].to_numpy()
        ax.scatter(human + rng.uniform(-0.04, 0.04, len(human)), frame["score"].to_numpy(), s=6, alpha=0.35)
        means = frame.group_by("source").agg(pl.col("human").mean(), pl.col("score").mean())
        for source, h, s in means.iter_rows():
            ax.scatter([h], [s], marker="D", s=30, color="black")
            ax.annotate(source, (h, s), fontsize=7, xytext=(3, 3), textcoords="offset points")
        rho = results.get("fine_grained", {}).get(metric, {}).get("spearman")
        ax.set_title(f"{metric.upper()}" + (f"  rho {rho:.2f}" if rho is not None else ""), fontsize=9)
        ax.set_xlabel("human share new + supporting", fontsize=8)
        ax.set_ylabel("score", fontsize=8)
    if accept:
        ax = axes[0][-1]
        names = list(accept)
        values = [accept[n]["pairwise_accuracy"] or 0.0 for n in names]
        lows = [v - (accept[n]["ci"][0] if accept[n]["ci"][0] is not None else v) for n, v in zip(names, values)]
        highs = [(accept[n]["ci"][1] if accept[n]["ci"][1] is not None else v) - v for n, v in zip(names, values)]
        colors = ["tab:gray" if n in BASELINES else "tab:blue" for n in names]
        ax.bar(range(len(names)), values, yerr=[lows, highs], capsize=2, color=colors)
        ax.axhline(0.5, color="black", linewidth=0.8, linestyle="--")
        ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=8)
        ax.set_ylim(0.3, 0.8)
        ax.set_ylabel("pairwise accuracy (95% interval)", fontsize=8)
        ax.set_title("acceptability: which of two scores higher", fontsize=9)
    return png_bytes(fig)
