"""The validity benchmark's results page: results.json (as larev/validity/evidence.py and flows/validity.py build
it), results.md (rows are scorers, columns criteria; a mark where the protocol's threshold is met) and results.png.

Marks: ✓ the figure meets the protocol's threshold, ✗ it does not, † the scorer trained on this kind of text (not
judged), no mark: no threshold (the order share of a 'near' kind).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl

from larev.reports import markdown_table, png_bytes
from larev.signature import signature_difference
from larev.validity.protocol import GENERATOR_ORDER, HUMAN_CRITERIA

MARKS = {True: " ✓", False: " ✗", None: ""}
METRICS_FIRST_CLASS = ("rev", "larev", "larev_vs_empty", "r_only", "rora", "rq", "las")
KIND_OF_SCORER = {"control_": "a control", "larev_no_": "an ablation", "larev_erm": "an ablation"}
BASELINES = ("length", "gpt3_nll")


def kind_of(scorer: str) -> str:
    if scorer in BASELINES:
        return "a baseline"
    if "@" in scorer:
        return "a decision candidate"
    for prefix, kind in KIND_OF_SCORER.items():
        if scorer.startswith(prefix):
            return kind
    return "a metric"


def _num(x, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:+.{digits}f}" if x < 0 else f"{x:.{digits}f}"


def cell_text(cell: dict | None) -> str:
    if cell is None:
        return ""
    text = _num(cell["value"])
    if cell.get("low") is not None:
        text += f" [{_num(cell['low'])}, {_num(cell['high'])}]"
    return text + ("†" if cell.get("trained_on") else MARKS[cell.get("met")])


def criteria_table(results: dict, criteria: list[str]) -> str:
    rows = [{"scorer": m, **{c: cell_text(cells.get(c)) for c in criteria}} for m, cells in results["scorers"].items()
            if any(c in cells for c in criteria)]
    return markdown_table(pl.DataFrame(rows, schema={"scorer": pl.String, **{c: pl.String for c in criteria}}))


def _criteria(results: dict, head: str) -> list[str]:
    seen: list[str] = []
    for cells in results["scorers"].values():
        seen += [c for c in cells if c.split("/")[0] == head and c not in seen]
    return seen


# the criteria of evidence b and c, by the part of their names before '/'
EVIDENCE_HEADS = {"perturbations": ("perturb", "perturb_order", "perturb_corr"),
                  "variants": ("variant", "variant_order", "variant_corr")}


def met_in(cells: dict, heads: tuple[str, ...]) -> tuple[int, int]:
    """(criteria met, criteria judged) among one scorer's cells whose names start with one of `heads`."""
    judged = [cell["met"] for name, cell in cells.items()
              if name.split("/")[0] in heads and cell.get("met") is not None]
    return sum(judged), len(judged)


def human_criteria(results: dict) -> list[str]:
    """The human-judgement criteria of a results.json, in the protocol's order."""
    return [c for h in HUMAN_CRITERIA for c in _criteria(results, h)]


def headline_table(results: dict) -> str:
    """One row per scorer: its human-judgement figures, then how many perturbation and variant criteria it meets
    (of those it is judged on), then all thresholds met."""
    human = human_criteria(results)
    with_generators = bool(_criteria(results, GENERATOR_ORDER))
    rows = []
    for scorer, cells in results["scorers"].items():
        row = {"scorer": scorer}
        for c in human:
            row[c.replace("acceptability_", "")] = cell_text(cells.get(c))
        for label, heads in EVIDENCE_HEADS.items():
            met, judged = met_in(cells, heads)
            row[f"{label} met"] = f"{met} of {judged}" if judged else ""
        if with_generators:
            row["generator order (tau)"] = cell_text(cells.get(GENERATOR_ORDER))
        met, judged, _ = met_counts(results)[scorer]
        row["all met"] = f"{met} of {judged}"
        rows.append(row)
    columns = list(rows[0]) if rows else ["scorer"]
    return markdown_table(pl.DataFrame(rows, schema={c: pl.String for c in columns}))


HEADLINE_ORDERS = ("variant_order/leaky", "variant_order/borrowed", "perturb_order/shuffled")


def metric_headline(results: dict) -> str:
    """One row per first-class metric of a results.json: its first seed's signature (the other seeds' differ in
    their seed field), its human-judgement AUROC, the share of instances it orders gold above a label
    statement, another instance's rationale and gold with its words shuffled (HEADLINE_ORDERS), and all
    thresholds met; each figure the mean over seeds [interval over seeds and instances]."""
    signatures = results.get("signatures") or {}
    first = signatures.get(str(results["seeds"][0]), {}) if results.get("seeds") else {}
    aurocs = [c for c in human_criteria(results) if c.startswith("acceptability_auroc/")]
    counts = met_counts(results)
    with_generators = bool(_criteria(results, GENERATOR_ORDER))
    rows = []
    for metric in METRICS_FIRST_CLASS:
        cells = results["scorers"].get(metric)
        if cells is None:
            continue
        signature = first[metric].replace("|", "\\|") if metric in first else ""  # a pipe would end the cell
        row = {"metric": f"`{metric}`", "signature (first seed)": f"`{signature}`" if signature else ""}
        row |= {c.replace("acceptability_", "").replace("/", " "): cell_text(cells.get(c)) for c in aurocs}
        row |= {f"gold above {c.split('/')[1]}": cell_text(cells.get(c)) for c in HEADLINE_ORDERS}
        if with_generators:
            row["generator order (tau)"] = cell_text(cells.get(GENERATOR_ORDER))
        met, judged, _ = counts[metric]
        row["thresholds met"] = f"{met} of {judged}"
        rows.append(row)
    columns = list(rows[0]) if rows else ["metric"]
    return markdown_table(pl.DataFrame(rows, schema={c: pl.String for c in columns}))


def met_counts(results: dict) -> dict[str, tuple[int, int, int]]:
    """Per scorer: (criteria met, criteria judged, cells): a cell on a trained-on kind or without a threshold is
    not judged."""
    out = {}
    for scorer, cells in results["scorers"].items():
        judged = [c["met"] for c in cells.values() if c.get("met") is not None]
        out[scorer] = (sum(judged), len(judged), len(cells))
    return out


def best_sentences(results: dict) -> list[str]:
    lines = []
    for criterion, entry in results.get("best", {}).items():
        line = f"- `{criterion}`: **{entry['scorer']}** ({kind_of(entry['scorer'])}) {_num(entry['value'])}"
        if entry.get("runner_up") is not None:
            gap = f"{_num(entry['difference'])}"
            if entry.get("low") is not None:
                gap += f" [{_num(entry['low'])}, {_num(entry['high'])}]"
                note = "" if entry["low"] > 0 else " (the interval reaches 0: not separated)"
            else:
                note = " (no interval: not separated)"
            line += f", ahead of {entry['runner_up']} by {gap}{note}"
        lines.append(line)
    return lines


def versus_lines(results: dict) -> list[str]:
    lines = []
    for mine, others in results.get("versus", {}).items():
        for other, figures in others.items():
            beats = [c for c, f in figures.items() if f["beats"]]
            loses = [c for c, f in figures.items() if f["high"] is not None and f["high"] < 0]
            lines.append(f"- **{mine} vs {other}**: beats it by more than the interval on {len(beats)} of "
                         f"{len(figures)} criteria" + (f" ({', '.join(beats)})" if beats else "")
                         + f"; below it beyond the interval on {len(loses)}"
                         + (f" ({', '.join(loses)})" if loses else ""))
    return lines


def _judged(results: dict, scorer: str) -> set[str]:
    """The criteria a scorer is judged on (a threshold, and not a kind of text it trains on)."""
    return {c for c, cell in results["scorers"][scorer].items() if cell.get("met") is not None}


def _ranking(entries: list[tuple[float, int, int, str]]) -> str:
    """'**a and b** (a metric, a control), 3 of 4; then c 2 of 4' from (share, met, judged, scorer), best first."""
    top = entries[0][0]
    leaders = [(m, k, j) for share, k, j, m in entries if share == top]
    counts = {f"{k} of {j}" for _, k, j in leaders}
    text = (f"**{' and '.join(m for m, _, _ in leaders)}** ({', '.join(kind_of(m) for m, _, _ in leaders)}), "
            + (counts.pop() if len(counts) == 1 else ", ".join(f"{m} {k} of {j}" for m, k, j in leaders)))
    rest = [f"{m} {k} of {j}" for share, k, j, m in entries if share < top]
    return text + ("; then " + ", ".join(rest) if rest else "")


def recommendation_lines(results: dict) -> list[str]:
    """Which scorer meets the largest share of the thresholds it is judged on, among the scorers with a figure on
    every criterion (a baseline that exists for the human files only, GPT-3's NLL, is said apart); then, where some
    scorer is not judged on some criteria (the kinds of text it trains on), the same on the criteria every one of
    them is judged on; and what larev recommends: the metric (a first-class name) that meets the most of those
    common criteria, said plainly when a control, an ablation or a baseline does better. The common criteria keep
    a metric from gaining by training on the texts that would judge it."""
    counts = met_counts(results)
    if not counts:
        return []
    widest = max(cells for _, _, cells in counts.values())
    order = list(counts)  # the table's order: metrics first (evidence.SCORER_ORDER)
    full = sorted(((met / judged, met, judged, m) for m, (met, judged, cells) in counts.items()
                   if cells == widest and judged), key=lambda e: (-e[0], order.index(e[3])))
    lines = []
    if full:
        lines.append("- Largest share of the thresholds each is judged on: " + _ranking(full) + ".")
        common = set.intersection(*(_judged(results, m) for *_, m in full))
        on_common = sorted(((met / len(common), met, len(common), m) for m in (e[3] for e in full)
                            for met in [sum(results["scorers"][m][c]["met"] for c in common)]),
                           key=lambda e: (-e[0], order.index(e[3]))) if common else []
        if on_common and any(judged != len(common) for _, _, judged, _ in full):
            lines.append(f"- On the {len(common)} criteria every one of them is judged on: " + _ranking(on_common)
                         + ".")
        ranked = on_common or full
        top_share = ranked[0][0]
        leaders = [m for share, _, _, m in ranked if share == top_share]
        metrics = [entry for entry in ranked if entry[3] in METRICS_FIRST_CLASS]
        if metrics:
            share, best_met, best_judged, best = metrics[0]
            tied = [m for s_, _, _, m in metrics[1:] if s_ == share]
            better = [m for m in leaders if m not in METRICS_FIRST_CLASS] if share < top_share else []
            lines.append(f"- larev recommends **{best}** on this task: of the metrics, it meets the most thresholds "
                         f"({best_met} of {best_judged}"
                         + (" criteria all of them are judged on" if ranked is on_common and on_common else "")
                         + ")"
                         + (f", tied with {', '.join(tied)} (the first in the table's order is named)" if tied else "")
                         + "." + (f" {', '.join(f'{m} ({kind_of(m)})' for m in better)} does better." if better
                                  else ""))
            lines += separation_lines(results, best, [m for _, _, _, m in metrics[1:]])
    for m, (met, judged, cells) in counts.items():
        if cells < widest and judged:
            lines.append(f"- {m} ({kind_of(m)}) has figures on {cells} criteria only (it exists for some texts "
                         f"only): it meets {met} of {judged}.")
    return lines


def separation_lines(results: dict, best: str, others: list[str]) -> list[str]:
    """Whether the recommended metric is separated from the metrics after it: paired over the same draws
    (results.json's "pairs"), on how many criteria its interval lies above theirs and on how many below. A lead in
    thresholds met that the paired intervals do not back (better on no more criteria than worse) is a tie: one
    resample could flip the count."""
    pairs = (results.get("pairs") or {}).get(best) or {}
    found = [(m, pairs[m]) for m in others if m in pairs]
    if not found:
        return []
    ties = [m for m, p in found if len(p["better"]) == len(p["worse"])]
    behind = [m for m, p in found if len(p["better"]) < len(p["worse"])]
    parts = [f"{m}: better on {len(p['better'])}, worse on {len(p['worse'])} of {p['criteria']}" for m, p in found]
    line = (f"- Paired with each metric after it (the same seeds and instances; criteria where the "
            f"{round(100 * results.get('level', 0.95))} % interval of the difference excludes 0): " + "; ".join(parts)
            + ".")
    if ties:
        line += (f" **Not separated from {', '.join(ties)}**: its lead in thresholds met is not backed by paired "
                 "differences, so read it as a tie.")
    if behind:
        line += (f" **The paired differences favour {', '.join(behind)}**: beyond the interval on more criteria, "
                 "though it meets fewer thresholds.")
    return [line]


def results_markdown(results: dict, beside: dict | None = None) -> str:
    seeds = results.get("seeds", [])
    lines = [f"# Validity: {results['task'].upper()}, {results['split']} split",
             "",
             f"Protocol `{results.get('protocol_name')}` (sha256 `{results['protocol'][:12]}`), seeds "
             f"{', '.join(map(str, seeds))}, backbone `{results.get('backbone')}`, test rows "
             f"{results.get('test_rows')} ({results['n'].get('test_instances')} instances); human halves: "
             + ", ".join(f"{k.split('/', 1)[1]} ({v} instances)" for k, v in results["n"].items()
                         if k.startswith("human/"))
             + (f"; commit `{results['commit']}`" if results.get("commit") else "") + ".",
             ""]
    if results.get("decided"):
        lines += ["**Read with the tune split's decisions**: " + "; ".join(
            f"`{m}` with the settings of `{c}`, in a run of its own" for m, c in results["decided"].items()) + ".", ""]
    if results.get("screened_out"):
        lines += [f"**Candidates screened out** on fewer seeds before this run: "
                  f"{', '.join(f'`{c}`' for c in results['screened_out'])}.", ""]
    earlier = results.get("earlier_readings")
    if earlier:
        lines += [f"**Earlier readings of this split** under this protocol (protocols/ledger.jsonl): "
                  f"{earlier['ended']} ended, {earlier['failed']} failed, {earlier['unfinished']} began and never "
                  "ended.",
                  "", *(f"- {line}" for line in earlier["lines"]), ""] if earlier["lines"] else \
                 ["**Earlier readings of this split** under this protocol: none.", ""]
    if results.get("partial"):
        lines += ["**Partial run**: not every seed, metric or row of the protocol, or settings overridden ("
                  + json.dumps(results.get("overrides") or {}) + "): not a result of the protocol.", ""]
    level = round(100 * results.get("level", 0.95))
    lines += [f"Each cell: the mean over seeds [{level} % interval over seeds and instances]. ✓ meets the protocol's "
              "threshold, ✗ does not, † the scorer trained on this kind of text (not judged); no mark: no "
              "threshold. score - gold figures are in each scorer's own units (nats, accuracy, words).", "",
              "## Headline", "", headline_table(results), "",
              "## Best scorer per criterion", "", *best_sentences(results), "",
              "## LAREV against REV, its erm_envs control and r_only (paired differences)", "",
              *(versus_lines(results) or ["- (no LAREV definition or no reference scorer in this run)"]), "",
              "## Recommendation", "", *recommendation_lines(results), "",
              *decision_lines(results)]
    if beside is not None:
        lines += ["## Beside the tune split", "",
                  f"The tune run of the same protocol (commit `{beside.get('commit')}`, seeds "
                  f"{', '.join(map(str, beside.get('seeds', [])))}), each scorer both ran: the thresholds it meets on "
                  "each split, how many verdicts (met or not, on a criterion both judge) the report split kept, and its "
                  "human figures on each. The splits hold other instances: nothing here is paired across them.", "",
                  *split_comparison(beside, results), ""]
    parts = [("a. Human judgements", human_criteria(results)),
             ("b. Perturbations: score - gold", _criteria(results, "perturb")),
             ("b. Perturbations: share of instances with gold above", _criteria(results, "perturb_order")),
             ("b. Perturbations: Spearman with gold's scores (near kinds)", _criteria(results, "perturb_corr")),
             ("c. Variants: score - gold", _criteria(results, "variant")),
             ("c. Variants: share of instances with gold above", _criteria(results, "variant_order")),
             ("c. Variants: Spearman with gold's scores (near kinds)", _criteria(results, "variant_corr"))]
    for title, criteria in parts:
        if criteria:
            lines += [f"## {title}", "", criteria_table(results, criteria), ""]
    lines += generator_lines(results)
    if results.get("perturbations_skipped"):
        skipped = {k: v for k, v in results["perturbations_skipped"].items() if v}
        if skipped:
            lines += ["Instances a perturbation could not be built for (left out): "
                      + ", ".join(f"{k} {v}" for k, v in skipped.items()) + ".", ""]
    signatures = results.get("signatures") or {}
    if signatures:
        first = next(iter(signatures))
        fields = sorted({f for per_seed in signatures.values() for metric, sig in per_seed.items()
                         if metric in signatures[first] for f in signature_difference(signatures[first][metric], sig)})
        lines += ["## Signatures", "", f"What computed each metric's scores (seed {first}; across the seeds they "
                  + (f"differ in {', '.join(fields)}" if fields else "are equal") + "):", "",
                  *(f"- `{sig}`" for sig in signatures[first].values()), ""]
    if results.get("seconds"):
        lines += ["## Time", "", *(f"- {k}: {v:.0f} s" for k, v in results["seconds"].items()), ""]
    return "\n".join(lines)


def split_comparison(tune: dict, report: dict) -> list[str]:
    """The report split's results beside the tune split's (two results.json of one task and protocol): per scorer
    both runs scored, the thresholds met on each split, how many verdicts (met or not, on a criterion both judge)
    the report split kept, and each human acceptability figure on both; then the criteria whose best scorer
    differs between the splits. Instances differ between the splits, so no interval is paired across them."""
    if tune["protocol"] != report["protocol"] or tune.get("task") != report.get("task"):
        raise ValueError(f"tune and report results come from different protocols or tasks: "
                         f"{tune['protocol'][:12]} {tune.get('task')} vs {report['protocol'][:12]} {report.get('task')}")
    if (tune.get("split"), report.get("split")) != ("tune", "report"):
        raise ValueError(f"expected a tune and a report run, got {tune.get('split')!r} and {report.get('split')!r}")
    tune_counts, report_counts = met_counts(tune), met_counts(report)
    human = [c for c in human_criteria(report) if c.split("/")[0] in ("acceptability_auroc", "pairwise")]
    rows = []
    for scorer, cells in report["scorers"].items():
        before = tune["scorers"].get(scorer)
        if before is None:
            continue
        both = [c for c, cell in cells.items()
                if cell.get("met") is not None and (before.get(c) or {}).get("met") is not None]
        kept = sum(cells[c]["met"] == before[c]["met"] for c in both)
        row = {"scorer": scorer,
               "met, tune": "{} of {}".format(*tune_counts[scorer][:2]),
               "met, report": "{} of {}".format(*report_counts[scorer][:2]),
               "verdicts kept": f"{kept} of {len(both)}"}
        for c in human:
            name = c.replace("acceptability_", "")
            row[f"{name}, tune"] = cell_text(before.get(c))
            row[f"{name}, report"] = cell_text(cells.get(c))
        rows.append(row)
    columns = list(rows[0]) if rows else ["scorer"]
    lines = [*markdown_table(pl.DataFrame(rows, schema={c: pl.String for c in columns})).splitlines(), ""]
    # the best of the scorers both runs scored (a decision candidate runs on the tune split only), on each
    # criterion either run ranks scorers on
    common = [m for m in report["scorers"] if m in tune["scorers"]]
    shared = [c for c in report.get("best", {}) if c in tune.get("best", {})]
    bests = {c: (_best_of(tune, c, common), _best_of(report, c, common)) for c in shared}
    bests = {c: pair for c, pair in bests.items() if None not in pair}
    # moved: the tune split's best is below the report split's best there (a tie for best is not a move)
    moved = {c: report["scorers"][before[0]][c]["value"] for c, (before, after) in bests.items()
             if report["scorers"][before[0]][c]["value"] < after[1]}
    lines.append(f"Among the scorers both ran, the tune split's best per criterion is (one of) the best on the report "
                 f"split for {len(bests) - len(moved)} of {len(bests)} criteria" + ("." if not moved else
                                                                                     "; it is not on:"))
    lines += [f"- `{c}`: {bests[c][0][0]} {_num(bests[c][0][1])} on tune ({_num(value)} on report); "
              f"{bests[c][1][0]} {_num(bests[c][1][1])} on report" for c, value in moved.items()]
    return lines


def _best_of(results: dict, criterion: str, scorers: list[str]) -> tuple[str, float] | None:
    """(scorer, value) with the highest figure on `criterion` among `scorers` (a cell on a kind the scorer trained
    on left out; ties to the first in `scorers`), or None."""
    entries = [(m, cell["value"]) for m in scorers for cell in [results["scorers"][m].get(criterion)]
               if cell is not None and cell["value"] is not None and not cell.get("trained_on")]
    return max(entries, key=lambda e: e[1]) if entries else None


def decision_lines(results: dict) -> list[str]:
    """The defaults decided on this (tune) run by the protocol's rule (larev/validity/decisions.py): per metric,
    each candidate's settings, the criteria it is better and worse on beyond the paired interval, and what is
    decided. Empty when the run made no decision (the report split, or a protocol with none)."""
    decisions = results.get("decisions") or {}
    if not decisions:
        return []
    lines = ["## Defaults decided on this split", "",
             f"Rule `{next(iter(decisions.values()))['rule']}`: a candidate replaces the default when, paired over seeds and "
             "instances, it is better beyond the interval on more criteria than it is worse (of several, the "
             "largest margin; ties to the first listed).", ""]
    if results.get("partial"):
        lines += ["**Partial run**: these decisions are not the protocol's (not every seed, metric or row, or "
                  "settings overridden).", ""]
    for metric, decision in decisions.items():
        chosen = decision.get("chosen")
        settings = ", ".join(f"`{k}={v}`" for k, v in decision.get("settings", {}).items())
        lines.append(f"- **{metric}**: " + (f"**{chosen}** replaces the default ({settings})." if chosen
                                             else "the default stays."))
        for name, candidate in decision["candidates"].items():
            stands = ", ".join(f"`{k}={v}`" for k, v in candidate["settings"].items())
            if not candidate["scored"]:
                lines.append(f"  - {name} ({stands}): not scored in this run on the default's seeds")
                continue
            better, worse = candidate["better"], candidate["worse"]
            lines.append(f"  - {name} ({stands}): better on {len(better)}, worse on {len(worse)} of "
                         f"{candidate['criteria']} criteria"
                         + (f"; better: {', '.join(better)}" if better else "")
                         + (f"; worse: {', '.join(worse)}" if worse else ""))
    return [*lines, ""]


def generator_lines(results: dict) -> list[str]:
    """Section d: each scorer's Kendall tau with the generators' known order, and the mean score of each
    generator's rationales it read (mean over seeds; own units), so a reader sees which pairs it inverts."""
    generators = results.get("generators") or {}
    order, means = generators.get("order") or [], generators.get("mean_score") or {}
    if not order or not means:
        return []
    rows = [{"scorer": scorer, "tau": cell_text(results["scorers"].get(scorer, {}).get(GENERATOR_ORDER)),
             **{g: _num(by_generator.get(g)) for g in order}} for scorer, by_generator in means.items()]
    table = markdown_table(pl.DataFrame(rows, schema={"scorer": pl.String, "tau": pl.String,
                                                      **{g: pl.String for g in order}}))
    tiers = generators.get("tiers") or list(range(len(order)))
    known = " > ".join("{" + ", ".join(f"`{g}`" for g, t in zip(order, tiers) if t == tier) + "}"
                       if tiers.count(tier) > 1 else f"`{order[tiers.index(tier)]}`" for tier in sorted(set(tiers)))
    return ["## d. Generators of known quality: Kendall's tau with the known order", "",
            f"Known order, best first: {known} (no order is known inside braces). tau: over the pairs of generators "
            "the known order ranks, (pairs the scorer's mean scores order the same way - pairs they order the other "
            "way) / pairs (1: the known order; 0: unrelated; -1: reversed), with its interval over seeds and "
            "instances; then each generator's mean score (mean over seeds, the scorer's own units).", "", table, ""]


def inverted_pairs(results: dict, scorer: str) -> list[tuple[str, str]]:
    """(better, worse) for each pair of generators the known order ranks and `scorer`'s mean scores (over the
    seeds) put the other way round; none without generator results for it."""
    generators = results.get("generators") or {}
    order, means = generators.get("order") or [], (generators.get("mean_score") or {}).get(scorer)
    if not means:
        return []
    tiers = generators.get("tiers") or list(range(len(order)))
    return [(a, b) for i, a in enumerate(order) for j, b in enumerate(order)
            if tiers[i] < tiers[j] and means[a] < means[b]]


def generator_headline(results: dict, degradations: dict | None = None) -> str:
    """One row per first-class metric (then length) with a generator_order figure: its tau with the generators'
    known order, the ranked pairs its mean scores invert, and, given a `larev score --degradations` results.json
    (`degradations`), each generator's SUM of the thesis's table 5.8 with its interval."""
    generators = results.get("generators") or {}
    order, means = generators.get("order") or [], generators.get("mean_score") or {}
    table = (degradations or {}).get("table_5_8") or {}
    rows = []
    for metric in [*METRICS_FIRST_CLASS, "length"]:
        cell = results["scorers"].get(metric, {}).get(GENERATOR_ORDER)
        if cell is None or metric not in means:
            continue
        inverted = [f"{a} < {b}" for a, b in inverted_pairs(results, metric)]
        row = {"metric": f"`{metric}`", "generator_order (tau)": cell_text(cell),
               "ranked pairs its means invert": ", ".join(inverted) or "none"}
        if table:
            for g in order:
                total = table.get(metric, {}).get(g, {}).get("SUM")
                row[f"SUM {g}"] = ("" if total is None or total.get("estimate") is None else
                                   f"{total['estimate']:+.3f} [{total['ci_low']:+.3f}, {total['ci_high']:+.3f}]")
        rows.append(row)
    columns = list(rows[0]) if rows else ["metric"]
    return markdown_table(pl.DataFrame(rows, schema={c: pl.String for c in columns}))


def results_plot(results: dict) -> bytes:
    """Left: each scorer's human-judgement figures with intervals; right: the share of instances each scorer
    orders as expected, per perturbation and variant (✓ where the threshold is met)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    scorers = list(results["scorers"])
    human = [c for h in ("acceptability_auroc", "pairwise", "spearman_new_info")
             for c in _criteria(results, h)]
    orders = _criteria(results, "perturb_order") + _criteria(results, "variant_order")
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, max(4, 0.45 * len(scorers) + 1.5)),
                                      gridspec_kw={"width_ratios": [1, 1.6]})
    y = np.arange(len(scorers))
    for k, criterion in enumerate(human):
        cells = [results["scorers"][m].get(criterion) for m in scorers]
        values = [c["value"] if c and c["value"] is not None else np.nan for c in cells]
        lows = [c["low"] if c and c.get("low") is not None else np.nan for c in cells]
        highs = [c["high"] if c and c.get("high") is not None else np.nan for c in cells]
        offset = (k - (len(human) - 1) / 2) * 0.25
        err = np.array([np.subtract(values, lows), np.subtract(highs, values)])
        left.errorbar(values, y + offset, xerr=np.nan_to_num(err), fmt="o", capsize=2, label=criterion)
    left.axvline(0.5, color="grey", lw=0.8, ls="--")
    left.set_yticks(y, scorers)
    left.invert_yaxis()
    left.set_xlabel("figure (0.5: chance for AUROC and pairwise)")
    left.set_title("a. human judgements")
    if human:
        left.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1))  # below: no point hidden
    grid = np.full((len(scorers), len(orders)), np.nan)
    for i, m in enumerate(scorers):
        for j, c in enumerate(orders):
            cell = results["scorers"][m].get(c)
            if cell and cell["value"] is not None:
                grid[i, j] = cell["value"]
                mark = "†" if cell.get("trained_on") else {True: "✓", False: "", None: ""}[cell.get("met")]
                right.text(j, i, f"{cell['value']:.2f}{mark}", ha="center", va="center", fontsize=6)
    image = right.imshow(grid, vmin=0, vmax=1, cmap="RdYlGn", aspect="auto")
    right.set_xticks(range(len(orders)), [c.split("/", 1)[1] for c in orders], rotation=60, ha="right",
                     fontsize=7)
    right.set_yticks(y, scorers)
    right.set_title("b, c. share of instances with gold above the perturbed text (✓: threshold met)")
    fig.colorbar(image, ax=right, fraction=0.03)
    return png_bytes(fig)


def clean(value):
    """`value` with every NaN or infinite float made None (results.json is strict JSON)."""
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_results(out: Path, results: dict, beside: dict | None = None) -> dict:
    """results.json, results.md and results.png in `out` (results.md with a section setting the run beside the tune
    run `beside`, when given); returns the results as written."""
    results = clean(results)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, allow_nan=False))
    (out / "results.md").write_text(results_markdown(results, beside))
    (out / "results.png").write_bytes(results_plot(results))
    return results


def summary_lines(results: dict) -> list[str]:
    """What the CLI prints: the best scorer per comparable criterion and the recommendation."""
    return [f"Validity ({results['task']}, {results['split']} split, seeds {results.get('seeds')}):",
            *best_sentences(results), *recommendation_lines(results)]
