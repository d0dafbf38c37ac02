"""Metric cards (docs/metrics/, larev/cards/: texts as data, figures read from the committed results): every
registered metric's score name has one, the committed cards are exactly what the generator makes from the registry,
the card texts and the committed results, a card text types no figure, a wrong figure planted in a card fails,
their links land on headings that exist, and `larev show --metric NAME` prints one. Pure: no Prefect run, no
models."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from flows.cli import EXIT_BAD_INPUT, main
from flows.metrics import METRICS
from flows.cards import registry
from larev.cards import cell, filled_by, heading_anchors, heading_slug, option_rows, relative_links, table
from larev.cards.figures import figure, placeholders, render_figures, typed_figures
from larev.cards.render import (INDEX, SIGNATURE_TEXT, WRITE_COMMAND, build_card as build, build_cards as build_all,
                                card_names, signed_sections)
from larev.cards.texts import card_texts
from larev.errors import ConfigError
from larev.methods.leakage_aware.config import LarevConfig
from larev.signature import SIGNATURE_FIELDS
from tasks.metric import RUN_SECTIONS, Metric

REPO = Path(__file__).resolve().parents[1]
CARDS_DIR = REPO / "docs" / "metrics"
REGISTRY = registry(REPO / "docs")
CARDS = card_texts()


def build_card(metrics, name: str) -> str:
    return build(replace(REGISTRY, metrics=metrics), name)


def build_cards(metrics) -> dict[str, str]:
    return build_all(replace(REGISTRY, metrics=metrics))
PAPERS = REPO.parent / "shared" / "papers"


# ---- every metric has a card, and the committed cards are the generator's ------------------------------------------

def test_every_registered_score_name_has_a_card_text_and_a_committed_card():
    names = card_names(METRICS)
    assert names == ["rev", "larev", "larev_vs_empty", "r_only", "rora", "rq", "las"]
    assert set(CARDS) == set(names), "larev/cards/texts/ must hold one NAME.toml per registered score name, no more"
    assert {p.name for p in CARDS_DIR.glob("*.md")} == {f"{n}.md" for n in names} | {INDEX}
    index = (CARDS_DIR / INDEX).read_text()
    assert all(f"]({n}.md)" in index for n in names)


def test_the_committed_cards_equal_the_generators_output():
    stale = [name for name, text in build_cards(METRICS).items()
             if not (CARDS_DIR / name).exists() or (CARDS_DIR / name).read_text(encoding="utf-8") != text]
    assert not stale, (f"docs/metrics/ differs from what the registry, larev/cards/texts/ and the results generate "
                       f"({', '.join(stale)}): run `{WRITE_COMMAND}` from the repository root and commit the result")


def test_every_link_of_a_card_lands_on_a_file_and_a_heading_that_exist():
    checked = 0
    for name, text in build_cards(METRICS).items():
        for path, anchor in relative_links(text):
            target = (CARDS_DIR / path).resolve() if path else CARDS_DIR / name
            assert target.is_file(), f"{name}: link to {path} (no such file)"
            if anchor:
                assert anchor in heading_anchors(target.read_text(encoding="utf-8")), \
                    f"{name}: no heading #{anchor} in {target.relative_to(REPO)}"
            checked += 1
    assert checked > 30  # the cards cite docs/results.md, docs/defaults.md and each other throughout


# ---- what each card says ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, cited", [("rev", ["eq. 5", "eq. 6"]), ("larev", ["eq. 4.4", "eq. 4.10"]),
                                         ("rora", ["eq. 10", "eq. 8"]), ("larev_vs_empty", ["no paper equation"]),
                                         ("rq", ["Wiegreffe et al. (2021)"]), ("las", ["Hase et al. (2020)",
                                                                                       "macro-average"])])
def test_each_card_gives_the_formula_with_its_source(name, cited):
    card = build_card(METRICS, name)
    formula = next(line for line in card.splitlines() if line.startswith("**Formula:**"))
    assert all(c in formula for c in cited), formula
    for section in ("## Reading a score", "**Direction:**", "**Range:**", "**0 means:**", "## Validated on",
                    "`larev bench validity`", "## Known failure modes", "## Signature", "## Options",
                    "## Reproduce"):
        assert section in card, f"{name}: {section} missing"


@pytest.mark.skipif(not PAPERS.is_dir(), reason="../shared/papers is not checked out here")
def test_the_equation_numbers_the_cards_cite_are_in_the_papers():
    rev, rora, thesis = ((PAPERS / f).read_text(errors="replace") for f in
                         ("002_961fbb58ab26cda0.txt", "000_742ae05cdd194ffc.txt", "001_a583c256f33bfb67.txt"))
    assert "(5)" in rev and "(6)" in rev
    assert "(8)" in rora and "(10)" in rora
    assert "(4.4)" in thesis and "(4.10)" in thesis


def test_the_signature_section_names_every_field_and_the_sections_of_the_digest():
    assert tuple(SIGNATURE_TEXT) == SIGNATURE_FIELDS
    expected = {"rev": [], "r_only": [], "larev": ["larev"], "larev_vs_empty": ["larev", "larev_vs_empty"],
                "rora": ["rora"], "rq": ["rora"], "las": ["rora"]}
    for metric in METRICS:
        for name in metric.names():
            assert signed_sections(REGISTRY, metric) == [*RUN_SECTIONS, *expected[name]]
            card = build_card(METRICS, name)
            signature = card.split("## Signature")[1].split("## Options")[0]
            assert f"metric:{name}.{metric.definition_version}|backbone:" in signature
            assert all(f"| `{field}` |" in signature for field in SIGNATURE_FIELDS)
            assert all(f"`{s}`" in signature for s in signed_sections(REGISTRY, metric))
            assert "`device`" in signature  # placement fields are left out, and the card says so


def test_the_options_table_is_the_sections_fields_with_their_defaults():
    card = build_card(METRICS, "larev")
    options = card.split("## Options")[1]
    for row in option_rows(LarevConfig()):
        assert f"`{row.path}`" in options or f"**{row.path}**" in options
    assert "| `probe_train.epochs` | `3` |" in options  # the section's default factory, not TrainConfig's own default
    assert "| `la_dropout` | `null`: `demo-embedded`, `=model.dropout` |" in options
    assert "| `--no-larev` | `larev.enabled` = `false` |" in options
    # RQ and LAS read RORA's section: their card points there instead of repeating it
    assert "its card: [rora](rora.md#options)" in build_card(METRICS, "las")
    assert "None of its own" in build_card(METRICS, "rev")


def test_a_metric_without_card_text_still_gets_the_generated_parts():
    toy = Metric()
    toy.name, toy.definition_version, toy.description = "toy", "v2", "a toy metric"
    card = build_card([*METRICS, toy], "toy")
    assert "No card text yet: add larev/cards/texts/toy.toml" in card
    assert "metric:toy.v2|backbone:" in card and "## Reproduce" in card


# ---- larev/cards.py, the pure part -------------------------------------------------------------------------------

def test_anchors_are_githubs():
    assert heading_slug("Every metric with today's defaults (`make bench-cose`, HEAD 8c01df4)") == \
        "every-metric-with-todays-defaults-make-bench-cose-head-8c01df4"
    assert heading_slug("phi_LA started from REV's phi (`--set larev.la_start=phi`)") == \
        "phi_la-started-from-revs-phi---set-larevla_startphi"
    markdown = "# Top\n\n## What this says\n\n```bash\n# not a heading\n```\n\n### What this says\n"
    assert heading_anchors(markdown) == ["top", "what-this-says", "what-this-says-1"]
    assert relative_links("[a](../b.md#c) [d](https://x.org/#e) `[f](g.md)` [h](#top)") == [("../b.md", "c"),
                                                                                          ("", "top")]


def test_table_cells_keep_pipes_and_stay_on_one_line():
    assert cell("KL(p(.|a) || q)\n next") == "KL(p(.\\|a) \\|\\| q) next"
    assert table(("a", "b"), [("1", "x|y")]) == ["| a | b |", "| --- | --- |", "| 1 | x\\|y |"]


def test_what_fills_an_unset_setting_comes_from_the_presets_and_the_derived_settings():
    assert filled_by("larev.objective.lambda_irm") == ["thesis-nli", "thesis-qa", "small-backbone-nli",
                                                       "small-backbone-qa", "validity-tune-embedded-nli"]
    assert filled_by("larev_vs_empty.lambda_irm") == ["validity-tune-embedded-nli", "=larev.objective.lambda_irm"]
    assert filled_by("larev_vs_empty.la_min_steps") == ["demo-embedded-no-rationale-reference",
                                                        "=larev.la_min_steps"]
    assert filled_by("rora.phi_train.learning_rate") == ["=train.learning_rate"]
    assert filled_by("train.learning_rate") == ["pretrained-learning-rate", "embedded-learning-rate",
                                                "minilm-frozen-learning-rates"]


# ---- the command line ---------------------------------------------------------------------------------------------

def test_larev_show_metric_prints_the_card(capsys):
    assert main(["show", "--metric", "larev"]) == 0
    out = capsys.readouterr().out
    assert out == (CARDS_DIR / "larev.md").read_text(encoding="utf-8")
    formula = [line for line in out.splitlines() if line.startswith("**Formula:**")]
    assert len(formula) == 1 and "eq. 4.4" in formula[0]
    assert re.search(r"log p_LA\(y \| r, b\) - log p_base\(y \| b\)", formula[0])


def test_larev_show_an_unknown_metric_fails_naming_the_known_ones(capsys):
    assert main(["show", "--metric", "bleu"]) == EXIT_BAD_INPUT == 2
    err = capsys.readouterr().err
    assert "'bleu'" in err and all(name in err for name in card_names(METRICS))


def test_larev_show_needs_a_run_or_a_metric_not_both(capsys, tmp_path):
    assert main(["show"]) == EXIT_BAD_INPUT
    assert "--metric NAME" in capsys.readouterr().err
    assert main(["show", str(tmp_path), "--metric", "rev"]) == EXIT_BAD_INPUT
    assert "not both" in capsys.readouterr().err


def test_larev_show_write_cards_writes_what_is_committed(capsys, tmp_path):
    assert main(["show", "--write-cards", str(tmp_path)]) == 0
    assert "rewrote" in capsys.readouterr().out
    for path in CARDS_DIR.glob("*.md"):
        assert (tmp_path / path.name).read_text(encoding="utf-8") == path.read_text(encoding="utf-8")
    assert main(["show", "--write-cards", str(tmp_path)]) == 0
    assert "every card was up to date" in capsys.readouterr().out


def test_a_card_cites_the_report_split_first_then_the_tune_split_that_decided_its_defaults():
    from larev.cards.render import validity_lines

    report, tune = [line for line in validity_lines("larev", REPO / "docs") if "[NLI, " in line]
    assert "[NLI, report split]" in report and "read once, with the defaults the tune split decided" in report
    assert "[NLI, tune split]" in tune and "the run then moved the default" in tune


# ---- figures: read from the committed results, never typed ----------------------------------------------------------

def test_no_card_text_types_a_figure():
    """Every decimal a card text quotes is a placeholder read from a committed result (equation and section numbers
    and code spans aside): a typed one would go stale when the results move."""
    typed = {}
    for name, text in CARDS.items():
        for field in text.__dataclass_fields__:
            value = getattr(text, field)
            for item in value if isinstance(value, tuple) else (value,):
                found = typed_figures(" ".join(item) if isinstance(item, tuple) else item)
                if found:
                    typed.setdefault(name, []).extend(found)
    assert not typed, f"figures typed into card texts (use a {{{{FILE>KEY|FORMAT}}}} placeholder): {typed}"
    assert typed_figures("gold above it on 0.51 of instances (eq. 4.10, `lambda=0.5`, {{x>y|.2f}})") == ["0.51"]


def test_a_placeholder_reads_the_committed_result():
    report = json.loads((REPO / "docs" / "validity" / "nli-report.json").read_text())
    cell = report["scorers"]["larev"]["variant_order/borrowed"]
    key = "validity/nli-report.json>scorers>larev>variant_order/borrowed"
    assert figure(REPO / "docs", f"{key}>value|.2f") == f"{cell['value']:.2f}"
    assert figure(REPO / "docs", f"{key}|interval") == f"[{cell['low']:.3f}, {cell['high']:.3f}]"
    assert render_figures("on {{" + key + ">value|.3f}} of them", REPO / "docs") == f"on {cell['value']:.3f} of them"
    decision = "validity/nli-tune-v2-screen.json>decisions>larev>candidates>larev@reader"
    tune = json.loads((REPO / "docs" / "validity" / "nli-tune-v2-screen.json").read_text())
    better = tune["decisions"]["larev"]["candidates"]["larev@reader"]["better"]
    assert figure(REPO / "docs", f"{decision}>better|count") == str(len(better)) != "0"
    with pytest.raises(ConfigError, match="counts a list"):
        figure(REPO / "docs", f"{decision}>margin|count")
    with pytest.raises(ConfigError, match="has no scorers>nobody"):
        figure(REPO / "docs", "validity/nli-report.json>scorers>nobody>x")
    with pytest.raises(ConfigError, match="no committed result"):
        figure(REPO / "docs", "validity/missing.json>a")
    assert any(placeholders(getattr(CARDS["larev"], "failures")[k]) for k in range(3))  # the cards use them


def test_a_wrong_figure_planted_in_a_card_fails(tmp_path):
    """A copy of the committed cards with one figure changed is not what the generator makes from the results:
    the check that guards docs/metrics/ fails on it, naming the card."""
    import shutil

    copy = tmp_path / "metrics"
    shutil.copytree(CARDS_DIR, copy)
    card = copy / "larev.md"
    report = json.loads((REPO / "docs" / "validity" / "nli-report.json").read_text())
    quoted = f"{report['scorers']['larev']['variant/empty']['value']:.2f} nats"
    assert quoted in card.read_text()
    card.write_text(card.read_text().replace(quoted, "-1.26 nats"))
    stale = [name for name, text in build_cards(METRICS).items() if (copy / name).read_text() != text]
    assert stale == ["larev.md"]
