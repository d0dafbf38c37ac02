"""Tables, Markdown reports and plots of scores (no Prefect: the tasks publish these as Prefect artifacts)."""

from __future__ import annotations

import io
import math

import polars as pl

from larev.data.variants import VARIANTS
from larev.metrics.scores import CONTROL_PREFIX, DEGRADED, ZERO_POINT, separations, unread_variants


def _fmt(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "nan"
    if isinstance(x, float):
        return f"{x:.3f}"
    return str(x)


def json_number(x) -> float | None:
    """A number for JSON, which has no NaN: an undefined value is null."""
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def with_interval(estimate, interval, missing: str = "nan") -> str:
    """'0.123 [0.100, 0.150]' (3 decimals; the estimate alone without an interval, `missing` without an
    estimate)."""
    if estimate is None:
        return missing
    if not interval or interval[0] is None:
        return f"{estimate:.3f}"
    return f"{estimate:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"


def png_bytes(fig) -> bytes:
    """A finished matplotlib figure as PNG bytes (laid out tight, then closed)."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def markdown_table(df: pl.DataFrame) -> str:
    """A GitHub-flavoured Markdown table of a small frame."""
    head = "| " + " | ".join(df.columns) + " |"
    rule = "| " + " | ".join("---" for _ in df.columns) + " |"
    body = ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in df.iter_rows()]
    return "\n".join([head, rule, *body])


def flat_figures(figures: dict, prefix: str = "") -> dict:
    """A nested mapping of figures flattened to dotted keys ({"a": {"b": 1}} -> {"a.b": 1})."""
    out = {}
    for key, value in figures.items():
        if isinstance(value, dict):
            out |= flat_figures(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


def summary_lines(metric: str, figures: dict) -> list[str]:
    """A metric's bench summary (a nested mapping of figures) as a results.md section: a heading and a table of
    figure, value. The default for a metric that writes none of its own."""
    flat = flat_figures(figures)
    if not flat:
        return []
    table = pl.DataFrame({"figure": list(flat), "value": [_fmt(v) for v in flat.values()]})
    return [f"## {metric}: bench summary", "", markdown_table(table), ""]


def separation_table(summary: pl.DataFrame) -> pl.DataFrame:
    """One row per metric: gold minus each degraded variant, and their sum."""
    rows = []
    for metric in summary["metric"].unique(maintain_order=True).to_list():
        seps = separations(summary, metric)
        if seps:
            rows.append({"metric": metric, **seps, "unread": ", ".join(unread_variants(summary, metric)) or "-"})
    return pl.DataFrame(rows) if rows else pl.DataFrame({"metric": []}, schema={"metric": pl.String})


def variant_table(summary: pl.DataFrame) -> pl.DataFrame:
    """What each metric says of each built-in variant, one row per (metric, variant): the score, the reading
    evaluator's accuracy beside chance and whether it reads the variant at all, the share of rows below log(1/K),
    the score with log p clipped at log(1/K), and the score relative to `empty` (the metric's zero point)."""
    if "reads" not in summary.columns:
        return pl.DataFrame()
    order = {v: i for i, v in enumerate(VARIANTS)}
    part = summary.filter(pl.col("source").is_in(VARIANTS)).with_columns(
        __order=pl.col("source").replace_strict(order, default=len(order), return_dtype=pl.Int32))
    metrics = summary["metric"].unique(maintain_order=True).to_list()
    metrics = ([m for m in metrics if not m.startswith(CONTROL_PREFIX)]
               + [m for m in metrics if m.startswith(CONTROL_PREFIX)])
    part = part.with_columns(__metric=pl.col("metric").replace_strict(
        {m: i for i, m in enumerate(metrics)}, return_dtype=pl.Int32)).sort("__metric", "__order")
    return part.select("metric", pl.col("source").alias("variant"), "score", "score_vs_empty",
                       pl.col("accuracy_with").alias("accuracy"), "chance",
                       pl.col("reads").replace_strict({True: "yes", False: "no (chance)"}, default="n/a",
                                                      return_dtype=pl.String).alias("reads"),
                       "below_chance", "score_clipped", "n")


SENTENCE_VARIANTS = ("gold", "borrowed", "vacuous", "leaky", "borrowed_other")  # in each metric's sentence


def reading_sentence(metric: str, relative: dict, empty: float, unread: list[str]) -> str | None:
    """One plain sentence on what a metric's numbers show: the scores of gold and of the rationales that say nothing
    about the instance relative to its zero point (`relative`: variant -> score minus `empty`'s score), and the
    variants its evaluator reads at chance. None without a gold figure."""
    if relative.get("gold") is None:
        return None
    values = ", ".join(f"{v} {relative[v]:+.3f}" for v in SENTENCE_VARIANTS if relative.get(v) is not None)
    sentence = f"{metric.upper()}: relative to no rationale (empty, {empty:.3f}), {values}"
    if unread:
        sentence += (f"; its evaluator reads {', '.join(unread)} at chance, so a separation from "
                     f"{'it' if len(unread) == 1 else 'them'} says it cannot read the text, not that the text "
                     "holds less")
    return sentence + "."


def reading_sentences(summary: pl.DataFrame) -> list[str]:
    """`reading_sentence` for every metric of a run's summary that scored gold and `empty`."""
    out = []
    for metric in summary["metric"].unique(maintain_order=True).to_list():
        part = {r["source"]: r for r in summary.filter(pl.col("metric") == metric).iter_rows(named=True)}
        if ZERO_POINT not in part:
            continue
        sentence = reading_sentence(metric, {v: r.get("score_vs_empty") for v, r in part.items()},
                                    part[ZERO_POINT]["score"], unread_variants(summary, metric))
        if sentence:
            out.append(sentence)
    return out


LEAKY_BASELINE_ACCURACY = 0.95


def diagnose(summary: pl.DataFrame) -> list[str]:
    """Plain-language warnings about what the numbers can and cannot say."""
    notes = []
    rev = summary.filter(pl.col("metric") == "rev")
    acc = rev["accuracy_base"].mean() if rev.height else None  # phi_base is shared by every metric
    if acc is not None and acc >= LEAKY_BASELINE_ACCURACY:
        notes.append(
            f"The baseline evaluator predicts the label from the vacuous rationale b alone with accuracy "
            f"{acc:.3f}: b leaks the label (e.g. the template's relation word). REV's rationale evaluator reads "
            f"it too, so REV scores every rationale near 0 and its separations say nothing about the rationales. "
            f"This is the baseline-leakage failure LAREV is built to fix.")
    return notes


def signature_lines(signatures: dict[str, str]) -> list[str]:
    """The report's signature section: one row per metric (larev/signature.py says what each field means)."""
    if not signatures:
        return []
    rows = pl.DataFrame({"metric": list(signatures), "signature": list(signatures.values())}).sort("metric")
    return ["## Signatures", "",
            "What computed each metric's scores: its definition's version, the backbone and its weights, a digest "
            "of the resolved settings, the training seed and the larev version. Scores are comparable only under "
            "the same signature.", "", markdown_table(rows), ""]


def report_markdown(summary: pl.DataFrame, *, title: str, meta: dict | None = None,
                    signatures: dict[str, str] | None = None) -> str:
    """The run report: what was run, each metric's signature, the score table, the separations and how to read
    them."""
    parts = [f"# {title}", ""]
    if meta:
        parts += [f"- **{k}**: {v}" for k, v in meta.items()] + [""]
    parts += signature_lines(signatures or {})
    summary = summary.drop("signature", strict=False)
    variants = variant_table(summary)
    if variants.height:
        parts += ["## What each metric says of each rationale variant", "",
                  "`score` in nats (REV, LAREV, RORA) or accuracy gain (RQ, LAS); `score_vs_empty`: minus the "
                  "same metric's score with no rationale (its zero point: a rationale that adds nothing scores about "
                  "0 there); `accuracy` of the evaluator that reads the rationale, against `chance` (mean 1/K); "
                  "`reads`: accuracy outside chance +- a 95 % binomial margin; `below_chance`: share of rows where "
                  "that evaluator gives the label less than 1/K; `score_clipped`: the score with log p clipped at "
                  "log(1/K), so a confidently wrong reading counts as none.", "",
                  markdown_table(variants), "", *[f"- {s}" for s in reading_sentences(summary)], ""]
    parts += ["## Scores per rationale source", "",
              "`score` is the mean pointwise score: in nats for REV (eq. 6), LAREV (eq. 4.4), larev_vs_empty "
              "(LAREV's first term minus phi_LA's own reading of no rationale) and RORA (eq. 10); an "
              "accuracy difference for RQ, and for LAS the macro-average of the accuracy gain over leaking and "
              "non-leaking rationales (NaN when one group is empty; `leak_rate` is the leaking share). "
              "`accuracy_with` is the accuracy of the evaluator that reads the rationale, `accuracy_base` of the one "
              "that does not (REV and LAREV: the baseline b only; larev_vs_empty: phi_LA with no rationale; "
              "RORA / RQ / LAS: the input x only).", "",
              markdown_table(summary), ""]
    seps = separation_table(summary)
    if seps.width > 1:
        parts += ["## Separations (gold minus degraded variant)", "",
                  "A useful metric scores the gold rationale above every degraded one: all positive, larger is "
                  "better. `vacuous` is the baseline itself, so it should score near 0. SUM adds the thesis's three "
                  "(leaky, gold_leaky, vacuous); SUM_read only those the evaluator reads (`unread`: read at chance, "
                  "flagged, not counted).", "",
                  markdown_table(seps), ""]
    notes = diagnose(summary)
    if notes:
        parts += ["## Notes", "", *[f"- {n}" for n in notes], ""]
    return "\n".join(parts)


def separation_plot(summary: pl.DataFrame, intervals: pl.DataFrame | None = None) -> bytes:
    """PNG bar chart of gold-minus-degraded separations per metric (like the LAREV thesis figure 5.4), with
    error bars when `intervals` (metric, quantity, ci_low, ci_high; larev.metrics.bootstrap) are given."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seps = separation_table(summary)
    metrics = seps["metric"].to_list()
    pairs = [f"gold-{d}" for d in DEGRADED if f"gold-{d}" in seps.columns]
    if not pairs:  # a user file without the built-in variants: nothing to separate, show the scores
        return source_plot(summary)
    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * max(1, len(pairs)), 3.4), dpi=120)
    width = 0.8 / max(1, len(metrics))
    for i, metric in enumerate(metrics):
        values = [seps.filter(pl.col("metric") == metric)[p].item() for p in pairs]
        xs = [j + (i - (len(metrics) - 1) / 2) * width for j in range(len(pairs))]
        yerr = None
        if intervals is not None:
            ci = {q: (lo, hi) for q, lo, hi in intervals.filter(pl.col("metric") == metric)
                  .select("quantity", "ci_low", "ci_high").iter_rows()}
            lows = [v - ci.get(p, (v, v))[0] for p, v in zip(pairs, values)]
            highs = [ci.get(p, (v, v))[1] - v for p, v in zip(pairs, values)]
            yerr = [[0.0 if math.isnan(x) else x for x in lows], [0.0 if math.isnan(x) else x for x in highs]]
        ax.bar(xs, values, width=width, label=metric.upper(), yerr=yerr, capsize=2 if yerr else 0)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(pairs)), pairs)
    ax.set_ylabel("separation (nats; RQ, LAS: accuracy)")
    ax.set_title("gold minus degraded rationale scores" + (" (95% bootstrap intervals)" if intervals is not None
                                                          else ""))
    if metrics:
        ax.legend(frameon=False)
    return png_bytes(fig)


MAX_PLOTTED_SOURCES = 8


def source_plot(summary: pl.DataFrame) -> bytes:
    """PNG bar chart of the aggregate score per rationale source, one group of bars per metric: what a run that
    scored only a user's file (no gold variant to separate from) shows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = summary["metric"].unique(maintain_order=True).to_list()
    sources = summary["source"].unique(maintain_order=True).to_list()
    title = "score per rationale source"
    if len(sources) > MAX_PLOTTED_SOURCES:  # a bar each would be unreadable: their mean per metric
        title = f"mean score over {len(sources)} rationale sources"
        summary = summary.group_by("metric", maintain_order=True).agg(pl.col("score").mean()).with_columns(
            source=pl.lit("mean"))
        sources = ["mean"]
    fig, ax = plt.subplots(figsize=(2.2 + 1.2 * max(1, len(metrics)), 3.4), dpi=120)
    width = 0.8 / max(1, len(sources))
    for i, source in enumerate(sources):
        part = dict(summary.filter(pl.col("source") == source).select("metric", "score").iter_rows())
        values = [part.get(m, float("nan")) for m in metrics]
        xs = [j + (i - (len(sources) - 1) / 2) * width for j in range(len(metrics))]
        ax.bar(xs, [0.0 if v is None or math.isnan(v) else v for v in values], width=width, label=source)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(metrics)), [m.upper() for m in metrics])
    ax.set_ylabel("mean score (nats; RQ, LAS: accuracy)")
    ax.set_title(title)
    if sources:
        ax.legend(frameon=False, fontsize=8)
    return png_bytes(fig)


SEPARATES, CANNOT_TELL, HIGHER, UNREAD = "separates", "cannot tell apart", "ranks it higher", "read at chance"
UNDEFINED = "undefined"
VERDICT_MARKS = {SEPARATES: " ", CANNOT_TELL: "=", HIGHER: "!", UNREAD: "~", UNDEFINED: "?"}


def verdict_table(intervals: pl.DataFrame, summary: pl.DataFrame | None = None,
                  reference: str = "gold") -> pl.DataFrame:
    """Per metric and built-in variant: `reference` minus the variant (the paired bootstrap of
    larev.metrics.bootstrap.bootstrap_intervals, its `reference-VARIANT` quantities), its interval, and a word:
    "read at chance" where `summary` says the metric's evaluator reads the variant at chance (its separation says
    the evaluator cannot read that text, not that the metric ranks it below the reference), else "separates" when
    the interval lies above 0, "ranks it higher" when below, "cannot tell apart" otherwise. Controls are left out."""
    unread = set()
    if summary is not None and "reads" in summary.columns:
        unread = {(m, v) for m, v, reads in summary.select("metric", "source", "reads").iter_rows() if reads is False}
    rows = []
    for r in intervals.iter_rows(named=True):
        if not r["quantity"].startswith(f"{reference}-") or r["metric"].startswith(CONTROL_PREFIX):
            continue
        variant, low, high = r["quantity"][len(reference) + 1:], r["ci_low"], r["ci_high"]
        known = low is not None and high is not None and not (math.isnan(low) or math.isnan(high))
        estimate = r["estimate"]
        word = (UNDEFINED if estimate is None or math.isnan(estimate) else UNREAD if (r["metric"], variant) in unread
                else SEPARATES if known and low > 0 else HIGHER if known and high < 0 else CANNOT_TELL)
        rows.append({"metric": r["metric"], "variant": variant, "difference": r["estimate"], "ci_low": low,
                     "ci_high": high, "verdict": word})
    return pl.DataFrame(rows, schema={"metric": pl.String, "variant": pl.String, "difference": pl.Float64,
                                      "ci_low": pl.Float64, "ci_high": pl.Float64, "verdict": pl.String})


def verdict_lines(verdict: pl.DataFrame, reference: str = "gold") -> list[str]:
    """The verdict as a few lines a newcomer reads at a glance: a table of `reference` minus each variant with its
    95 % interval (one row per metric, marked by VERDICT_MARKS), then one sentence per metric."""
    if verdict.height == 0:
        return []
    variants = [v for v in DEGRADED if v in set(verdict["variant"])]
    metrics = verdict["metric"].unique(maintain_order=True).to_list()
    cells = {(r["metric"], r["variant"]): f"{_signed(r['difference'])} [{_signed(r['ci_low'])},"
             f"{_signed(r['ci_high'])}]{VERDICT_MARKS[r['verdict']]}" for r in verdict.iter_rows(named=True)}
    width = max([len(c) for c in cells.values()] + [len(v) for v in variants]) + 1
    name_width = max(len(m) for m in metrics) + 1
    lines = [f"{reference} minus each variant, 95 % interval over test rows ('=' cannot tell apart, '!' ranks the "
             "variant higher, '~' its evaluator reads the variant at chance: not counted, '?' undefined):",
             " " * name_width + "".join(f"{v:<{width}}" for v in variants)]
    for m in metrics:
        lines.append(f"{m:<{name_width}}" + "".join(f"{cells.get((m, v), '-'):<{width}}" for v in variants))
    for m in metrics:
        part = verdict.filter(pl.col("metric") == m)
        said = {word: part.filter(pl.col("verdict") == word)["variant"].to_list() for word in VERDICT_MARKS}
        counted = part.height - len(said[UNREAD]) - len(said[UNDEFINED])
        sentence = f"{m} separates {reference} from {len(said[SEPARATES])} of {counted} variants it reads"
        if said[CANNOT_TELL]:
            sentence += f"; cannot tell it from {', '.join(said[CANNOT_TELL])}"
        if said[HIGHER]:
            sentence += f"; ranks {', '.join(said[HIGHER])} above it"
        if said[UNREAD]:
            sentence += f"; reads {', '.join(said[UNREAD])} at chance"
        if said[UNDEFINED]:
            sentence += f"; undefined for {', '.join(said[UNDEFINED])}"
        lines.append(sentence + ".")
    return lines


def _signed(x) -> str:
    return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:+.2f}"
