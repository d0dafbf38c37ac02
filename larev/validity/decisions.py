"""A metric's default decided on the tune split (the protocol's `decision_rule`, 'paired-wins-minus-losses').

Each candidate is a scorer the run scores beside the metric, standing for a setting of the metric's options (the
protocol's tasks.<task>.decisions: LAREV's ablations are its objective's weights at 0). Paired over the same seeds
and instances, a candidate is *better* on a criterion when the interval of candidate - default lies above 0 and
*worse* when it lies below 0; only criteria both are judged on and that rank scorers count. A candidate replaces
the default when it is better on more criteria than it is worse; of several, the one with the largest margin
(better - worse), ties to the one listed first. Otherwise the default stays. The largest separation on any one
criterion plays no part.
"""

from __future__ import annotations

from typing import Any


RULES = ("paired-wins-minus-losses",)


def decide(metric: str, candidates: dict[str, dict[str, Any]], comparisons: dict[str, dict[str, dict]],
           rule: str = "paired-wins-minus-losses") -> dict:
    """The decision for `metric`. candidates: name -> the settings it stands for (the protocol's order);
    comparisons: name -> {CRITERION: {"difference", "low", "high", ...}} of candidate - default (a candidate the
    run did not score, or scored on other seeds than the default, is absent). Returns {"rule", "default",
    "candidates": {name: {"settings", "scored", "better", "worse", "criteria", "margin", "replaces"}}, "chosen":
    name or None, "settings": the chosen settings ({} to keep)}."""
    if rule not in RULES:
        raise ValueError(f"unknown decision rule {rule!r} (known: {', '.join(RULES)})")
    out: dict[str, dict] = {}
    for name, settings in candidates.items():
        pairs = comparisons.get(name)
        if pairs is None:
            out[name] = {"settings": settings, "scored": False, "replaces": False}
            continue
        better = sorted(k for k, v in pairs.items() if v["low"] is not None and v["low"] > 0)
        worse = sorted(k for k, v in pairs.items() if v["high"] is not None and v["high"] < 0)
        out[name] = {"settings": settings, "scored": True, "better": better, "worse": worse,
                     "criteria": len(pairs), "margin": len(better) - len(worse),
                     "replaces": len(better) > len(worse)}
    winners = [name for name in candidates if out[name]["replaces"]]
    chosen = max(winners, key=lambda name: (out[name]["margin"], -winners.index(name))) if winners else None
    return {"rule": rule, "default": metric, "candidates": out, "chosen": chosen,
            "settings": dict(candidates[chosen]) if chosen else {}}
