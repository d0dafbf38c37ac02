"""Paired comparison of rationale sources scored by the same evaluators: is source A's score higher than B's, by
how much, on which labels, and does the difference survive the evaluators' training seeds?

For a metric m and two sources A, B scored on the same test instances (ids) by S evaluator seeds:

  d[s, i] = score_m(A, i; seed s) - score_m(B, i; seed s)       per instance i and seed s
  d_bar[i] = mean_s d[s, i]                                      the instance's difference, seeds averaged
  estimate = mean_i d_bar[i]

  ids interval    BCa bootstrap of mean(d_bar) over instances (scipy.stats.bootstrap): test sampling only
  seeds interval  (S >= 2) Student t over the S per-seed means mean_i d[s, i] (scipy.stats.t): training variance
  p_value         paired sign-flip permutation test of mean(d_bar) = 0 (scipy.stats.permutation_test)
  p_adjusted      Benjamini-Hochberg over every pair of one metric when more than two sources are compared
                  (scipy.stats.false_discovery_control)
  win_rate        share of instances with d_bar > 0, ties counted 1/2

Before metric m is compared, the signatures of its scores (larev/signature.py: how they were made) are checked
(`check_signatures`): within one run every compared source must carry the same signature, and across the runs
read as seeds the signatures may differ only in their `seed` field; anything else is refused (NotComparable,
naming the metric, the two sources or runs and the fields that differ). A score without a signature (written
before signatures were kept) beside a signed one is compared unchecked, with a warning. Each compared metric's
signature is shown with the comparison, several seeds as `seed:0,1`.

Per-instance differences below `ties_below` count as ties (0): the same text scored in another batch moves a
float32 score by up to about 3e-6 nats (measured on the demo), which a BCa interval over 500 zeros-but-noise would
otherwise call a difference. A difference is called one only when every interval it has excludes 0 and its
(adjusted) p-value is below 1 - level; otherwise the verdict is "no difference".
Instances are paired by id, never by position, so a reordered copy of a file compares as identical. Only metrics
whose score is a mean over instances are compared (LAS's macro-average over leaking and non-leaking rows is not).

Pure: polars, numpy and scipy; the `compare-sources` flow (flows/compare.py) feeds it scores tables.
"""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
from pydantic import Field
from scipy import stats

from larev.config import _Config
from larev.errors import ConfigError
from larev.metrics.intervals import mean_interval
from larev.reports import png_bytes
from larev.signature import SIGNATURE_COLUMN, SIGNATURE_FIELDS, describe_difference, parse_signature, \
    signature_difference

ALL_LABELS = "(all)"

COMPARE_SCHEMA = {
    "metric": pl.String, "a": pl.String, "b": pl.String, "label": pl.String, "n": pl.Int64, "seeds": pl.Int64,
    "mean_a": pl.Float64, "mean_b": pl.Float64, "difference": pl.Float64, "ids_low": pl.Float64,
    "ids_high": pl.Float64, "seeds_low": pl.Float64, "seeds_high": pl.Float64, "seed_sd": pl.Float64,
    "win_rate": pl.Float64, "p_value": pl.Float64, "p_adjusted": pl.Float64, "verdict": pl.String,
    "signature": pl.String,
}


class NotComparable(ConfigError):
    """Scores of one metric whose signatures say they were not made the same way: comparing them would compare
    the evaluators or settings, not the rationales."""


class CompareConfig(_Config):
    """How sources are compared (docs/compare.md)."""

    level: float = Field(0.95, gt=0, lt=1, description="confidence level of every interval")
    n_boot: int = Field(2000, ge=100, description="bootstrap resamples of the instances (BCa interval)")
    n_permutations: int = Field(2000, ge=100, description="sign flips of the paired permutation test")
    seed: int = Field(0, description="seed of the resampling")
    by_label: bool = Field(True, description="also compare within each gold label")
    ties_below: float = Field(1e-4, ge=0, description="per-instance differences smaller than this count as ties "
                                                      "(float32 scoring noise is about 1e-6)")


def ids_interval(d_bar: np.ndarray, config: CompareConfig) -> tuple[float, float]:
    """BCa bootstrap interval of mean(d_bar) over instances (larev.metrics.intervals.mean_interval)."""
    return mean_interval(d_bar, level=config.level, n_boot=config.n_boot, seed=config.seed)


def seeds_interval(seed_means: np.ndarray, level: float) -> tuple[float, float, float]:
    """(low, high, sd): Student t interval of the mean of the per-seed means (NaN below 2 seeds)."""
    s = len(seed_means)
    if s < 2:
        return float("nan"), float("nan"), float("nan")
    sd = float(np.std(seed_means, ddof=1))
    half = float(stats.t.ppf(0.5 + level / 2, df=s - 1)) * sd / np.sqrt(s)
    centre = float(np.mean(seed_means))
    return centre - half, centre + half, sd


def sign_flip_p(d_bar: np.ndarray, config: CompareConfig) -> float:
    """Two-sided p-value of mean(d_bar) = 0 by flipping the sign of each instance's difference."""
    if len(d_bar) < 2 or not np.any(d_bar):
        return 1.0
    result = stats.permutation_test((d_bar,), np.mean, permutation_type="samples", vectorized=True,
                                    n_resamples=config.n_permutations, rng=config.seed)
    return float(result.pvalue)


def win_rate(d_bar: np.ndarray) -> float:
    """Share of instances where A scores higher than B, ties counted half."""
    if len(d_bar) == 0:
        return float("nan")
    return float(((d_bar > 0).sum() + 0.5 * (d_bar == 0).sum()) / len(d_bar))


def _excludes_zero(low: float, high: float) -> bool | None:
    if np.isnan(low) or np.isnan(high):
        return None
    return low > 0 or high < 0


def verdict(difference: float, intervals: list[tuple[float, float]], a: str, b: str, p_value: float,
            alpha: float = 0.05) -> str:
    """'A > B', 'A < B', or 'no difference' (some interval covers 0, or p_value >= alpha), in words."""
    checks = [_excludes_zero(low, high) for low, high in intervals]
    checks = [c for c in checks if c is not None]
    if not checks or not all(checks) or not p_value < alpha:
        return "no difference"
    return f"{a} > {b}" if difference > 0 else f"{a} < {b}"


def paired_differences(scores: pl.DataFrame, metric: str, a: str, b: str,
                       label: str | None = None) -> tuple[np.ndarray, float, float]:
    """(d [S, n] per seed and instance, mean of A, mean of B) on the instances every seed scored
    for both sources. `scores`: id, source, metric, score, seed[, label]."""
    part = scores.filter((pl.col("metric") == metric) & pl.col("source").is_in([a, b]))
    if label is not None:
        part = part.filter(pl.col("label") == label)
    seeds = sorted(part["seed"].unique().to_list())
    wide = part.pivot(on="source", index=["seed", "id"], values="score", aggregate_function="first")
    if a not in wide.columns or b not in wide.columns:
        return np.empty((len(seeds), 0)), float("nan"), float("nan")
    wide = wide.drop_nulls([a, b])
    common = wide.group_by("id").agg(pl.len().alias("k")).filter(pl.col("k") == len(seeds))["id"]
    wide = wide.filter(pl.col("id").is_in(common.implode())).sort("seed", "id")
    n = wide.height // max(1, len(seeds))
    score_a = wide[a].to_numpy().reshape(len(seeds), n)
    score_b = wide[b].to_numpy().reshape(len(seeds), n)
    return score_a - score_b, float(score_a.mean()) if n else float("nan"), \
        float(score_b.mean()) if n else float("nan")


def compare_pair(scores: pl.DataFrame, metric: str, a: str, b: str, config: CompareConfig,
                 label: str | None = None) -> dict:
    """One row of COMPARE_SCHEMA; its verdict on its own p-value (`compare_sources` adjusts both for more than two
    sources)."""
    d, mean_a, mean_b = paired_differences(scores, metric, a, b, label)
    d = np.where(np.abs(d) < config.ties_below, 0.0, d)
    seed_means = d.mean(axis=1) if d.size else np.empty(0)
    d_bar = d.mean(axis=0) if d.size else np.empty(0)
    estimate = float(d_bar.mean()) if d_bar.size else float("nan")
    ids_low, ids_high = ids_interval(d_bar, config)
    seeds_low, seeds_high, seed_sd = seeds_interval(seed_means, config.level)
    intervals = [(ids_low, ids_high)] + ([(seeds_low, seeds_high)] if len(seed_means) >= 2 else [])
    p_value = sign_flip_p(d_bar, config)
    return {"metric": metric, "a": a, "b": b, "label": ALL_LABELS if label is None else label, "n": int(d_bar.size),
            "seeds": int(d.shape[0]), "mean_a": mean_a, "mean_b": mean_b, "difference": estimate,
            "ids_low": ids_low, "ids_high": ids_high, "seeds_low": seeds_low, "seeds_high": seeds_high,
            "seed_sd": seed_sd, "win_rate": win_rate(d_bar), "p_value": p_value, "p_adjusted": p_value,
            "verdict": verdict(estimate, intervals, a, b, p_value, 1 - config.level), "signature": None}


def seeds_signature(signatures: list[str]) -> str:
    """One signature for several runs' signatures that differ at most in `seed`: the first one with its seed field
    listing every seed (`seed:0,1`)."""
    fields = [parse_signature(s) for s in signatures]
    seeds = sorted({f["seed"] for f in fields}, key=_seed_order)
    shown = {**fields[0], "seed": ",".join(seeds)}
    return "|".join(f"{k}:{shown[k]}" for k in SIGNATURE_FIELDS)


def _seed_order(seed: str) -> tuple:
    """Seeds in numeric order ("2" before "10"), any that is not an integer after them."""
    return (0, int(seed), "") if seed.lstrip("-").isdigit() else (1, 0, seed)


def _run_name(runs: list[str] | None, seed: int) -> str:
    return runs[seed] if runs is not None and 0 <= seed < len(runs) else f"run {seed}"


def check_signatures(scores: pl.DataFrame, sources: list[str], metrics: list[str],
                     runs: list[str] | None = None) -> tuple[dict[str, str | None], list[str]]:
    """({metric: the signature shown for it, None when no score of it is signed}, warnings: at most one line) for
    the `sources` under `metrics`; raises NotComparable (module docstring) when two scores must not be compared.
    `scores`: seed, source, metric[, signature] (a null or missing signature: unsigned); `runs`: the run of each
    seed, as the messages name them (default "run 0", "run 1", ...)."""
    if SIGNATURE_COLUMN not in scores.columns:
        scores = scores.with_columns(pl.lit(None, pl.String).alias(SIGNATURE_COLUMN))
    shown: dict[str, str | None] = {}
    unsigned: dict[tuple[str, str], list[str]] = {}  # (source, run) -> the metrics it has no signature for
    for metric in metrics:
        held = (scores.filter((pl.col("metric") == metric) & pl.col("source").is_in(sources))
                .group_by("seed", "source").agg(pl.col(SIGNATURE_COLUMN).drop_nulls().unique().sort()))
        found = {(r["seed"], r["source"]): r[SIGNATURE_COLUMN] for r in held.iter_rows(named=True)}
        per_run: dict[int, tuple[str, str]] = {}  # seed -> (the first signed source, its signature)
        missing: list[tuple[str, str]] = []
        for seed in sorted({seed for seed, _ in found}):
            run = _run_name(runs, seed)
            for source in [s for s in sources if (seed, s) in found]:
                signatures = found[(seed, source)]
                for signature in signatures:
                    try:
                        parse_signature(signature)
                    except ValueError as exc:
                        raise NotComparable(f"{metric}: {source} in {run}: {exc}") from None
                if len(signatures) > 1:
                    raise NotComparable(f"{metric}: {source} in {run} carries {len(signatures)} signatures "
                                        f"({'; '.join(signatures)}): its scores were not made in one way")
                if not signatures:
                    missing.append((source, run))
                elif seed not in per_run:
                    per_run[seed] = (source, signatures[0])
                elif signatures[0] != per_run[seed][1]:
                    first, signature = per_run[seed]
                    raise NotComparable(
                        f"{metric}: {first} and {source} in {run} were not scored the same way, "
                        f"{describe_difference(signature, signatures[0], first, source)}; compare sources scored "
                        "by one run's evaluators with one run's settings")
        seeds = sorted(per_run)
        for seed in seeds[1:]:
            base, other = per_run[seeds[0]][1], per_run[seed][1]
            if [f for f in signature_difference(base, other) if f != "seed"]:
                first_run, run = _run_name(runs, seeds[0]), _run_name(runs, seed)
                raise NotComparable(
                    f"{metric}: runs {first_run} and {run} are not seeds of one protocol (only the seed may "
                    f"differ): {describe_difference(base, other, first_run, run)}")
        shown[metric] = seeds_signature([per_run[s][1] for s in seeds]) if per_run else None
        if per_run:
            for key in missing:
                unsigned.setdefault(key, []).append(metric)
    warnings = []
    if unsigned:
        which = "; ".join(f"{source} in {run} ({', '.join(metrics_of)})" for (source, run), metrics_of
                          in unsigned.items())
        warnings.append(f"compared without a signature check: {which} carry no signature (scored before signatures "
                        "were kept) beside signed scores; their evaluators and settings may differ")
    return shown, warnings


def comparable_metrics(scores: pl.DataFrame) -> tuple[list[str], list[str]]:
    """(metrics whose score is a mean over instances, the others) in the order they appear."""
    kinds = scores.group_by("metric", maintain_order=True).agg(pl.col("aggregate").first()) \
        if "aggregate" in scores.columns else scores.select("metric").unique(maintain_order=True) \
        .with_columns(aggregate=pl.lit("mean"))
    mean = kinds.filter(pl.col("aggregate") == "mean")["metric"].to_list()
    return mean, [m for m in kinds["metric"].to_list() if m not in mean]


def compared_metrics(scores: pl.DataFrame, metrics: list[str] | None = None) -> list[str]:
    """The metrics a comparison covers: those whose score is a mean over instances, among `metrics` if given."""
    comparable, _ = comparable_metrics(scores)
    return [m for m in comparable if metrics is None or m in metrics]


def compare_sources(scores: pl.DataFrame, sources: list[str], config: CompareConfig | None = None,
                    metrics: list[str] | None = None, *,
                    signatures: dict[str, str | None] | None = None) -> pl.DataFrame:
    """Every pair of `sources` (in the given order: A is the earlier one) under every comparable metric, on all
    instances and (config.by_label) within each gold label. `scores`: id, source, metric, score, seed, label,
    aggregate (one row per seed, metric, source and id). `signatures`: each metric's signature as
    `check_signatures` gives it, shown in every row of the metric (the check itself is the caller's)."""
    config = config or CompareConfig()
    missing = [s for s in sources if s not in set(scores["source"].unique().to_list())]
    if missing:
        raise ValueError(f"no scores for source(s) {missing}")
    if len(sources) < 2:
        raise ValueError("compare needs at least two sources")
    chosen = compared_metrics(scores, metrics)
    signatures = signatures or {}
    labels = sorted(scores["label"].drop_nulls().unique().to_list()) if config.by_label and "label" in \
        scores.columns else []
    rows = []
    for metric in chosen:
        for a, b in itertools.combinations(sources, 2):
            pair = [compare_pair(scores, metric, a, b, config)]
            pair += [compare_pair(scores, metric, a, b, config, label) for label in labels]
            rows += [{**r, "signature": signatures.get(metric)} for r in pair]
    table = pl.DataFrame(rows, schema=COMPARE_SCHEMA)
    return adjust_p_values(table, 1 - config.level) if len(sources) > 2 else table


def adjust_p_values(table: pl.DataFrame, alpha: float) -> pl.DataFrame:
    """Benjamini-Hochberg adjusted p-values over the pairs of each metric (all instances; the per-label rows over
    the pairs within their label), and the verdicts that were differences re-read against them."""
    parts = []
    for _, part in table.group_by("metric", "label", maintain_order=True):
        adjusted = stats.false_discovery_control(part["p_value"].to_numpy(), method="bh")
        parts.append(part.with_columns(p_adjusted=pl.Series(adjusted, dtype=pl.Float64)))
    if not parts:
        return table
    return pl.concat(parts).with_columns(
        verdict=pl.when(pl.col("p_adjusted") >= alpha).then(pl.lit("no difference")).otherwise(pl.col("verdict")))


def _fmt(x: float, digits: int = 3) -> str:
    return "-" if x is None or np.isnan(x) else f"{x:+.{digits}f}"


def compare_markdown(table: pl.DataFrame, sources: list[str], *, skipped: list[str], seeds: int,
                     config: CompareConfig, warnings: list[str] = ()) -> str:
    """compare.md: one table per metric (all instances) under its signature, then the per-label breakdown, with
    the notes a reader needs to read the intervals (and `warnings`, e.g. scores compared without a signature)."""
    level = f"{config.level:.0%}"
    lines = [f"# larev compare: {', '.join(sources)}", "",
             f"Paired by instance id; {level} intervals. ids: BCa bootstrap over instances ({config.n_boot} "
             "resamples; test sampling only)."
             + (f" seeds: Student t over the {seeds} evaluator seeds' means (training variance)." if seeds >= 2 else
                " One evaluator seed: the interval does not cover training variance.")
             + f" p: paired sign-flip permutation test. A difference whose interval covers 0, or whose p is not "
               f"below {1 - config.level:.2g}, is reported as **no difference**; per-instance differences below "
               f"{config.ties_below:g} count as ties.", ""]
    if len(sources) > 2:
        pairs = len(sources) * (len(sources) - 1) // 2
        lines += [f"Multiple comparisons: {pairs} pairs per metric. p is Benjamini-Hochberg adjusted over them, and a "
                  "verdict needs it below the level's alpha; the intervals themselves are not adjusted.", ""]
    if skipped:
        lines += [f"Not compared: {', '.join(skipped)} (the score is not a mean over instances).", ""]
    lines += [f"**Warning:** {w}." for w in warnings] + ([""] if warnings else [])
    overall = table.filter(pl.col("label") == ALL_LABELS)
    header = "| A | B | mean A | mean B | A - B | ids interval | seeds interval | win rate A | p | verdict |"
    for metric in overall["metric"].unique(maintain_order=True).to_list():
        signature = overall.filter(pl.col("metric") == metric)["signature"][0]
        shown = f"`{signature}`" if signature else "none (scored before signatures were kept)"
        lines += [f"## {metric}", "", f"Signature: {shown}", "", header, "| --- " * 10 + "|"]
        for r in overall.filter(pl.col("metric") == metric).iter_rows(named=True):
            seeds_cell = f"[{_fmt(r['seeds_low'])}, {_fmt(r['seeds_high'])}]" if r["seeds"] >= 2 else "-"
            lines.append(f"| {r['a']} | {r['b']} | {_fmt(r['mean_a'])} | {_fmt(r['mean_b'])} | "
                         f"**{_fmt(r['difference'])}** | [{_fmt(r['ids_low'])}, {_fmt(r['ids_high'])}] | {seeds_cell} "
                         f"| {r['win_rate']:.2f} | {r['p_adjusted']:.3g} | {r['verdict']} |")
        lines.append("")
        by_label = table.filter((pl.col("metric") == metric) & (pl.col("label") != ALL_LABELS))
        if by_label.height:
            lines += [f"### {metric} by gold label", "", "| label | A | B | n | A - B | ids interval | verdict |",
                      "| --- " * 7 + "|"]
            for r in by_label.iter_rows(named=True):
                lines.append(f"| {r['label']} | {r['a']} | {r['b']} | {r['n']} | {_fmt(r['difference'])} | "
                             f"[{_fmt(r['ids_low'])}, {_fmt(r['ids_high'])}] | {r['verdict']} |")
            lines.append("")
    return "\n".join(lines)


def compare_plot(table: pl.DataFrame) -> bytes:
    """compare.png: each pair's difference with its ids interval (and seeds interval, thinner), one panel per
    metric, all instances."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    overall = table.filter(pl.col("label") == ALL_LABELS)
    metrics = overall["metric"].unique(maintain_order=True).to_list()
    pairs = overall.filter(pl.col("metric") == metrics[0]).height if metrics else 0
    fig, axes = plt.subplots(1, max(1, len(metrics)), figsize=(4 * max(1, len(metrics)), 1.0 + 0.5 * pairs),
                             squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        part = overall.filter(pl.col("metric") == metric)
        y = np.arange(part.height)[::-1]
        diff = part["difference"].to_numpy()
        low, high = part["ids_low"].to_numpy(), part["ids_high"].to_numpy()
        ax.errorbar(diff, y, xerr=[diff - low, high - diff], fmt="o", color="tab:blue", capsize=3, label="ids")
        seeds = part["seeds_low"].is_not_nan().to_numpy() if part.height else np.zeros(0, bool)
        if seeds.any():
            s_low, s_high = part["seeds_low"].to_numpy(), part["seeds_high"].to_numpy()
            ax.errorbar(diff[seeds], y[seeds] - 0.15, xerr=[(diff - s_low)[seeds], (s_high - diff)[seeds]],
                        fmt="none", color="tab:orange", capsize=2, label="seeds")
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_yticks(y, [f"{a} - {b}" for a, b in zip(part["a"], part["b"])])
        ax.set_title(metric)
        ax.set_xlabel("paired difference")
    axes[0][0].legend(loc="best", fontsize="small")
    return png_bytes(fig)
