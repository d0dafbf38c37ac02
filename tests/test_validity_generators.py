"""generator_order (issue 54, item 5): Kendall's tau of a scorer's ranking of generators of known quality with their
known order, by hand and against scipy; through `evaluate` on made-up scores; and the protocol's checks of its
generators."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml
from scipy import stats

from larev.errors import ConfigError
from larev.validity.criteria import Draws, kendall_tau_with_order
from larev.validity.protocol import load_protocol

REPO = Path(__file__).resolve().parents[1]
PROTOCOL = REPO / "protocols" / "validity.yaml"
ORDER = ["embedded-all", "embedded-1of2", "label-only"]


def test_kendall_tau_by_hand():
    # pairs (a, b), (a, c) in the known order, (b, c) inverted: (2 - 1) / 3
    assert kendall_tau_with_order([3.0, 1.0, 2.0])[0] == pytest.approx(1 / 3)
    assert kendall_tau_with_order([[3, 2, 1], [1, 2, 3]]).tolist() == [1.0, -1.0]
    # a tie in the figures counts as neither: (2 - 0) / 3
    assert kendall_tau_with_order([2.0, 2.0, 1.0])[0] == pytest.approx(2 / 3)
    assert kendall_tau_with_order([1.0, 1.0, 1.0])[0] == 0.0  # no order at all
    assert np.isnan(kendall_tau_with_order([1.0, np.nan, 0.0])[0])


def test_kendall_tau_with_a_total_order_and_no_ties_is_scipys():
    rows = np.random.default_rng(3).normal(size=(200, 6))
    ours = kendall_tau_with_order(rows)
    theirs = [stats.kendalltau(row, -np.arange(6)).statistic for row in rows]
    np.testing.assert_allclose(ours, theirs)


def test_a_partial_order_counts_only_the_pairs_it_ranks():
    tiers = [0, 1, 1]  # a above b and c; b, c unordered
    assert kendall_tau_with_order([2.0, 1.0, 0.0], tiers)[0] == 1.0
    assert kendall_tau_with_order([2.0, 0.0, 1.0], tiers)[0] == 1.0  # b < c is not an error
    assert kendall_tau_with_order([0.5, 1.0, 0.0], tiers)[0] == 0.0  # (a, b) wrong, (a, c) right
    # the default order as five tiers of the six defaults: 12 ranked pairs, one inverted (embedded-1of2 and 1of8)
    assert kendall_tau_with_order([6, 4, 5, 3, 2, 1], [0, 1, 2, 3, 3, 3])[0] == pytest.approx((11 - 1) / 12)


def _per_seed(means_by_scorer: dict[str, list[float]], n: int = 60, missing: str | None = None):
    """Made-up scores of three generators' rationales (and gold) on n instances for two seeds: each scorer's
    generator g scores around means_by_scorer[scorer][g]; `missing`: that generator wrote nothing for the first
    instance."""
    from larev.validity.evidence import SeedScores

    per_seed = {}
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        frames = []
        ids = [f"i{k}" for k in range(n)]
        for scorer, means in means_by_scorer.items():
            frames.append(pl.DataFrame({"metric": scorer, "id": ids, "source": "gold",
                                        "score": rng.normal(size=n)}))
            for g, mean in zip(ORDER, means):
                keep = ids[1:] if g == missing else ids
                frames.append(pl.DataFrame({"metric": scorer, "id": keep, "source": g,
                                            "score": rng.normal(mean, 0.3, size=len(keep))}))
        per_seed[seed] = SeedScores(test=pl.concat(frames))
    return per_seed


def _protocol_with_generators(tmp_path: Path, generators: list) -> Path:
    raw = yaml.safe_load(PROTOCOL.read_text())
    raw["bootstrap"] = 200
    raw["tasks"]["nli"]["generators"] = generators
    path = tmp_path / "validity.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def test_a_scorer_in_the_known_order_meets_generator_order_and_a_reversed_one_does_not(tmp_path):
    from larev.validity.evidence import evaluate

    protocol = load_protocol(_protocol_with_generators(tmp_path, ["embedded:1", "embedded:1/2", "label-only"]))
    results = evaluate(protocol, "nli", _per_seed({"rev": [2.0, 1.0, 0.0], "larev": [0.0, 1.0, 2.0],
                                                   "r_only": [1.0, 1.0, 1.0]}), {})
    assert results["generators"]["order"] == ORDER
    right, wrong = results["scorers"]["rev"]["generator_order"], results["scorers"]["larev"]["generator_order"]
    assert right["value"] == 1.0 and right["low"] == 1.0 and right["met"] is True
    assert wrong["value"] == -1.0 and wrong["met"] is False
    unrelated = results["scorers"]["r_only"]["generator_order"]  # equal means: noise orders them
    assert unrelated["low"] < 0 < unrelated["high"] and unrelated["met"] is False
    assert results["generators"]["tiers"] == [0, 1, 2]
    means = results["generators"]["mean_score"]["rev"]
    assert list(means) == ORDER and means["embedded-all"] == pytest.approx(2.0, abs=0.1)
    assert results["best"]["generator_order"]["scorer"] == "rev"


def test_an_instance_a_generator_wrote_nothing_for_is_left_out_of_every_generators_mean(tmp_path):
    from larev.validity.evidence import evaluate

    protocol = load_protocol(_protocol_with_generators(tmp_path, ["embedded:1", "embedded:1/2", "label-only"]))
    per_seed = _per_seed({"rev": [2.0, 1.0, 0.0]}, missing="label-only")
    results = evaluate(protocol, "nli", per_seed, {})
    cell = results["scorers"]["rev"]["generator_order"]
    assert cell["n"] == 59
    test = per_seed[0].test.filter(pl.col("id") != "i0")
    expected = [test.filter(pl.col("source") == g)["score"].mean() for g in ORDER]
    got = [results["generators"]["mean_score"]["rev"][g] for g in ORDER]
    seed1 = per_seed[1].test.filter(pl.col("id") != "i0")
    expected = np.mean([expected, [seed1.filter(pl.col("source") == g)["score"].mean() for g in ORDER]], axis=0)
    np.testing.assert_allclose(got, expected)


def test_resampled_taus_are_the_taus_of_the_resamples_written_out(tmp_path):
    from larev.validity.evidence import _Collector, _generator_figures

    protocol = load_protocol(_protocol_with_generators(tmp_path, ["embedded:1", "embedded:1/2", "label-only"]))
    per_seed = {0: _per_seed({"rev": [0.2, 0.1, 0.0]}, n=30)[0]}
    frames = {g: {0: per_seed[0].test.filter(pl.col("source") == g).select("id", "score")} for g in ORDER}
    ids = [f"i{k}" for k in range(30)]
    collector = _Collector(protocol)
    _generator_figures(collector, ORDER, [0, 1, 2], {"rev": frames}, ids)
    samples = collector.samples[("rev", "generator_order")]
    draws = Draws("generator_order", len(ids), 1, protocol.bootstrap)
    matrix = np.column_stack([frames[g][0]["score"].to_numpy() for g in ORDER])
    for b in (0, 7, 99):
        written_out = np.repeat(matrix, draws.instances[b].astype(int), axis=0)
        assert samples[b] == pytest.approx(stats.kendalltau(written_out.mean(axis=0), [2, 1, 0]).statistic)


def test_the_protocol_checks_its_generators(tmp_path):
    assert load_protocol(_protocol_with_generators(tmp_path, ["embedded:1", "hypothesis-copy", "label-only"]))
    with pytest.raises(ConfigError, match="tasks.nli.generators.*unknown kind 'gpt9'"):
        load_protocol(_protocol_with_generators(tmp_path, ["embedded:1", "gpt9", "label-only"]))
    tiered = load_protocol(_protocol_with_generators(tmp_path, ["embedded:1", ["hypothesis-copy", "label-only"]]))
    nli = tiered.tasks["nli"]
    assert [g.name for g in nli.generator_configs()] == ["embedded-all", "hypothesis-copy", "label-only"]
    assert nli.generator_tiers() == [0, 1, 1]
    with pytest.raises(ConfigError, match="at least 3"):
        load_protocol(_protocol_with_generators(tmp_path, ["embedded:1", "label-only"]))
    with pytest.raises(ConfigError, match="at least 3 generators in at least 2 tiers"):
        load_protocol(_protocol_with_generators(tmp_path, [["embedded:1", "hypothesis-copy", "label-only"]]))
    with pytest.raises(ConfigError, match="share the source name"):
        load_protocol(_protocol_with_generators(tmp_path, ["embedded:1", "embedded:1", "label-only"]))
    raw = yaml.safe_load(_protocol_with_generators(tmp_path, ["embedded:1", "embedded:1/2", "label-only"])
                         .read_text())
    del raw["criteria"]["generator_order"]
    (tmp_path / "no-criterion.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match="generator_order"):
        load_protocol(tmp_path / "no-criterion.yaml")


def test_the_interval_covers_seeds_that_disagree(tmp_path):
    """Seed 0 ranks the generators in the known order, seed 1 reverses it: the figure is their mean (0) and the
    interval, which draws seeds too, reaches both."""
    from larev.validity.evidence import evaluate

    protocol = load_protocol(_protocol_with_generators(tmp_path, ["embedded:1", "embedded:1/2", "label-only"]))
    right, reversed_ = _per_seed({"rev": [2.0, 1.0, 0.0]}), _per_seed({"rev": [0.0, 1.0, 2.0]})
    cell = evaluate(protocol, "nli", {0: right[0], 1: reversed_[1]}, {})["scorers"]["rev"]["generator_order"]
    assert cell["per_seed"] == [1.0, -1.0] and cell["value"] == 0.0
    assert cell["low"] == -1.0 and cell["high"] == 1.0 and cell["met"] is False


def test_a_seed_without_a_complete_instance_has_no_figure_and_the_others_still_count(tmp_path):
    from larev.validity.evidence import evaluate

    protocol = load_protocol(_protocol_with_generators(tmp_path, ["embedded:1", "embedded:1/2", "label-only"]))
    per_seed = _per_seed({"rev": [2.0, 1.0, 0.0]})
    per_seed[1].test = per_seed[1].test.filter(pl.col("source") != "label-only").vstack(
        per_seed[1].test.filter(pl.col("source") == "label-only").with_columns(score=pl.lit(np.nan)))
    cell = evaluate(protocol, "nli", per_seed, {})["scorers"]["rev"]["generator_order"]
    assert cell["per_seed"] == [1.0, None] and cell["value"] == 1.0 and cell["low"] == 1.0


def test_section_d_shows_the_known_order_with_its_tiers_and_each_scorers_means(tmp_path):
    from larev.validity.evidence import evaluate
    from larev.validity.report import generator_lines

    protocol = load_protocol(_protocol_with_generators(tmp_path, ["embedded:1", ["embedded:1/2", "label-only"]]))
    results = evaluate(protocol, "nli", _per_seed({"rev": [2.0, 1.0, 0.0]}), {})
    page = "\n".join(generator_lines(results))
    assert "`embedded-all` > {`embedded-1of2`, `label-only`}" in page
    row = next(line for line in page.splitlines() if line.startswith("| rev"))
    assert "1.000 [1.000, 1.000] ✓" in row and "2.0" in row
    assert generator_lines({"scorers": {}}) == []  # results without generators: no section


def test_a_protocol_without_both_splits_is_refused(tmp_path):
    raw = yaml.safe_load(PROTOCOL.read_text())
    raw["tasks"]["nli"]["splits"] = {"tune": "6000:8000"}
    (tmp_path / "one-split.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match="splits must name both"):
        load_protocol(tmp_path / "one-split.yaml")


def test_the_docs_show_the_committed_generator_results():
    """docs/validity.md's generators section and docs/results.md's table are the committed results' (seeds 0-2,
    every metric; table 5.8 from `larev score --degradations` on seed 0), as report.py writes them."""
    import json

    from larev.validity.report import generator_headline, generator_lines

    results = json.loads((REPO / "docs" / "validity" / "nli-tune.json").read_text())
    table = json.loads((REPO / "docs" / "validity" / "nli-tune-table-5-8.json").read_text())
    assert len(results["seeds"]) >= 3 and results["split"] == "tune"
    for metric in ("rev", "larev", "larev_vs_empty", "r_only", "rora", "rq", "las"):
        assert len(results["scorers"][metric]["generator_order"]["per_seed"]) == len(results["seeds"]), metric
        assert set(results["generators"]["order"]) <= set(table["table_5_8"][metric]), metric
    validity = (REPO / "docs" / "validity.md").read_text()
    assert "\n".join(generator_lines(results)[2:]).rstrip() in validity and results["protocol"][:12] in validity
    assert generator_headline(results, table) in (REPO / "docs" / "results.md").read_text()


def test_generator_headline_lists_the_inverted_pairs_and_the_sums():
    from larev.validity.report import generator_headline

    results = {"scorers": {"rev": {"generator_order": {"value": 0.5, "low": 0.0, "high": 1.0, "met": False}}},
               "generators": {"order": ["a", "b", "c"], "tiers": [0, 1, 1],
                              "mean_score": {"rev": {"a": 1.0, "b": 2.0, "c": 0.0}}}}
    table = {"table_5_8": {"rev": {"a": {"SUM": {"estimate": 0.25, "ci_low": 0.125, "ci_high": 0.5}}}}}
    row = generator_headline(results, table).splitlines()[-1]
    assert row == "| `rev` | 0.500 [0.000, 1.000] ✗ | a < b | +0.250 [+0.125, +0.500] |  |  |"
