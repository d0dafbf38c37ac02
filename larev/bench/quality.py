"""`larev bench quality`: the machine-readable results of one run of the whole protocol.

results.json = {"scores": {METRIC: {VARIANT: float}}, "accuracy": {METRIC: {VARIANT: float}},
                "chance", "reads", "below_chance", "score_clipped", "score_vs_empty": {METRIC: {VARIANT: ...}},
                "separations": {METRIC: {"gold-leaky": ..., "SUM": ..., "SUM_read": ...}},
                "unread": {METRIC: [VARIANT]}, "n_test": int, "seconds": float}
(larev/metrics/scores.py says what each reading figure means). With `--controls`, LAREV's controls (metrics named
control_NAME) are kept apart from the metrics: "controls": {NAME: {"scores", "accuracy", ..., "separations",
"unread"}}, the same figures.
With the stress tests (`larev ftc` / `larev addtext` on the gold rationales), also
"ftc": {"task_model", "extractor", "alpha", "n_examples", "n", "n_extracted", "ftc_delta", "ftc_kl",
        "ftc_wasserstein", "by_case": {CASE: {...}}, "unextracted_reasons": {REASON: int}} and
"addtext": {METRIC: {KIND: {"mean_shift", "rise_share", "n"}, "all": {...}}}, and "leakage": each metric's bench
summary (its `bench_summary` hook, tasks/metric.py), for LAREV and RORA what their leakage spans removed
({"larev": {"e3_coverage", "span_recall", "residual_accuracy", "residual_before", "reference", "residual_reads"
(form: b without x; baseline: the whole b), "residual_with_input", "accuracy_x", "hypothesis_only", "chance",
"converged", "reliance_phi", "reliance_phi_la"}: larev/methods/leakage_aware/bench.py; "rora": {SOURCE:
{"residual_accuracy", "accuracy_unmasked", "chance", "residual_gain"}}: larev/methods/rora/bench.py}).
QA runs (`larev bench quality --task qa`) also score the restating gold rationales with their answer masked:
"natural_leakage": {METRIC: {"restating", "restating_masked", "non_restating", "share", "restating_minus_masked",
"ci": {QUANTITY: [lo, hi]}}} (larev/data/restating.py says what restating means).
With several seeds (`combine_seeds`), the top-level numbers are means over seeds, beside "seeds", "per_seed",
"seed_sd" and "positive_in_every_seed".
METRIC is rev, larev (and larev_<ablation>), rora, rq, las. `scores` are the aggregate scores (REV eq. 6, LAREV
eq. 4.4, RORA eq. 10 averaged; RQ's mean accuracy gain; LAS's macro-average), `accuracy` the accuracy of the
evaluator that reads the rationale. An undefined value (LAS with an empty group) is null.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import polars as pl
from pydantic import BaseModel

from larev.errors import ConfigError
from larev.metrics.bootstrap import bootstrap_intervals
from larev.metrics.scores import CONTROL_PREFIX, VARIANTS, separations, summarise, unread_variants
from larev.reports import (json_number, markdown_table, signature_lines, reading_sentence, separation_plot,
                           separation_table, summary_lines, with_interval)
from larev.run_files import TEST_SPLIT_FILE

#: writes one metric's bench summary as results.md lines: (metric name, its summary) -> lines (the registry's
#: `bench_markdown` hooks, passed in by the CLI; larev/ does not import the registry)
SummaryLines = Callable[[str, dict], list[str]]


# results.md's separation columns
SEPARATION_COLUMNS = ["gold-leaky", "gold-gold_leaky", "gold-vacuous", "SUM", "SUM_read", "gold-borrowed",
                      "gold-borrowed_other", "gold-empty"]
THESIS_COLUMNS = ["gold-leaky", "gold-gold_leaky", "gold-vacuous"]  # "positive in every seed" is asked of these
# results.json's per-variant figures: its key -> the summary column
FIGURES = {"scores": "score", "accuracy": "accuracy_with", "chance": "chance", "reads": "reads",
           "below_chance": "below_chance", "score_clipped": "score_clipped", "score_vs_empty": "score_vs_empty"}


def _figure(value):
    return value if isinstance(value, bool) else json_number(value)


def quality_results(summary: pl.DataFrame, *, n_test: int, seconds: float | None,
                    intervals: pl.DataFrame | None = None) -> dict:
    """results.json's content from a run's summary (larev.metrics.scores.summarise) and, when given, the
    bootstrap intervals (`larev.metrics.bootstrap.bootstrap_intervals`). Metrics named control_NAME go to
    "controls"."""
    figures: dict[str, dict] = {key: {} for key in FIGURES}
    for row in summary.filter(pl.col("source").is_in(VARIANTS)).iter_rows(named=True):
        for key, column in FIGURES.items():
            figures[key].setdefault(row["metric"], {})[row["source"]] = _figure(row.get(column))
    metrics = list(figures["scores"])
    seps = {m: {k: json_number(v) for k, v in separations(summary, m).items()} for m in metrics}
    unread = {m: unread_variants(summary, m) for m in metrics}
    out = {**{key: {m: v for m, v in table.items() if not m.startswith(CONTROL_PREFIX)}
              for key, table in figures.items()},
           "separations": {m: v for m, v in seps.items() if not m.startswith(CONTROL_PREFIX)},
           "unread": {m: v for m, v in unread.items() if not m.startswith(CONTROL_PREFIX)},
           "n_test": n_test, "seconds": None if seconds is None else round(seconds, 1)}
    controls = {m[len(CONTROL_PREFIX):]: {**{key: figures[key][m] for key in FIGURES}, "separations": seps[m],
                                          "unread": unread[m]}
                for m in metrics if m.startswith(CONTROL_PREFIX)}
    if controls:
        out["controls"] = controls
    if intervals is not None:
        out["intervals"] = {}
        for row in intervals.iter_rows(named=True):
            out["intervals"].setdefault(row["metric"], {})[row["quantity"]] = [json_number(row["ci_low"]),
                                                                                json_number(row["ci_high"])]
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
                "mean_shift": json_number(row["mean_shift"]), "rise_share": json_number(row["rise_share"]),
                "n": int(row["n"])}
        out["addtext"] = addtext
    return out


def _fmt(value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no (chance)"
    return f"{value:.3f}"


def _reads_cell(value) -> str:
    """`reads` of one run (a bool) or the share of seeds that read the variant (a mean over seeds)."""
    if value is None or isinstance(value, bool):
        return _fmt(value)
    return "yes" if value == 1 else "no (chance)" if value == 0 else f"in {value:.0%} of seeds"


def variant_figures_table(results: dict, metrics: list[str], *, cell=None) -> pl.DataFrame:
    """The per-variant table of results.json (metric and control rows): score, score_vs_empty, accuracy, chance,
    reads, below_chance, score_clipped. `cell(metric, variant, value, key)` formats a number (default 3
    decimals); a control is named control_NAME and read from results["controls"]."""
    cell = cell or (lambda m, v, value, key: _fmt(value))
    rows = []
    for m in metrics:
        block = results["controls"][m[len(CONTROL_PREFIX):]] if m.startswith(CONTROL_PREFIX) else \
            {key: results.get(key, {}).get(m, {}) for key in FIGURES}
        for v in VARIANTS:
            if v not in block["scores"]:
                continue
            rows.append({"metric": m, "variant": v,
                         **{key: cell(m, v, block.get(key, {}).get(v), key)
                            for key in ("scores", "score_vs_empty", "accuracy", "chance")},
                         "reads": _reads_cell(block.get("reads", {}).get(v)),
                         **{key: cell(m, v, block.get(key, {}).get(v), key) for key in ("below_chance",
                                                                                         "score_clipped")}})
    return pl.DataFrame(rows).rename({"scores": "score"}) if rows else pl.DataFrame()


def results_sentences(results: dict) -> list[str]:
    """`larev.reports.reading_sentence` for every metric of results.json (one seed or the means over seeds)."""
    out = []
    for m, relative in results.get("score_vs_empty", {}).items():
        sentence = reading_sentence(m, relative, results["scores"][m].get("empty"),
                                    results.get("unread", {}).get(m) or [])
        if sentence:
            out.append(sentence)
    return out


CONTROL_QUANTITIES = ["gold-borrowed", "gold-leaky", "gold-vacuous", "gold-empty", "SUM"]


def control_sentences(results: dict, spread: dict[str, float]) -> list[str]:
    """In words, where a control matches LAREV: per separation of CONTROL_QUANTITIES, the control's value lies
    within `spread[quantity]` of LAREV's (the half-width of LAREV's 95 % bootstrap interval for one seed, two
    seed sds over seeds)."""
    larev = results.get("separations", {}).get("larev", {})
    out = []
    for name, block in results.get("controls", {}).items():
        matched = [q for q in CONTROL_QUANTITIES if larev.get(q) is not None and block["separations"].get(q)
                   is not None and spread.get(q) is not None
                   and abs(block["separations"][q] - larev[q]) <= spread[q] + 1e-9]
        if matched:
            basis = "two seed sds of LAREV's" if "seeds" in results else "the half-width of LAREV's 95 % interval"
            out.append(f"Control {name} matches LAREV on {', '.join(matched)} (within {basis}): there, LAREV's "
                       "phi_LA does no more than the control.")
        else:
            out.append(f"Control {name} differs from LAREV on every one of {', '.join(CONTROL_QUANTITIES)}.")
    return out


def controls_table(results: dict, *, cell=None) -> pl.DataFrame:
    """LAREV's separations beside each control's (CONTROL_QUANTITIES)."""
    cell = cell or (lambda m, q, value: _fmt(value))
    rows = [{"evaluator": "larev", **{q: cell("larev", q, results["separations"].get("larev", {}).get(q))
                                      for q in CONTROL_QUANTITIES}}]
    rows += [{"evaluator": f"control {n}", **{q: cell(CONTROL_PREFIX + n, q, b["separations"].get(q))
                                               for q in CONTROL_QUANTITIES}}
             for n, b in results.get("controls", {}).items()]
    return pl.DataFrame(rows)


def quality_markdown(summary: pl.DataFrame, results: dict, *, title: str,
                     lines_of: SummaryLines | None = None) -> str:
    """The per-variant table first (absolute scores, zero-relative scores, what the evaluator reads), one sentence
    per metric, the controls, then the separations with their sum (95 % intervals when the results carry them)."""
    metrics = list(results["scores"])
    ci = results.get("intervals", {})
    controls = [CONTROL_PREFIX + n for n in results.get("controls", {})]

    def cell(m, v, value, key):
        return with_interval(value, ci.get(m, {}).get(v)) if key == "scores" else _fmt(value)

    pairs = SEPARATION_COLUMNS
    seps = pl.DataFrame([{"metric": m, **{p: with_interval(results["separations"][m].get(p), ci.get(m, {}).get(p))
                                          for p in pairs}, "unread": ", ".join(results["unread"].get(m, [])) or "-"}
                         for m in metrics if results["separations"].get(m)])
    seconds = results.get("seconds")
    note = " Brackets: paired bootstrap 95 % intervals over test examples." if ci else ""
    lines = [f"# {title}", "",
             f"{results['n_test']} test examples" + (f", {seconds:.0f} s." if seconds is not None else ".") + note, "",
             *signature_lines(results.get("signatures", {})),
             "## What each metric says of each rationale variant", "",
             "score: nats for REV, LAREV and RORA, accuracy gain for RQ and LAS; score_vs_empty: minus the same "
             "metric's score with no rationale (its zero point); accuracy of the evaluator that reads the rationale "
             "against chance (mean 1/K); reads: accuracy outside chance +- a 95 % binomial margin; below_chance: "
             "share of rows given less than 1/K; score_clipped: log p clipped at log(1/K).", "",
             markdown_table(variant_figures_table(results, metrics + controls, cell=cell)), "",
             *[f"- {s}" for s in results_sentences(results)], ""]
    if controls:
        def half_width(q):
            interval = ci.get("larev", {}).get(q)
            return None if not interval or interval[0] is None else (interval[1] - interval[0]) / 2

        lines += ["## LAREV against its controls (same seed, same estimator)", "",
                  markdown_table(controls_table(results, cell=lambda m, q, v: with_interval(
                      v, ci.get(m, {}).get(q)))), "",
                  *[f"- {s}" for s in control_sentences(results, {q: half_width(q) for q in CONTROL_QUANTITIES})],
                  ""]
    lines += ["## Separations: gold minus each other variant", "",
              "SUM: the thesis's three (leaky, gold_leaky, vacuous), for comparison with the thesis; SUM_read: those "
              "of the three the evaluator reads; unread: variants read at chance (flagged, not counted).", "",
              markdown_table(seps) if seps.height else markdown_table(separation_table(summary)), "",
              *natural_leakage_markdown(results.get("natural_leakage", {})),
              *by_label_markdown(results.get("by_label", {})),
              *leakage_markdown(results.get("leakage", {}), lines_of)]
    return "\n".join(lines)


def leakage_markdown(leakage: dict, lines_of: SummaryLines | None = None) -> list[str]:
    """The "leakage" entry (each metric's bench summary) as results.md sections, one per metric, each written by
    `lines_of(metric, summary)` (the metric's own `bench_markdown`; default: a table of its figures)."""
    lines_of = lines_of or summary_lines
    return [line for metric, summary in leakage.items() for line in lines_of(metric, summary)]


def rows_of_test_split(run_dir: Path, rows: slice) -> list[str]:
    """The ids of the test rows at positions `rows` of a finished run's test split (its test_split.jsonl, in the
    order the test file gave them): e.g. slice(0, 2000) of a run tested on e-SNLI dev rows 6000: is file rows
    6000:8000."""
    path = run_dir / TEST_SPLIT_FILE
    if not path.exists():
        raise ConfigError(f"{path} not found: --report-rows needs a pipeline run's test split")
    ids = pl.read_ndjson(path).get_column("id").to_list()[rows]
    if not ids:
        raise ConfigError(f"--report-rows {rows.start}:{rows.stop} selects none of the {path.name} rows")
    return ids


def write_quality_outputs(run_dir: Path, out: Path, *, title: str, seconds: float | None, n_boot: int,
                          stress_dir: Path | None = None, rows: slice | None = None,
                          leakage: dict | None = None, lines_of: SummaryLines | None = None) -> None:
    """results.json / results.md / results.csv (bootstrap intervals) and separations.png in `out` from a finished
    run directory, with the FTC and AddText results of `stress_dir` (a `stress-test` flow's output) when given.
    rows: only the test rows at these positions of the run's test split (`rows_of_test_split`; e.g. a tuning
    split and a test split scored by one training), their summary recomputed from the scores.
    leakage: results.json's "leakage" entry, every metric's bench summary of the run, read by the caller from the
    run's artifact store (None or empty: no such entry); lines_of: how results.md writes each (`leakage_markdown`)."""
    scores = pl.read_parquet(run_dir / "scores.parquet")
    if rows is None:
        summary = pl.read_parquet(run_dir / "summary.parquet")
    else:
        scores = scores.filter(pl.col("id").is_in(rows_of_test_split(run_dir, rows)))
        summary = summarise(scores)
    n_test = scores.filter(pl.col("source") == "gold")["id"].n_unique()
    intervals = bootstrap_intervals(scores, n_boot=n_boot, seed=0) if n_boot > 0 else None
    results = quality_results(summary, n_test=n_test, seconds=seconds, intervals=intervals)
    if "signature" in scores.columns:  # what computed each metric's figures (larev/signature.py)
        results["signatures"] = dict(scores.select("metric", "signature").unique().sort("metric").iter_rows())
    if leakage:
        results["leakage"] = leakage
    natural = natural_leakage_results(scores, n_boot=n_boot)
    if natural:
        results["natural_leakage"] = natural
    by_label = by_label_results(scores, n_boot=n_boot)
    if by_label:
        results["by_label"] = by_label
    markdown = quality_markdown(summary, results, title=title, lines_of=lines_of)
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


# ----------------------------------------------------------------------------------------------- natural leakage

NATURAL_GROUPS = ("restating", "restating_masked", "non_restating")


def natural_leakage_results(scores: pl.DataFrame, *, n_boot: int, seed: int = 0) -> dict:
    """results.json's "natural_leakage" entry: per metric, the aggregate score of the gold rationales that restate
    their answer, of the same rationales with the answer masked (source `RESTATING_MASKED_SOURCE`), of the other
    gold rationales, the restating share, and restating minus restating_masked (paired over the restating
    examples), each with a bootstrap interval over test examples ("ci": {GROUP: [lo, hi]}, n_boot > 0).
    Empty when the run scored no masked copies (not a QA quality run)."""
    from larev.data.restating import RESTATING_MASKED_SOURCE

    scores = scores.filter(pl.col("source").is_in(["gold", RESTATING_MASKED_SOURCE]))
    masked_ids = scores.filter(pl.col("source") == RESTATING_MASKED_SOURCE)["id"].unique()
    if masked_ids.is_empty():
        return {}
    restating = pl.col("id").is_in(masked_ids.implode())
    grouped = scores.with_columns(
        source=pl.when(pl.col("source") == RESTATING_MASKED_SOURCE).then(pl.lit("restating_masked"))
        .when(restating).then(pl.lit("restating")).otherwise(pl.lit("non_restating")))
    paired = bootstrap_intervals(grouped, n_boot=max(n_boot, 1), seed=seed, reference="restating",
                                 degraded=("restating_masked",))
    other = bootstrap_intervals(grouped, n_boot=max(n_boot, 1), seed=seed, reference="non_restating", degraded=())
    table = pl.concat([paired, other]).filter(pl.col("quantity") != "SUM")
    out: dict[str, dict] = {}
    for metric in grouped["metric"].unique(maintain_order=True).to_list():
        gold_ids = grouped.filter((pl.col("metric") == metric) & (pl.col("source") != "restating_masked"))["id"]
        n_restating = grouped.filter((pl.col("metric") == metric) & (pl.col("source") == "restating")).height
        rows = {r["quantity"]: r for r in table.filter(pl.col("metric") == metric).iter_rows(named=True)}
        entry = {g: json_number(rows[g]["estimate"]) if g in rows else None for g in NATURAL_GROUPS}
        entry["share"] = n_restating / gold_ids.n_unique() if gold_ids.n_unique() else None
        gap = rows.get("restating-restating_masked")
        entry["restating_minus_masked"] = json_number(gap["estimate"]) if gap else None
        if n_boot > 0:
            entry["ci"] = {q: [json_number(r["ci_low"]), json_number(r["ci_high"])] for q, r in rows.items()}
        out[metric] = entry
    return out


def natural_leakage_markdown(natural: dict) -> list[str]:
    """The natural-leakage table as a results.md section (nothing when it is empty)."""
    if not natural:
        return []

    def cell(entry: dict, key: str) -> str:
        return with_interval(entry.get(key), entry.get("ci", {}).get(
            "restating-restating_masked" if key == "restating_minus_masked" else key))

    rows = [{"metric": m, **{k: cell(e, k) for k in (*NATURAL_GROUPS, "restating_minus_masked")},
             "share": "n/a" if e["share"] is None else f"{e['share']:.3f}"} for m, e in natural.items()]
    return ["## Natural leakage: gold rationales that restate their answer", "",
            "Mean score of the gold rationales containing the answer's text (restating), of the same rationales "
            "with the answer masked as '___' (restating_masked), and of the other gold rationales; share = "
            "restating share of the test examples. A leakage-robust metric gives restating - restating_masked "
            "<= about 0; an accuracy-based one (RQ, LAS) is expected to reward the restatement. Brackets: "
            "bootstrap 95 % intervals over test examples (paired for the difference).", "",
            markdown_table(pl.DataFrame(rows)), ""]


# ----------------------------------------------------------------------------------------------- per label

BY_LABEL_SOURCES = ("gold", "borrowed", "empty")
MAX_BY_LABEL = 10  # a fixed label set (NLI's 3); QA's answers differ per question, so no per-label table there


def by_label_results(scores: pl.DataFrame, *, n_boot: int, seed: int = 0) -> dict:
    """results.json's "by_label" entry: per metric and gold label, the number of examples, each source's aggregate
    score and the reading evaluator's accuracy (gold, a borrowed same-label rationale, no rationale), and gold -
    borrowed paired over the label's examples with its bootstrap interval ("ci", n_boot > 0). Where a borrowed
    rationale is read as well as the instance's own under a label, the evaluator reads what that label's
    rationales share (their kind of sentence), not what the gold one says about its instance.
    Empty when the run scored no borrowed rationales or has more than MAX_BY_LABEL labels."""
    scores = scores.filter(pl.col("source").is_in(BY_LABEL_SOURCES))
    labels = sorted(scores["label"].unique().to_list())
    if "borrowed" not in set(scores["source"]) or len(labels) > MAX_BY_LABEL:
        return {}
    out: dict[str, dict] = {}
    for label in labels:
        part = scores.filter(pl.col("label") == label)
        table = bootstrap_intervals(part, n_boot=max(n_boot, 1), seed=seed, reference="gold",
                                    degraded=("borrowed", "empty"))
        for metric in part["metric"].unique(maintain_order=True).to_list():
            rows = {r["quantity"]: r for r in table.filter(pl.col("metric") == metric).iter_rows(named=True)}
            mine = part.filter(pl.col("metric") == metric)
            accuracy = dict(mine.group_by("source").agg(pl.col("correct_with").mean()).iter_rows())
            gap = rows.get("gold-borrowed")
            entry = {"n": mine.filter(pl.col("source") == "gold")["id"].n_unique(),
                     **{src: json_number(rows[src]["estimate"]) if src in rows else None for src in BY_LABEL_SOURCES},
                     "accuracy": {src: json_number(accuracy.get(src)) for src in BY_LABEL_SOURCES},
                     "gold_minus_borrowed": json_number(gap["estimate"]) if gap else None}
            if n_boot > 0 and gap:
                entry["ci"] = [json_number(gap["ci_low"]), json_number(gap["ci_high"])]
            out.setdefault(metric, {})[label] = entry
    return out


def by_label_markdown(by_label: dict) -> list[str]:
    """The per-label table as a results.md section (nothing when it is empty)."""
    if not by_label:
        return []

    def with_accuracy(entry: dict, src: str) -> str:
        value, accuracy = entry[src], entry["accuracy"][src]
        return _fmt(value) + ("" if accuracy is None else f" ({accuracy:.3f})")

    rows = [{"metric": m, "label": label, "n": str(e["n"]),
             **{src: with_accuracy(e, src) for src in BY_LABEL_SOURCES},
             "gold-borrowed": with_interval(e["gold_minus_borrowed"], e.get("ci"))}
            for m, per_label in by_label.items() for label, e in per_label.items()]
    return ["## Per label: the gold rationale against a borrowed one", "",
            "Mean score per gold label (the reading evaluator's accuracy in brackets) of the gold rationale, another "
            "instance's rationale with the same label (borrowed) and no rationale. Where borrowed is read as well as "
            "gold under a label, the evaluator reads what that label's rationales share, not what the gold one says "
            "about its instance. Brackets after gold-borrowed: paired bootstrap 95 % interval over the label's "
            "examples.", "",
            markdown_table(pl.DataFrame(rows)), ""]


# ----------------------------------------------------------------------------------------------- leakage and seeds


def reseeded(config: BaseModel, offset: int) -> BaseModel:
    """`config` with every `seed` field moved by `offset` (model initialisation, data order, the paraphraser, the
    antonym and probe draws), except the data generator's: a seed changes training, not the data."""
    if offset == 0:
        return config
    update = {}
    for name in type(config).model_fields:
        value = getattr(config, name)
        if name == "seed" and isinstance(value, int) and "Data" not in type(config).__name__:
            update[name] = value + offset
        elif isinstance(value, BaseModel):
            update[name] = reseeded(value, offset)
    return config.model_copy(update=update)


def _mean_sd(values: list[float | None]) -> tuple[float | None, float | None]:
    xs = [v for v in values if v is not None]
    if not xs:
        return None, None
    mean = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
    return mean, sd


def _combine(per_seed: list[dict]) -> tuple[dict, dict]:
    """Means and standard deviations over seeds of a nested {a: {b: number}} mapping."""
    means: dict = {}
    sds: dict = {}
    for outer in per_seed[0]:
        for inner in per_seed[0][outer]:
            values = [s.get(outer, {}).get(inner) for s in per_seed]
            if all(isinstance(v, (int, float)) or v is None for v in values):
                mean, sd = _mean_sd(values)
                means.setdefault(outer, {})[inner] = mean
                sds.setdefault(outer, {})[inner] = sd
    return means, sds


def _combine_block(results: list[dict]) -> tuple[dict, dict]:
    """Means over seeds of the per-variant figures and separations of one block (the metrics, or one control),
    and the seed sds of the scores and separations ({METRIC: {QUANTITY: sd}})."""
    out, sds = {}, {}
    for key in (*FIGURES, "separations"):
        out[key], sds[key] = _combine([r.get(key, {}) for r in results])
    out["unread"] = {m: [v for v in VARIANTS if any(v in (r.get("unread", {}).get(m) or []) for r in results)]
                     for m in out["scores"]}  # read at chance in at least one seed
    seed_sd = {m: {**sds["scores"].get(m, {}), **sds["separations"].get(m, {})} for m in out["scores"]}
    return out, seed_sd


def combine_seeds(per_seed: dict[int, dict]) -> dict:
    """One results.json over several seeds: every per-variant figure, separations and leakage as means over seeds
    (`reads`: the share of seeds reading the variant; `unread`: the variants read at chance in at least one
    seed), plus "seeds", "per_seed" ({seed: {"scores", "separations", "leakage"}}), "seed_sd" ({METRIC:
    {QUANTITY: sd}}, the sample sd over seeds of each variant's score and each separation: training variance,
    which the per-seed bootstrap intervals do not cover) and "positive_in_every_seed" ({METRIC: {PAIR: bool}}).
    Controls the same way, each under "controls": {NAME: {..., "per_seed", "seed_sd"}}."""
    seeds = sorted(per_seed)
    results = [per_seed[s] for s in seeds]
    block, seed_sd = _combine_block(results)
    seps = block["separations"]
    out = {**block, "n_test": results[0]["n_test"],
           "seconds": round(sum(r.get("seconds") or 0 for r in results), 1), "seeds": seeds,
           "per_seed": {str(s): {k: r.get(k) for k in ("scores", "separations", "leakage")}
                        for s, r in zip(seeds, results)},
           "seed_sd": seed_sd,
           "positive_in_every_seed": {m: {p: all((r["separations"].get(m, {}).get(p) or 0) > 0 for r in results)
                                          for p in seps.get(m, {})} for m in seps}}
    names = [n for n in results[0].get("controls", {}) if all(n in r.get("controls", {}) for r in results)]
    if names:
        out["controls"] = {}
        for name in names:
            blocks = [{key: {"c": r["controls"][name].get(key, {})} for key in (*FIGURES, "separations")}
                      | {"unread": {"c": r["controls"][name].get("unread", [])}} for r in results]
            combined, sd = _combine_block(blocks)
            out["controls"][name] = {**{key: value.get("c", {}) if isinstance(value, dict) else value
                                        for key, value in combined.items()},
                                     "per_seed": {str(s): {"scores": r["controls"][name]["scores"],
                                                           "separations": r["controls"][name]["separations"]}
                                                  for s, r in zip(seeds, results)},
                                     "seed_sd": sd.get("c", {})}
    leakage = {m: mean_figures([r["leakage"][m] for r in results])
               for m in results[0].get("leakage", {}) if all(m in r.get("leakage", {}) for r in results)}
    if leakage:
        out["leakage"] = leakage
    return out


def mean_figures(per_seed: list[dict]) -> dict:
    """The mean over seeds of every number in a nested mapping of figures (a flag: the share of seeds where it
    holds); a text kept where every seed has the same, left out otherwise."""
    out = {}
    for key, value in per_seed[0].items():
        values = [s.get(key) for s in per_seed]
        if isinstance(value, dict):
            out[key] = mean_figures([v if isinstance(v, dict) else {} for v in values])
        elif all(isinstance(v, (int, float)) or v is None for v in values):
            out[key] = _mean_sd(values)[0]
        elif isinstance(value, str) and all(v == value for v in values):
            out[key] = value
    return out


def seeds_markdown(results: dict, *, title: str, lines_of: SummaryLines | None = None) -> str:
    """results.md of a multi-seed run: the per-variant table and the controls (mean ± sd over seeds) first, then
    the separations, the per-seed separations, what the numbers cover."""
    seeds = results["seeds"]
    metrics = list(results["scores"])
    controls = results.get("controls", {})
    sd = results["seed_sd"]

    def sd_of(m: str, q: str):
        if m.startswith(CONTROL_PREFIX):
            return controls[m[len(CONTROL_PREFIX):]]["seed_sd"].get(q)
        return sd.get(m, {}).get(q)

    def with_sd(m: str, q: str, v) -> str:
        return "nan" if v is None else f"{v:.3f} ± {sd_of(m, q) or 0:.3f}"

    def cell(m: str, q: str, table: dict) -> str:
        return with_sd(m, q, table.get(m, {}).get(q))

    def variant_cell(m, v, value, key):
        return with_sd(m, v, value) if key == "scores" else _fmt(value)

    pairs = SEPARATION_COLUMNS
    seps = pl.DataFrame([{"metric": m, **{p: cell(m, p, results["separations"]) for p in pairs},
                          "unread": ", ".join(results.get("unread", {}).get(m) or []) or "-",
                          "positive in every seed": ", ".join(p for p in THESIS_COLUMNS + ["gold-borrowed"]
                                                              if results["positive_in_every_seed"][m].get(p))
                          or "none"} for m in metrics if results["separations"].get(m)])
    per_seed = pl.DataFrame([{"seed": int(s), "metric": m,
                              **{p: r["separations"].get(m, {}).get(p) for p in pairs}}
                             for s, r in results["per_seed"].items() for m in metrics if r["separations"].get(m)])
    lines = [f"# {title}", "",
             f"{len(seeds)} seeds ({', '.join(map(str, seeds))}: model initialisation, data order, paraphraser and "
             f"probe draws), {results['n_test']} test examples, {results['seconds']:.0f} s in all. Cells are the "
             "mean over seeds ± the sample standard deviation over seeds (training variance). Bootstrap intervals "
             "over test examples, which cover test sampling only, are in each seed-<i>/results.md. A separation "
             "counts as positive only when it is positive in every seed.", "",
             "## What each metric says of each rationale variant", "",
             "score ± seed sd; score_vs_empty: minus the same metric's score with no rationale (its zero point); "
             "accuracy of the reading evaluator against chance; reads: in how many seeds its accuracy is outside "
             "chance +- a 95 % binomial margin; below_chance: share of rows given less than 1/K; score_clipped: "
             "log p clipped at log(1/K). Means over seeds.", "",
             markdown_table(variant_figures_table(results, metrics + [CONTROL_PREFIX + n for n in controls],
                                                  cell=variant_cell)), "",
             *[f"- {s}" for s in results_sentences(results)], ""]
    if controls:
        lines += ["## LAREV against its controls (same seeds, same estimator)", "",
                  markdown_table(controls_table(results, cell=lambda m, q, v: with_sd(m, q, v))), "",
                  *[f"- {s}" for s in control_sentences(
                      results, {q: None if sd_of("larev", q) is None else 2 * sd_of("larev", q)
                                for q in CONTROL_QUANTITIES})], "",
                  "Per seed:", "",
                  markdown_table(pl.DataFrame(
                      [{"seed": int(s), "evaluator": "larev",
                        **{q: r["separations"].get("larev", {}).get(q) for q in CONTROL_QUANTITIES}}
                       for s, r in results["per_seed"].items()]
                      + [{"seed": int(s), "evaluator": f"control {n}", **{q: r["separations"].get(q)
                                                                           for q in CONTROL_QUANTITIES}}
                         for n, b in controls.items() for s, r in b["per_seed"].items()])), ""]
    lines += ["## Separations", "",
              "SUM: the thesis's three (leaky, gold_leaky, vacuous); SUM_read: those of the three the evaluator "
              "reads; unread: variants read at chance in some seed (flagged, not counted).", "",
              markdown_table(seps), "",
              "## Separations per seed", "", markdown_table(per_seed), ""]
    if results.get("leakage"):
        lines += ["## Each metric's bench summary, means over seeds", "",
                  "Every number below is a mean over the seeds; a flag is the share of seeds where it held.", "",
                  *leakage_markdown(results["leakage"], lines_of)]
    return "\n".join(lines)


def write_seed_summary(out: Path, *, title: str, lines_of: SummaryLines | None = None) -> dict:
    """results.json / results.md over every OUT/seed-<i>/results.json (so a later `--first-seed` run extends the
    study); returns the combined results."""
    per_seed = {int(d.name.split("-", 1)[1]): json.loads((d / "results.json").read_text())
                for d in out.glob("seed-*") if d.name.split("-", 1)[1].isdigit() and (d / "results.json").exists()}
    combined = combine_seeds(per_seed)
    (out / "results.json").write_text(json.dumps(combined, indent=2))
    (out / "results.md").write_text(seeds_markdown(combined, title=f"{title}, {len(per_seed)} seeds",
                                                   lines_of=lines_of))
    return combined
