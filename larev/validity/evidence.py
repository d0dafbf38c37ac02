"""Every scorer on the three kinds of evidence of the validity protocol, as results.json's "scorers" holds them:
{SCORER: {CRITERION: {"value", "low", "high", "met", "n", "per_seed"[, "trained_on"]}}}.

  a. human judgements (each file's half of the split): acceptability_auroc/<file>, acceptability_ap/<file> (an
     explanation is acceptable with at least `acceptable_votes` votes; pooled over explanations),
     pairwise/<file> (within an instance, the order of votes, or of the "new and supporting" share on a
     fine-grained file), spearman_new_info/<file> and spearman_supports/<file> (fine-grained files)
  b. perturbations (larev/validity/perturb.py): perturb/<kind> (mean score - gold's, per instance),
     perturb_order/<kind> (share of instances with gold above: 1/2 for a tie), and for a 'near' kind
     perturb_corr/<kind> (Spearman of gold's and its scores across instances)
  c. the built-in variants, the same three as variant/<name>, variant_order/<name>, variant_corr/<name>
  d. generators of known quality (the protocol's tasks.<task>.generators, best first): generator_order, Kendall's
     tau of the scorer's mean score of each generator's rationales with the known order, over the pairs it ranks
     (on the instances every generator wrote a rationale for)

Scorers: each metric a run scored (rev, larev, larev_vs_empty, r_only, rora, rq, las, larev_<ablation>, control_<name>),
and the baselines: length (words: longer scores higher) and gpt3_nll (minus GPT-3's NLL; human files that have it).
Value: the mean over seeds of each seed's figure; the interval: larev/validity/criteria.py's bootstrap over seeds
and instances; met: larev/validity/protocol.py's `is_met` with the criterion's threshold. A cell on a kind of text
the scorer trained on (`trained_on` in the protocol) is marked and never judged (met null).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl
from scipy import stats
from sklearn.metrics import average_precision_score, roc_auc_score

from larev.human.agreement import pairwise_credits
from larev.human.annotations import Annotations
from larev.validity.criteria import (Draws, combine_seeds, interval, kendall_tau_with_order, order_credit, ratio,
                                     weighted_auroc, weighted_average_precision, weighted_spearman)
from larev.validity.perturb import PREFIX
from larev.validity.protocol import GENERATOR_ORDER, Protocol, is_met

SCORER_ORDER = ("rev", "larev", "larev_vs_empty", "r_only", "rora", "rq", "las", "larev_no_irm", "larev_no_probe",
                "larev_erm_envs", "control_erm_envs", "control_phi", "control_r_only", "length", "gpt3_nll")
LAREV_DEFINITIONS = ("larev", "larev_vs_empty")
# what each LAREV definition is read against, paired ("beats it by more than the interval": the difference's low > 0)
REFERENCES = ("rev", "control_erm_envs", "r_only", "control_r_only")
# figures in each scorer's own units (nats, accuracy, words): compared with a threshold, never across scorers
UNITS_OWN = ("perturb/", "variant/")


@dataclass
class SeedScores:
    """One seed's pointwise scores (metric, id, source, score): the split's rows and each human file's half."""

    test: pl.DataFrame
    human: dict[str, pl.DataFrame] = field(default_factory=dict)
    signatures: dict[str, str] = field(default_factory=dict)


def _order(names) -> list[str]:
    return sorted(set(names), key=lambda m: (SCORER_ORDER.index(m) if m in SCORER_ORDER else len(SCORER_ORDER), m))


class _Collector:
    """Figures of every scorer, with their bootstrap samples kept for paired differences."""

    def __init__(self, protocol: Protocol):
        self.protocol = protocol
        self.cells: dict[str, dict[str, dict]] = {}
        self.samples: dict[tuple[str, str], np.ndarray] = {}
        self.context: dict[str, dict] = {}

    def add(self, scorer: str, criterion: str, points: list[float], per_seed_samples: np.ndarray, draws: Draws,
            n: int, *, trained_on: bool = False, context: dict | None = None) -> None:
        """One cell; `context` adds what the criterion's threshold reads for this scorer (its gold sd)."""
        finite = [p for p in points if p is not None and np.isfinite(p)]
        value = float(np.mean(finite)) if finite else None
        combined = combine_seeds(per_seed_samples, draws) if draws.n_boot else np.array([])
        low, high = interval(combined, self.protocol.level)
        met = None if trained_on else is_met(self.protocol.criterion(criterion), value, low, high,
                                             **{**self.context.get(criterion, {}), **(context or {})})
        cell = {"value": value, "low": low, "high": high, "met": met, "n": n,
                "per_seed": [None if p is None or not np.isfinite(p) else float(p) for p in points]}
        if trained_on:
            cell["trained_on"] = True
        self.cells.setdefault(scorer, {})[criterion] = cell
        self.samples[(scorer, criterion)] = combined


def _aligned(judged: pl.DataFrame, scores: pl.DataFrame) -> np.ndarray:
    """Each judged (id, source)'s score (NaN where the scorer has none), in `judged`'s row order."""
    joined = judged.select("id", "source").with_row_index("__i").join(
        scores.select("id", "source", "score"), on=["id", "source"], how="left").sort("__i")
    return joined["score"].cast(pl.Float64).fill_null(np.nan).to_numpy()


def _scorer_frames(per_seed: dict[int, SeedScores], part) -> dict[str, list[pl.DataFrame]]:
    """{metric: [its scores in each seed]} of one part (`part(seed_scores)` -> a score frame or None)."""
    out: dict[str, list[pl.DataFrame]] = {}
    for seed in per_seed.values():
        frame = part(seed)
        if frame is None:
            continue
        for (metric,), rows in frame.group_by("metric"):
            out.setdefault(metric, []).append(rows)
    return {m: out[m] for m in _order(out)}


def _human_figures(c: _Collector, name: str, ann: Annotations, frames: dict[str, list[pl.DataFrame]]) -> None:
    protocol = c.protocol
    judged = ann.judgements.sort("id", "source")
    ids = judged["id"].unique(maintain_order=True).to_list()
    index = {k: i for i, k in enumerate(ids)}
    instance = np.array([index[k] for k in judged["id"].to_list()])
    n_seeds = max((len(v) for v in frames.values()), default=1)
    # each scorer's score of every judged explanation, per seed
    columns: dict[str, list[np.ndarray]] = {m: [_aligned(judged, f) for f in fs] for m, fs in frames.items()}
    if "length" in protocol.scorers.baselines:
        columns["length"] = [_aligned(judged, _length_frames(ann.rationales)[0])]
    if ann.kind == "acceptability":
        if "gpt3_nll" in protocol.scorers.baselines and judged["gpt3_nll"].null_count() < judged.height:
            columns["gpt3_nll"] = [-judged["gpt3_nll"].cast(pl.Float64).fill_null(np.nan).to_numpy()]
        accept = (judged["votes"] >= protocol.acceptable_votes).to_numpy().astype(np.float64)
        prevalence = float(accept.mean())
        c.context[f"acceptability_ap/{name}"] = {"prevalence": prevalence}
        figures = {f"acceptability_auroc/{name}": (accept, weighted_auroc, roc_auc_score),
                   f"acceptability_ap/{name}": (accept, weighted_average_precision, average_precision_score)}
        target = "votes"
    else:
        figures = {f"spearman_new_info/{name}": (judged["new_info"].to_numpy(), weighted_spearman, None),
                   f"spearman_supports/{name}": (judged["supports"].to_numpy(), weighted_spearman, None)}
        target = "human"
    for criterion, (truth, weighted, exact) in figures.items():
        draws = Draws(criterion, len(ids), n_seeds, protocol.bootstrap)
        for scorer, per_seed in columns.items():
            points, samples = [], []
            for s in per_seed:
                ok = np.isfinite(s)
                if exact is not None:
                    both = len(np.unique(truth[ok])) == 2
                    points.append(float(exact(truth[ok], s[ok])) if both else None)
                else:
                    points.append(float(stats.spearmanr(s[ok], truth[ok]).statistic) if ok.sum() > 2 else None)
                samples.append(weighted(s[ok], truth[ok], draws.rows(instance[ok])) if draws.n_boot
                               else np.array([]))
            # AP's threshold is the base rate of the rows this scorer scored (a scorer with no score for some rows
            # is not judged against the whole file's)
            own = ({"prevalence": float(np.mean([truth[np.isfinite(s)].mean() for s in per_seed]))}
                   if criterion.startswith("acceptability_ap/") else None)
            c.add(scorer, criterion, points, np.array(samples), draws, max(int(np.isfinite(s).sum()) for s in per_seed),
                  context=own)
    criterion = f"pairwise/{name}"
    draws = Draws(criterion, len(ids), n_seeds, protocol.bootstrap)
    for scorer, per_seed in columns.items():
        points, samples, n_pairs = [], [], 0
        for s in per_seed:
            frame = judged.select("id", target).with_columns(score=pl.Series(s)).filter(pl.col("score").is_finite())
            credits = pairwise_credits(frame, "score", target)
            at = pl.DataFrame({"id": ids}).join(credits, on="id", how="left", maintain_order="left").fill_null(0)
            credit, pairs = at["credit"].to_numpy().astype(np.float64), at["pairs"].to_numpy().astype(np.float64)
            points.append(float(credit.sum() / pairs.sum()) if pairs.sum() else None)
            n_pairs = max(n_pairs, int(pairs.sum()))
            samples.append(ratio(credit, pairs, draws.instances) if draws.n_boot else np.array([]))
        c.add(scorer, criterion, points, np.array(samples), draws, n_pairs)


def _pair_figures(c: _Collector, head: str, kind: str, expected: str, gold: dict[str, dict[int, pl.DataFrame]],
                  other: dict[str, dict[int, pl.DataFrame]], ids: list[str], gold_sd: dict[str, float | None]) -> None:
    """perturb/<kind>, perturb_order/<kind>[, perturb_corr/<kind>] (or variant_...) of every scorer: the source's
    score against gold's on the instances where both are scored, in each seed that scored both. A 'near' kind's
    threshold reads the scorer's own `gold_sd`; only a 'near' kind has the correlation."""
    protocol = c.protocol
    index = {k: i for i, k in enumerate(ids)}
    n_seeds = max((len(v) for v in other.values()), default=1)
    names = {"diff": f"{head}/{kind}", "order": f"{head}_order/{kind}"}
    if expected == "near":
        names["corr"] = f"{head}_corr/{kind}"
    draws = {key: Draws(name, len(ids), n_seeds, protocol.bootstrap) for key, name in names.items()}
    for scorer, frames in other.items():
        trained = kind in protocol.trained_on_kinds(scorer)
        points: dict[str, list] = {k: [] for k in names}
        samples: dict[str, list] = {k: [] for k in names}
        n = 0
        mine = gold.get(scorer, {})
        for g, o in ((mine[place], frames[place]) for place in sorted(set(mine) & set(frames))):
            pair = g.select("id", gold="score").join(o.select("id", other="score"), on="id", how="inner").filter(
                pl.col("gold").is_finite() & pl.col("other").is_finite())  # a missing score is left out, not 0
            inst = np.array([index[k] for k in pair["id"].to_list()], dtype=np.int64)
            sg, so = pair["gold"].to_numpy().astype(np.float64), pair["other"].to_numpy().astype(np.float64)
            n = max(n, len(inst))
            paired = len(inst) > 0  # this seed's figures exist
            diff = np.zeros(len(ids))
            credit = np.zeros(len(ids))
            present = np.zeros(len(ids))
            np.add.at(diff, inst, so - sg)
            np.add.at(credit, inst, order_credit(sg, so))
            np.add.at(present, inst, 1.0)
            points["diff"].append(float((so - sg).mean()) if paired else None)
            points["order"].append(float(order_credit(sg, so).mean()) if paired else None)
            if protocol.bootstrap:
                samples["diff"].append(ratio(diff, present, draws["diff"].instances))
                samples["order"].append(ratio(credit, present, draws["order"].instances))
            if "corr" in names:
                rho = (stats.spearmanr(sg, so).statistic if len(inst) > 2 and np.ptp(sg) > 0 and np.ptp(so) > 0
                       else np.nan)
                points["corr"].append(float(rho))
                if protocol.bootstrap:
                    samples["corr"].append(weighted_spearman(sg, so, draws["corr"].rows(inst)))
        if not points["diff"]:
            continue
        for key, name in names.items():
            c.add(scorer, name, points[key], np.array(samples[key]) if samples[key] else np.zeros((1, 0)),
                  draws[key], n, trained_on=trained, context={"gold_sd": gold_sd.get(scorer)})


def _generator_figures(c: _Collector, generators: list[str], tiers: list[int],
                       by_source: dict[str, dict[str, dict[int, pl.DataFrame]]],
                       ids: list[str]) -> dict[str, dict[str, float]]:
    """generator_order of every scorer that scored each generator's rationales in every seed: per seed, Kendall's
    tau of its mean score per generator (over the instances every generator has a score for) with the known order
    (`tiers`: each generator's place, 0 best); resamples reweight those instances. The figure is the mean of the
    seeds' taus. Returns each scorer's mean score per generator, averaged over seeds (shown beside the tau; the tau
    of these averages can differ from the mean of the seeds' taus)."""
    index = {k: i for i, k in enumerate(ids)}
    n_seeds = max((len(v[g]) for v in by_source.values() for g in generators if g in v), default=1)
    draws = Draws(GENERATOR_ORDER, len(ids), n_seeds, c.protocol.bootstrap)
    means: dict[str, dict[str, float]] = {}
    for scorer, sources in by_source.items():
        # a scorer is judged on the seeds in which it scored every generator (a seed's frames go together)
        if not all(g in sources for g in generators):
            continue
        places = sorted(set.intersection(*(set(sources[g]) for g in generators)))
        points, samples, seed_means, n = [], [], [], 0
        for frames in ([sources[g][place] for g in generators] for place in places):
            matrix = np.full((len(ids), len(generators)), np.nan)
            for j, frame in enumerate(frames):
                known = frame.filter(pl.col("id").is_in(list(index)))
                matrix[[index[k] for k in known["id"].to_list()], j] = known["score"].cast(pl.Float64).to_numpy()
            complete = np.isfinite(matrix).all(axis=1)  # a missing score leaves its instance out, not 0
            n = max(n, int(complete.sum()))
            if not complete.any():  # this seed has no figure; its place in the seed draws stays (NaN)
                points.append(None)
                samples.append(np.full(draws.n_boot, np.nan))
                continue
            own = matrix[complete].mean(axis=0)
            seed_means.append(own)
            points.append(float(kendall_tau_with_order(own, tiers)[0]))
            if draws.n_boot:
                w = draws.instances[:, complete]
                with np.errstate(invalid="ignore", divide="ignore"):
                    resampled = (w @ matrix[complete]) / w.sum(axis=1, keepdims=True)
                samples.append(kendall_tau_with_order(resampled, tiers))
        if not seed_means:
            continue
        c.add(scorer, GENERATOR_ORDER, points, np.array(samples) if draws.n_boot else np.zeros((1, 0)), draws, n)
        means[scorer] = {g: float(v) for g, v in zip(generators, np.mean(seed_means, axis=0))}
    return means


def _length_frames(texts: pl.DataFrame) -> list[pl.DataFrame]:
    """The length baseline's scores (words in the rationale) of id, source, rationale rows: one seedless frame."""
    return [texts.select("id", "source", score=pl.col("rationale").fill_null("").str.split(" ")
                         .list.eval(pl.element().filter(pl.element() != "")).list.len().cast(pl.Float64))]


def evaluate(protocol: Protocol, task: str, per_seed: dict[int, SeedScores], annotations: dict[str, Annotations],
             *, texts: pl.DataFrame | None = None, decide: bool = False) -> dict:
    """results.json's "scorers", "best", "versus", "n" (instances per part) and "context" (each criterion's
    base rate or gold's sd where its threshold needs one); with `decide` (the tune split), "decisions": the
    protocol's defaults decided on this run (`decisions`)."""
    c = _Collector(protocol)
    # b and c: the split's rows, gold against each perturbation and variant
    test = _scorer_frames(per_seed, lambda s: s.test)
    if texts is not None and "length" in protocol.scorers.baselines:
        test["length"] = _length_frames(texts)
    # {scorer: {source: {seed place: its rows}}}: a source missing from one seed leaves that place out, so gold and
    # each kind are paired within a seed, never across seeds
    by_source: dict[str, dict[str, dict[int, pl.DataFrame]]] = {m: {} for m in test}
    for m, frames in test.items():
        for place, frame in enumerate(frames):
            for (source,), rows in frame.group_by("source"):
                by_source[m].setdefault(source, {})[place] = rows.select("id", "score")
    gold = {m: v.get("gold", {}) for m, v in by_source.items()}
    gold_sd = {m: float(np.mean([f["score"].std() for f in v.values()])) if v else None for m, v in gold.items()}
    gold_ids = sorted({k for v in gold.values() for f in v.values() for k in f["id"].to_list()})
    n: dict[str, int] = {"test_instances": len(gold_ids)}
    for head, kinds, prefix in (("perturb", protocol.perturbations, PREFIX), ("variant", protocol.variants, "")):
        for kind, expected in kinds.items():
            other = {m: v[prefix + kind] for m, v in by_source.items() if prefix + kind in v}
            if not other:
                continue
            _pair_figures(c, head, kind, expected, gold, other, gold_ids, gold_sd)
    known = protocol.tasks.get(task)
    generators = [g.name for g in known.generator_configs()] if known else []
    tiers = known.generator_tiers() if known else []
    generator_means = _generator_figures(c, generators, tiers, by_source, gold_ids) if generators else {}
    # a: human judgements
    for name, ann in annotations.items():
        frames = _scorer_frames(per_seed, lambda s, name=name: s.human.get(name))
        _human_figures(c, name, ann, frames)
        n[f"human/{name}"] = ann.judgements["id"].n_unique()
    scorers = {m: c.cells[m] for m in _order(c.cells)}
    extra = {"generators": {"order": generators, "tiers": tiers, "mean_score": generator_means}} if generators else {}
    if decide and known and known.decisions:
        seeds_of: dict[str, list[int]] = {}
        for seed, scores in sorted(per_seed.items()):
            for name in scores.test["metric"].unique().to_list():
                seeds_of.setdefault(name, []).append(seed)
        extra["decisions"] = decisions(c, task, seeds_of)
    return {"scorers": scorers, "best": best_by_criterion(c), "versus": versus(c), "pairs": metric_pairs(c),
            "n": n, **extra,
            "gold_sd": {m: v for m, v in gold_sd.items() if v is not None},
            "context": {k: v for k, v in c.context.items() if v}}


def _higher_is_better(protocol: Protocol, criterion: str) -> bool | None:
    """Whether a higher figure is better across scorers: True for a criterion the protocol judges `above` its
    threshold; None where scorers are not compared (own units, a criterion without a threshold, the order share of a
    'near' kind, which has no expected order, or one judged `below`, which nothing ranks on)."""
    if criterion.startswith(UNITS_OWN):
        return None
    judged = protocol.criterion(criterion)
    return True if judged is not None and judged.direction == "above" else None


def _paired(c: _Collector, a: str, b: str, criterion: str) -> tuple[float | None, float | None]:
    sa, sb = c.samples.get((a, criterion)), c.samples.get((b, criterion))
    if sa is None or sb is None or sa.size == 0 or sb.size == 0:
        return None, None
    return interval(sa - sb, c.protocol.level)


def best_by_criterion(c: _Collector) -> dict[str, dict]:
    """Per comparable criterion: the best scorer (cells on trained-on kinds left out), the runner-up, and best -
    runner-up with its paired interval."""
    out: dict[str, dict] = {}
    criteria = sorted({k for cells in c.cells.values() for k in cells})
    for criterion in criteria:
        if not _higher_is_better(c.protocol, criterion):
            continue
        order = list(c.cells)
        ranked = sorted(((cells[criterion]["value"], m) for m, cells in c.cells.items()
                         if criterion in cells and cells[criterion]["value"] is not None
                         and not cells[criterion].get("trained_on")),
                        key=lambda vm: (-vm[0], order.index(vm[1])))  # ties: the table's order
        if not ranked:
            continue
        entry = {"scorer": ranked[0][1], "value": ranked[0][0]}
        if len(ranked) > 1:
            low, high = _paired(c, ranked[0][1], ranked[1][1], criterion)
            entry.update(runner_up=ranked[1][1], difference=ranked[0][0] - ranked[1][0], low=low, high=high)
        out[criterion] = entry
    return out


def paired_versus(c: _Collector, mine: str, other: str) -> dict[str, dict]:
    """`mine` minus `other` on every criterion both are judged on that ranks scorers, with the paired interval:
    {CRITERION: {"difference", "low", "high", "beats"}}; beats: the interval above 0. Cells on a kind either
    scorer trained on are left out."""
    out: dict[str, dict] = {}
    for criterion, cell in c.cells.get(mine, {}).items():
        theirs = c.cells.get(other, {}).get(criterion)
        if theirs is None or not _higher_is_better(c.protocol, criterion) \
                or cell["value"] is None or theirs["value"] is None or cell.get("trained_on") \
                or theirs.get("trained_on"):
            continue
        low, high = _paired(c, mine, other, criterion)
        out[criterion] = {"difference": cell["value"] - theirs["value"], "low": low, "high": high,
                          "beats": None if low is None else low > 0}
    return out


def versus(c: _Collector) -> dict[str, dict]:
    """Each LAREV definition minus each reference scorer (`paired_versus`): {"larev": {"rev": {CRITERION: ...}}}."""
    out: dict[str, dict] = {}
    for mine in LAREV_DEFINITIONS:
        for other in REFERENCES:
            if mine in c.cells and other in c.cells and (pairs := paired_versus(c, mine, other)):
                out.setdefault(mine, {})[other] = pairs
    return out


def metric_pairs(c: _Collector) -> dict[str, dict[str, dict]]:
    """Every ordered pair of metrics (candidates and arms included) read against each other, paired over the same
    draws: {a: {b: {"better", "worse", "criteria"}}}, the criteria both are judged on that rank scorers where the
    interval of a - b lies above 0 (better) or below 0 (worse). A lead in thresholds met that these do not back is
    not a separation (larev/validity/report.py `recommendation_lines`)."""
    names = [m for m in c.cells if m.split("@")[0] in c.protocol.scorers.metrics]
    out: dict[str, dict[str, dict]] = {}
    for a in names:
        for b in names:
            if a == b:
                continue
            pairs = paired_versus(c, a, b)
            out.setdefault(a, {})[b] = {
                "better": sorted(k for k, v in pairs.items() if v["low"] is not None and v["low"] > 0),
                "worse": sorted(k for k, v in pairs.items() if v["high"] is not None and v["high"] < 0),
                "criteria": len(pairs)}
    return out


def decisions(c: _Collector, task: str, seeds_of: dict[str, list[int]]) -> dict[str, dict]:
    """The protocol's decisions for the task (tasks.<task>.decisions), each metric's candidates read against it by
    the protocol's rule (larev/validity/decisions.py); a metric the run did not score is left out, and so is a
    candidate scored on other seeds than its default (`seeds_of`: the seeds each scorer has scores from), which
    the paired draws could not pair."""
    from larev.validity.decisions import decide

    out: dict[str, dict] = {}
    for metric, candidates in c.protocol.tasks[task].decisions.items():
        if metric in c.cells:
            out[metric] = decide(metric, candidates, {
                name: paired_versus(c, name, metric) for name in candidates
                if name in c.cells and seeds_of.get(name) == seeds_of.get(metric)}, c.protocol.decision_rule)
    return out
