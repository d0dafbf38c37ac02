"""Metric cards: one per score name (docs/metrics/<name>.md), as Hugging Face `evaluate` keeps one beside each metric.

A card is built from three things:
  - what the metric declares, read from the registry's Metric objects (flows/metrics.py): its name and score names,
    description, definition version, options section with each field's default and description, command-line
    switches and signature sections; larev/signature.py's fields; the presets that fill its unset settings;
  - its text below, `CARDS`, keyed by score name: the formula with the paper's equation, how to read a score, what it
    was measured on, how it fails, and commands beyond the generated ones;
  - the committed results of the validity benchmark (`VALIDITY_RESULTS`, docs/validity/): its figures there.

The committed cards must equal `build_cards(METRICS)`: tests/test_cards.py regenerates them and compares, so a card
cannot drift from the code. `larev show --write-cards docs/metrics` rewrites them; `larev show --metric NAME` prints
one. The registry lives in flows/, which tasks/ may not import (tests/test_layers.py): callers pass it in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from larev.cards import code, default_text, option_rows, table
from larev.errors import ConfigError
from larev.signature import SIGNATURE_FIELDS
from larev.validity.protocol import GENERATOR_ORDER
from larev.validity.report import EVIDENCE_HEADS, cell_text, human_criteria, inverted_pairs, met_counts, met_in
from tasks.metric import PLACEMENT_FIELDS, RUN_SECTIONS, Metric

WRITE_COMMAND = "larev show --write-cards docs/metrics"
INDEX = "README.md"
RESULTS = "../results.md"
DEFAULTS = "../defaults.md"


@dataclass(frozen=True)
class CardText:
    """The prose of one card. `formula` is the formula alone (shown as code), `source` where it comes from (the
    paper and its equation number); `validated` and `failures` are one line each, links relative to docs/metrics/;
    `reproduce` adds (command, comment) lines to the generated ones; `bench_metrics` is what the
    generated `larev bench quality` line passes to `--metrics`."""

    title: str
    summary: str
    formula: str
    source: str
    terms: tuple[str, ...]
    unit: str
    direction: str
    range: str
    zero: str
    aggregate: str
    validated: tuple[str, ...]
    failures: tuple[str, ...]
    reproduce: tuple[tuple[str, str], ...] = ()
    bench_metrics: str = ""
    notes: tuple[str, ...] = ()


def _results(anchor: str) -> str:
    return f"{RESULTS}#{anchor}"


# docs/results.md's sections the cards cite (tests/test_cards.py checks each anchor exists); each of its figures
# says the command and the commit that made it
QA = _results("does-it-hold-on-qa-cos-e")
BACKBONE = _results("does-a-pretrained-backbone-change-the-picture")

ESNLI_BENCH = ("larev bench quality --task nli --train ../shared/data/esnli/dev.parquet --train-rows :8000 \\\n"
               "    --test ../shared/data/esnli/dev.parquet --test-rows 8000: --metrics {metrics} --no-stress "
               "--seeds 3 --out bench/{name}")
COSE_BENCH = ("make bench-cose", "real QA (CoS-E), every metric, with the human judgement files")

_LOGP_TERMS = ("y is the label the rationale explains: gold for the built-in variants, a file's `label` column "
               "otherwise; b states that label",
               "log p is `score.normalisation` (default `label_set`: the label's summed token log-probability "
               "renormalised over the row's label set, so chance is log(1/K))")

CARDS: dict[str, CardText] = {
    "rev": CardText(
        title="REV, rationale evaluation with conditional V-information (Chen et al., 2023)",
        summary=("How much more sure of the label an evaluator that reads the rationale is than one that reads only "
                 "the vacuous baseline b (the input and the label stated declaratively). The base metric LAREV and "
                 "larev_vs_empty are built on; its evaluators are LAREV's too."),
        formula="rev(x, y, r) = log p_phi(y | r, b) - log p_base(y | b)",
        source="Chen et al. (2023), eq. 5 (pointwise conditional V-information); eq. 6 averages it over a source",
        terms=("b: the vacuous baseline rationale built from x and y (NLI: a template, then a paraphrase; QA: the "
               "question and answer as a statement)",
               "phi_base: an evaluator trained on b alone; phi: the same backbone trained on [r, b] of the training "
               "split; both by maximising the label's log-likelihood",
               *_LOGP_TERMS),
        unit="nats (a difference of log-probabilities)",
        direction="higher = the rationale adds more label-relevant information beyond b",
        range="unbounded below; at most -log p_base(y | b), the baseline's surprisal (so near 0 when b gives y away)",
        zero=("phi is as sure of y with r as phi_base is from b alone: r adds nothing beyond b (the paper's reading); "
              "below 0, r argues against y"),
        aggregate="the mean over a source's rationales (eq. 6)",
        validated=(
            f"[real CoS-E]({QA}) (embedded, seed 0, 12 epochs): SUM of separations -0.774; a restated answer is paid "
            "0.233 nats over the same text with the answer blanked",
            f"[minilm-frozen]({BACKBONE}): still about 0 on e-SNLI (phi_base reads b at 1.000); on CoS-E, 3 seeds, it "
            "pays a restated answer 0.33-0.41 nats",
            f"[CommonsenseQA judgements]({QA}): Spearman -0.163 with people's \"new and supporting\" share; "
            "acceptability pairwise 0.558",
        ),
        failures=(
            "Baseline leakage: when b states the label (the NLI template and paraphrase baselines), phi_base reads y "
            "off b and REV is about 0 for every rationale, good or bad: on the validity benchmark's NLI tune split "
            "every built-in variant but borrowed_other scores within 0.01 nats of gold.",
            f"It pays a QA rationale for restating its answer: +0.233 nats on CoS-E over the same text with the answer "
            f"blanked; `score.normalisation=sum` raised it to 0.652 ([QA]({QA})).",
            "It pays another instance's same-label rationale as much as the instance's own (`borrowed`: gold above it "
            "on 0.50 of the validity benchmark's instances).",
            f"On CommonsenseQA's \"new and supporting information\" judgements it orders explanations against people "
            f"(Spearman -0.163; [QA]({QA})).",
        ),
        bench_metrics="rev",
    ),
    "larev": CardText(
        title="LAREV, leakage-aware REV (the thesis; the main method)",
        summary=("REV's estimator with the rationale read by phi_LA, an evaluator trained to be invariant to the "
                 "label leakage in b: IRM over baseline environments in which b's leaky spans are kept, masked or "
                 "rewritten to another label, against a probe that reads the label from phi_LA's encoding of the "
                 "masked baseline. Label leakage in b then earns a rationale nothing."),
        formula="larev(x, y, r) = log p_LA(y | r, b) - log p_base(y | b)",
        source=("the thesis (LAREV, 2026), eq. 4.4 as scored; phi_LA trained by eq. 4.10 (with the probe loss "
                "clipped at chance, a deliberate departure: `larev.objective.probe_bound`)"),
        terms=("b and phi_base: REV's (its card: [rev](rev.md))",
               "phi_LA: trained on [r_e, b_e] over the environments E1 (b), E2 (b's leakage spans masked), E3 (the "
               "spans rewritten to another label) and, with the QA label edits, E4; by ERM + lambda_irm * IRMv1 - "
               "lambda_probe * the probe's loss bounded at log K (eq. 4.10); the spans come from Integrated "
               "Gradients on phi_base and the span rule",
               *_LOGP_TERMS),
        unit="nats (a difference of log-probabilities)",
        direction="higher = the rationale adds more label-relevant information beyond b, leakage in b discounted",
        range="unbounded below; at most -log p_base(y | b)",
        zero=("phi_LA reading [r, b] is as sure of y as phi_base reading b. This is **not** \"no new information\": "
              "phi_LA is trained not to read b's leakage, which phi_base does read, so a rationale that adds nothing "
              "scores about phi_LA's reading of no rationale, below 0. Read the summary's `score_vs_empty` (the "
              "score minus the `empty` variant's) for \"more than no rationale\", or use "
              "[larev_vs_empty](larev_vs_empty.md)"),
        aggregate="the mean over a source's rationales",
        validated=(
            f"[real CoS-E]({QA}) (embedded, QA presets, seed 0): a restated answer earns 0.025 nats (REV 0.233), but "
            "phi_LA reads at chance and every separation stays below 0 (SUM -0.148)",
            f"[minilm next to the embedded backbone]({BACKBONE}): the thesis's weights collapse phi_LA on both; on "
            "minilm LAREV ranks \"The answer is X.\" above gold",
            f"[minilm-frozen]({BACKBONE}): e-SNLI gold - leaky 0.035-0.124 over 3 seeds; SNLI acceptability pairwise "
            "0.627 (REV 0.581)",
        ),
        failures=(
            "With IRM it does not beat its own control: on the validity benchmark's NLI tune split (embedded, 5 "
            "seeds) ERM over the same environments without IRM or probe is better on 9 of 19 criteria and worse on "
            "none, so the protocol's decision rule made that the default on the embedded backbone's real NLI data "
            "(IRM and probe weights 0: [the decision](../validity.md#defaults-decided-on-the-tune-split)). There "
            "the invariance comes from the environments alone; `larev_no_irm` and the erm_envs control then equal it.",
            f"The thesis's weights (IRM 25 / probe 0.005) collapse a from-scratch phi_LA, and minilm's, to a constant "
            f"prediction; the presets give IRM 1 (NLI; 0 on the embedded backbone's real data) and 10 (QA) on the "
            f"backbones trained here ([defaults]({DEFAULTS}#larev)).",
            "Its 0 is not \"no new information\": a rationale that adds nothing scores phi_LA's no-rationale reading "
            "(`empty`: 1.26 nats below gold on the validity benchmark), so gold - leaky and gold - vacuous are mostly "
            "gold against no rationale; use [larev_vs_empty](larev_vs_empty.md) for that zero.",
            "It pays another instance's same-label rationale as much as the instance's own (`borrowed`: gold above it "
            "on 0.51 of instances) and reads a bag of words (gold with its content words shuffled: 0.50).",
            f"Invariance is built on b, not r: a stated label is still paid on QA (CoS-E restating - masked 0.025 with "
            f"the label edits, [QA]({QA})), and on minilm it ranks \"The answer is X.\" above gold "
            f"([backbone]({BACKBONE})).",
            f"On CoS-E phi_LA reads at chance even when started from REV's phi (embedded, 12 epochs), so its QA "
            f"figures say little about the explanations ([QA]({QA})).",
        ),
        reproduce=(("larev bench quality ... --metrics rev,larev --controls --out bench/larev-controls",
                    "+ its controls, as control_NAME"),
                   ("larev run --ablations no_irm,no_probe,erm_envs,thesis", "+ its ablations, as larev_NAME"),
                   COSE_BENCH),
        bench_metrics="rev,larev",
        notes=("With `larev.ablations` and `larev.controls` the same step scores more rows: `larev_<ablation>` "
               "(thesis table 5.6: no_irm, no_probe, erm_envs, thesis) and `control_<name>` (erm_envs, phi, r_only), "
               "each with its own signature (its row name in the metric field).",),
    ),
    "larev_vs_empty": CardText(
        title="LAREV against no rationale (larev's own; off unless asked for)",
        summary=("LAREV's estimator with its zero point moved from phi_base's reading of b to phi_LA's own reading "
                 "of no rationale, and a phi_LA (phi_LA') trained so that this zero holds: a rationale that says "
                 "nothing about the instance (another instance's, a bare statement of the label, b itself) should "
                 "leave phi_LA' where no rationale leaves it."),
        formula="larev_vs_empty(x, y, r) = log p_LA'(y | r, b) - log p_LA'(y | empty, b)",
        source=("no paper equation: larev's own metric (docs/methods.md, LAREV step 6). Its first term is "
                "[larev](larev.md)'s (the thesis's eq. 4.4); phi_LA' is trained by eq. 4.10's terms plus the zero "
                "terms (the thesis names invariance on the rationale side as future work)"),
        terms=("phi_LA': a second phi_LA trained on LAREV's environments and probe with `larev`'s eq. 4.10 terms "
               "(its own IRM and probe weights where set), "
               "plus: every training instance also as [empty, b_e] -> y (its own cross-entropy term, out of the IRM "
               "penalty); the borrowed-rationale term lambda_borrowed * KL(sg p(. | empty, b_e) || p(. | r', b_e)), "
               "r' another training instance's rationale with the same label, a statement of the label, or b "
               "itself; the zero terms start after `zero_terms_start` of the steps",
               "empty: no rationale at all; phi_base is not used",
               *_LOGP_TERMS),
        unit="nats (a difference of log-probabilities)",
        direction="higher = phi_LA' is more sure of y after reading r than before",
        range="unbounded below; at most -log p_LA'(y | empty, b)",
        zero=("phi_LA' believes no more after reading r than before; the `empty` variant scores exactly 0, and "
              "a rationale about another instance should score about 0"),
        aggregate="the mean over a source's rationales",
        validated=(
            f"[minilm-frozen, e-SNLI test rows 8000:, 3 seeds]({BACKBONE}): the zero holds in every seed (borrowed "
            "+0.061 to +0.074, vacuous -0.016 to -0.002); SNLI acceptability pairwise 0.628",
        ),
        failures=(
            "It trains on the kinds of text its `borrowed`, `borrowed_other`, `vacuous`, `leaky`, `gold_leaky` and "
            "`empty` variants are: those cells measure a trained behaviour on new pairs, not evidence (the validity "
            "benchmark marks them † and does not judge them).",
            "On the validity benchmark's NLI tune split (embedded, 5 seeds) it agrees with people least of the metrics "
            "(AUROC 0.476 [0.438, 0.514], chance) and meets 3 of the 22 criteria it is judged on: holding the zero "
            "costs the reading.",
            f"Its minilm-frozen settings were chosen partly on the SNLI acceptability file, so that file's agreement "
            f"there is not an untouched measurement ([defaults]({DEFAULTS}#larev_vs_empty)).",
            f"On QA (CoS-E, minilm-frozen) the zero holds but a stated label is still paid (\"The answer is X.\" "
            f"+0.148) and phi_LA' reads the answer-masked rows at chance ([defaults]({DEFAULTS}#larev_vs_empty)).",
            "`larev_vs_empty.exclusive_terms=demo` encodes the rule by which the demo generator makes its labels: a "
            "test fixture, never a setting to report figures with.",
        ),
        reproduce=(("larev run --larev-vs-empty --set larev_vs_empty.exclusive_terms=demo",
                    "the demo with counterfactual twins (a test fixture)"),),
        bench_metrics="rev,larev,larev_vs_empty",
    ),
    "r_only": CardText(
        title="r_only, the rationale read alone (REV's estimator; off unless asked for)",
        summary=("How much more sure of the label an evaluator that reads only the rationale is than REV's phi_base "
                 "reading the vacuous baseline b: the explanation-only reader of Wiegreffe et al. (2022) in REV's "
                 "units. It is LAREV's `r_only` control made a metric, because on the validity benchmark it agrees "
                 "with people more than any other trained scorer; it does not discount label leakage."),
        formula="r_only(x, y, r) = log p_r(y | r) - log p_base(y | b)",
        source=("REV's estimator (Chen et al., 2023, eq. 5) with g' replaced by an evaluator of r alone, the "
                "explanation-only model of Wiegreffe et al. (2022)"),
        terms=("b and phi_base: REV's (its card: [rev](rev.md))",
               "p_r: an evaluator of the same backbone trained on the training split's gold rationales alone "
               "(input `rationale: r`), by maximising the label's log-likelihood; the model LAREV's r_only control "
               "trains",
               *_LOGP_TERMS),
        unit="nats (a difference of log-probabilities)",
        direction="higher = the rationale by itself points to the label more surely than b does",
        range="unbounded below; at most -log p_base(y | b)",
        zero=("r alone makes p_r as sure of y as b makes phi_base: on NLI, where b states the label, a rationale "
              "scores below 0 unless it gives the label away as clearly as b"),
        aggregate="the mean over a source's rationales",
        validated=(),
        failures=(
            "Not leakage-robust by construction: a rationale that states the label in words p_r learned from the "
            "training rationales is paid for it. It ranks the built-in leaky and novel label statements low only "
            "because their wording is unlike the training rationales.",
            "It reads r without the instance, so another instance's same-label rationale scores as the instance's "
            "own (`borrowed`, order share 0.50 on the validity benchmark).",
            "It reads a bag of words on these backbones: gold with its content words shuffled scores as gold.",
            "It scores an explanation's wording, not what the instance needs: its scores of two annotators' "
            "explanations of one instance correlate at 0.17 on the validity benchmark (REV's 0.78).",
        ),
        reproduce=(("larev run --r-only", "train and score r_only beside the default metrics"),),
        bench_metrics="rev,r_only",
    ),
    "rora": CardText(
        title="RORA, robust rationale evaluation (Jiang et al., 2024)",
        summary=("How much more sure of the label an evaluator of (x, r) is than one of x alone, where the (x, r) "
                 "evaluator Phi is trained with IRM over counterfactual rationales whose leaky spans were re-infilled "
                 "for every label, so a rationale's label-leaking words earn nothing. Reads the task input x, not "
                 "REV's baseline b."),
        formula="rora(x, y, r) = log p_Phi(y | x, r) - log p_theta(y | x)",
        source="Jiang et al. (2024), eq. 10; Phi trained by eq. 8 (IRMv1 over the label environments), theta by eq. 9",
        terms=("leaky spans: words of the training rationales a deliberately weak rationale-only model reads the "
               "label from (Integrated Gradients), chosen by larev's span rule (`rora.detection.rule`) until a "
               "fresh probe on (x, masked r) reads no more than on x",
               "D^e: the training rationales with their spans re-infilled for each label e by the infiller",
               "Phi: trained on `input: x rationale: r^e` over every D^e (eq. 8); theta: on `input: x` alone "
               "(eq. 9), shared with RQ and LAS",
               "by default (`rora.train_on=gold`) the models learn from the gold training rationales and score every "
               "source; the paper's per-source protocol is `--rora-train-on each_source`",
               *_LOGP_TERMS[1:]),
        unit="nats (a difference of log-probabilities)",
        direction="higher = the rationale adds more label-relevant information beyond x, its leaky spans discounted",
        range="unbounded below; at most -log p_theta(y | x)",
        zero="Phi reading (x, r) is as sure of y as theta reading x alone: r adds nothing beyond the input",
        aggregate="the mean over a source's rationales",
        validated=(
            f"[real CoS-E]({QA}) (embedded, copy term on, seed 0): Phi at chance, every separation about 0 "
            "(SUM -0.008)",
            f"[minilm-frozen]({BACKBONE}): Phi at chance on e-SNLI (0.356) and CoS-E (0.339): every score the same "
            "number",
            f"[CommonsenseQA judgements]({QA}): pairwise 0.538 (fine-grained) and 0.496 (acceptability), about chance",
        ),
        failures=(
            "Phi learns little on these backbones (embedded e-SNLI: a little above chance; CoS-E and minilm-frozen: at "
            "chance), so every rationale gets about the same score: on the validity benchmark it orders almost no "
            "perturbation below gold.",
            "A RORA figure near 0 (leaky, restating - masked) can be vacuous: check the summary's `reads` and "
            "`accuracy_with` first.",
            f"The paper's per-source protocol ranks gold_leaky above gold here (0.071 against 0.006 on e-SNLI; "
            f"[defaults]({DEFAULTS}#rora)).",
            f"On QA a rationale-only model without the copy term cannot see a restated answer it never saw as a label; "
            f"the QA preset turns the copy term on ([defaults]({DEFAULTS}#rora)).",
        ),
        reproduce=(("larev run --rora-train-on each_source", "the paper's per-source protocol"), COSE_BENCH),
        bench_metrics="rora",
    ),
    "rq": CardText(
        title="RQ, rationale quality (Wiegreffe et al., 2021)",
        summary=("Simulatability with the gold label: how much more often a proxy reading (x, r) predicts the gold "
                 "label than theta reading x alone. An accuracy-based baseline; it does not discount leakage."),
        formula="rq(x, y, r) = 1[proxy(x, r) predicts y] - 1[theta(x) predicts y]",
        source=("Wiegreffe et al. (2021), as Chen et al. (2023) section 3.3 restate it; no equation number is cited "
                "here (that paper is not among the project's copies in ../shared/papers)"),
        terms=("y: the gold label",
               "proxy: an evaluator trained on (x, r) of the source's own training-split rationales; a source with "
               "no training split (a `larev score` file) is read by the gold rationales' proxy",
               "theta: RORA's evaluator of x alone (the reference simulators train one model on both input forms; "
               "two models of one backbone keep theta shared with RORA)",
               "prediction: the argmax over the row's label set"),
        unit="accuracy difference",
        direction="higher = the rationale makes the gold label easier to predict than the input alone",
        range="each rationale -1, 0 or 1; a source's mean in [-1, 1]",
        zero="the proxy with r is right exactly as often as theta without it",
        aggregate="the mean over a source's rationales (no leakage adjustment)",
        validated=(
            f"[real CoS-E]({QA}) (embedded, seed 0): \"The answer is X.\" +0.563 over gold; restating - masked "
            "0.010 [-0.002, 0.021]",
            f"[minilm-frozen]({BACKBONE}): on CoS-E \"The answer is X.\" gains 0.612, gold 0.145",
            f"[CommonsenseQA judgements]({QA}): acceptability pairwise 0.500, mostly ties",
        ),
        failures=(
            f"It pays label leakage by definition: \"The answer is X.\" beats the human explanation on CoS-E (-0.563; "
            f"[QA]({QA})); the validity benchmark does not judge its leaky, gold_leaky and vacuous cells, since its "
            f"proxies train on them.",
            f"Its proxy learns a fixed template, not to find an answer restated in free text: CoS-E restating - "
            f"masked 0.010, interval over 0 ([QA]({QA})).",
            f"A proxy that does not learn makes every gain about 0 (CoS-E's gold rationales read at 0.326; "
            f"[QA]({QA})).",
            "Pointwise it is -1, 0 or 1: many pairs of one instance tie (a tie counts 1/2), so within-instance "
            "agreement with people sits near chance.",
            "A rationale file scored with `larev score` has no training split: gold's proxy reads it, which is not "
            "RQ's protocol for that source.",
        ),
        reproduce=(COSE_BENCH,),
        bench_metrics="rq",
    ),
    "las": CardText(
        title="LAS, leakage-adjusted simulatability (Hase et al., 2020)",
        summary=("The simulatability gain for the label the rationale comes with, averaged within leaking and within "
                 "non-leaking rationales and then macro-averaged, so that rationales that state the label weigh no "
                 "more than the others."),
        formula=("las = ( mean_{r leaks} g(r) + mean_{r does not leak} g(r) ) / 2,  "
                 "g(r) = 1[proxy(x, r) predicts y] - 1[theta(x) predicts y]"),
        source=("Hase et al. (2020), as Chen et al. (2023) section 3.3 restate it: the macro-average over leaking "
                "and non-leaking rationales; no equation number is cited here (that paper is not among the "
                "project's copies in ../shared/papers)"),
        terms=("y: the label the rationale comes with (a model's prediction; gold for the built-in variants)",
               "r leaks when the source's rationale-only model (RORA's, or one trained for RQ / LAS) recovers y "
               "from r alone",
               "proxy and theta: RQ's ([rq](rq.md))"),
        unit="accuracy difference",
        direction="higher = the rationale helps a simulator predict its label, leaking rationales weighed as one group",
        range="[-1, 1]; NaN when every rationale of a source leaks, or none does",
        zero="within each group, the proxy with r is right as often as theta without it, on average over the groups",
        aggregate="`leak_macro`: the mean gain within each group, then the mean of the two groups",
        validated=(
            f"[real CoS-E]({QA}) (embedded, copy term on, seed 0): \"The answer is X.\" +0.385 over gold; "
            "restating - masked -0.019 [-0.054, 0.014]",
            f"[minilm-frozen]({BACKBONE}): on CoS-E \"The answer is X.\" gains 0.660, gold 0.137",
        ),
        failures=(
            "Undefined (NaN) when one group is empty: every `leaky` rationale leaks, as in RORA's table 2.",
            "A small group decides half the score: a few non-leaking rationales of a source weigh as much as all its "
            "leaking ones.",
            "It depends on the leakage indicator (the rationale-only model, with or without the copy term), which "
            "decides the groups.",
            f"Within a group it pays leakage as RQ does: \"The answer is X.\" +0.385 over gold on CoS-E "
            f"([QA]({QA})).",
            "Pointwise it is RQ's gain for the rationale's own label: it orders the rationales of one instance as RQ "
            "does (their human-judgement figures on the validity benchmark are equal), and a `larev score` file is "
            "read by gold's proxy.",
        ),
        reproduce=(COSE_BENCH,),
        bench_metrics="las",
    ),
}

SIGNATURE_TEXT: dict[str, str] = {
    "metric": "the score row's name and its definition's version: a new formula under a name is a new version",
    "backbone": ("the evaluator backbone (`model.backbone`), with `@` and the first 8 hex digits of the sha256 of the "
                 "pretrained weights it starts from (none for `embedded`, which is built from its settings)"),
    "settings": ("the first 8 hex digits of the sha256 of the resolved settings (presets filled) of the sections "
                 "below, as canonical JSON"),
    "seed": "the evaluators' training seed (`train.seed`)",
    "larev": "the larev version that scored",
}

# The validity benchmark's committed results the cards quote (docs/validity.md shows them whole): {task: paths},
# the first that has the metric
_VALIDITY_DIR = Path(__file__).resolve().parents[1] / "docs" / "validity"
# per task, the committed runs a card cites, each on a line of its own: the report split (read once, with the defaults
# the tune split decided) first, then the tune split
VALIDITY_RESULTS = {"nli": (_VALIDITY_DIR / "nli-report.json", _VALIDITY_DIR / "nli-tune.json"),
                    "qa": (_VALIDITY_DIR / "qa-tune-seed0.json",)}
# the committed run that judged the scorers on generators of known quality (criterion generator_order)
GENERATOR_RESULTS = _VALIDITY_DIR / "nli-tune.json"
VALIDITY_PAGE = "../validity.md"
VALIDITY_MISSING = "**The validity benchmark (`larev bench validity`) has no {task} figures for `{name}` yet.**"
EARLIER_LINE = ("Measured before the validity benchmark and before signatures existed; each figure is in "
                f"[docs/results.md]({RESULTS}) with the command and the commit that made it:")


def validity_lines(name: str) -> list[str]:
    """What the committed validity results (VALIDITY_RESULTS) say of score name `name`: its human-judgement figures
    with their intervals and marks, and how many perturbation and variant criteria it meets."""
    lines = []
    for task, paths in VALIDITY_RESULTS.items():
        found = [r for r in (json.loads(p.read_text()) for p in paths if p.is_file()) if name in r["scorers"]]
        if not found:
            lines.append(VALIDITY_MISSING.format(task=task.upper(), name=name))
        lines += [_validity_line(results, task, name) for results in found]
    return lines + generator_order_lines(name)


def _validity_line(results: dict, task: str, name: str) -> str:
    """One committed validity run's figures of score name `name`."""
    cells = results["scorers"][name]
    human = [f"{c.split('/')[0].replace('acceptability_', '')} {cell_text(cells[c])}"
             for c in human_criteria(results) if c in cells]
    counts = [f"{met} of {judged} {label[:-1]} criteria met"
              for label, heads in EVIDENCE_HEADS.items() for met, judged in [met_in(cells, heads)]]
    met, judged, _ = met_counts(results)[name]
    return (f"**The validity benchmark** (`larev bench validity`, [{task.upper()}, {results['split']} split]"
            f"({VALIDITY_PAGE}), "
            f"protocol `{results['protocol'][:12]}`, seeds {', '.join(map(str, results['seeds']))}, "
            f"backbone `{results['backbone']}`"
            + ("; read once, with the defaults the tune split decided" if results["split"] == "report" else "")
            + ("; one seed: the intervals cover the instances only" if len(results["seeds"]) == 1 else "")
            + ("; partial: not every scorer or seed of the protocol" if results.get("partial") else "")
            + "): " + "; ".join(human) + "; " + ", ".join(counts)
            + f"; {met} of {judged} thresholds in all (✓ met, ✗ not)." + decided_line(results, name))


def decided_line(results: dict, name: str) -> str:
    """Where the run itself moved `name`'s default (its `decisions`): the candidate it chose, its settings and what
    it meets. Empty where the default stayed or the run decided nothing."""
    decision = (results.get("decisions") or {}).get(name) or {}
    chosen = decision.get("chosen")
    if not chosen:
        return ""
    met, judged, _ = met_counts(results)[chosen]
    settings = ", ".join(f"`{k}={v}`" for k, v in decision["settings"].items())
    return (f" These are the settings the run started with; by the protocol's decision rule the run then moved the "
            f"default on this backbone to `{chosen}` ({settings}; [the decision]({VALIDITY_PAGE}#defaults-decided-on-"
            f"the-tune-split)): AUROC "
            + "; ".join(cell_text(results["scorers"][chosen][c]) for c in human_criteria(results)
                        if c.startswith("acceptability_auroc/") and c in results["scorers"][chosen])
            + f", {met} of {judged} thresholds.")


def generator_order_lines(name: str) -> list[str]:
    """Score name `name`'s Kendall tau with the known order of the generators (GENERATOR_RESULTS), and the pairs
    of generators its mean scores put the other way round."""
    if not GENERATOR_RESULTS.is_file():
        return []
    results = json.loads(GENERATOR_RESULTS.read_text())
    cell = results["scorers"].get(name, {}).get(GENERATOR_ORDER)
    if cell is None or name not in ((results.get("generators") or {}).get("mean_score") or {}):
        return []
    inverted = [f"`{a}` below `{b}`" for a, b in inverted_pairs(results, name)]
    return [f"**Generators of known quality** ([validity.md]({VALIDITY_PAGE}#generators-of-known-quality-nli-tune-"
            f"split), {results['task'].upper()}, {results['split']} split, seeds "
            f"{', '.join(map(str, results['seeds']))}): Kendall's tau with their known order {cell_text(cell)}; "
            + (f"its mean scores put {', '.join(inverted)}." if inverted
               else "its mean scores over the seeds keep every ranked pair in order.")]


# ---- from the registry ----------------------------------------------------------------------------------------

def card_names(metrics: list[Metric]) -> list[str]:
    """Every registered metric's score names, in registry order: one card each."""
    return [name for m in metrics for name in m.names()]


def _owner(metrics: list[Metric], name: str) -> Metric:
    for metric in metrics:
        if name in metric.names():
            return metric
    raise ConfigError(f"no metric named {name!r}; the metrics with a card: {', '.join(card_names(metrics))}")


def _section_owner(metrics: list[Metric], section: str) -> Metric | None:
    """The metric that declares `section`'s options model."""
    return next((m for m in metrics if m.section == section and m.options is not None), None)


def signed_sections(metric: Metric) -> list[str]:
    """The parameter sections whose resolved settings enter `metric`'s settings digest (tasks.metric.metric_settings):
    the run's RUN_SECTIONS, then the metric's `signature_sections()`."""
    return list(dict.fromkeys([*RUN_SECTIONS, *metric.signature_sections()]))


def _switches(metric: Metric, field: str) -> list[str]:
    return [o.flag for o in metric.cli_options if o.field == field]


def _trains(metrics: list[Metric], metric: Metric) -> str:
    if metric.section is None:
        return "always: it has no parameter section, so no switch turns it off"
    owner = _section_owner(metrics, metric.section)
    if owner is None:
        return f"with section `{metric.section}`"
    default = owner.options.model_fields["enabled"].default if "enabled" in owner.options.model_fields else True
    switches = _switches(owner, "enabled")
    whose = "" if owner is metric else f", which `{owner.name}` owns: it trains and scores with it"
    text = (f"{'by default' if default else 'only when asked for'}: `{metric.section}.enabled` (default "
            f"`{str(bool(default)).lower()}`){whose}")
    return text + (f"; {', '.join(code(s) for s in switches)}" if switches else "")


def _header(metrics: list[Metric], metric: Metric, name: str, text: CardText | None) -> list[str]:
    cls, version = type(metric), metric.definition_version
    others = [n for n in metric.names() if n != name]
    registered = f"`{metric.name}`: `{cls.__module__}.{cls.__qualname__}` in flows/metrics.py's `METRICS`"
    if others:
        registered += f", with score rows {', '.join(code(n) for n in metric.names())}"
    rows = [("score rows", code(name)),
            ("registered as", registered),
            ("definition version", f"`{version}` (signature `metric:{name}.{version}`)"),
            ("trains and scores", _trains(metrics, metric)),
            ("`--metrics` name", f"`{name}` (`larev bench quality --metrics`)")]
    if metric.description:
        rows.append(("description", metric.description))
    if text is not None:
        rows.append(("unit", text.unit))
    return table(("", ""), rows)


def _signature(metric: Metric, name: str) -> list[str]:
    version = metric.definition_version
    lines = ["## Signature", "",
             f"Every score row of `{name}` carries a signature (larev/signature.py), one string per run: scores are "
             "comparable only when their signatures are equal, and `larev compare` refuses (exit 2) to compare "
             "scores whose signatures differ in anything but the seed.", "",
             code(f"metric:{name}.{version}|backbone:BACKBONE[@WEIGHTS]|settings:DIGEST|seed:SEED|larev:VERSION"), ""]
    lines += table(("field", "what it holds"),
                   [(code(f), (f"`{name}.{version}`: " if f == "metric" else "") + SIGNATURE_TEXT[f])
                    for f in SIGNATURE_FIELDS])
    sections = signed_sections(metric)
    own = [s for s in sections if s not in RUN_SECTIONS]
    lines += ["", "The settings digest covers the sections "
              + ", ".join(code(s) for s in sections)
              + f": the run's own ({', '.join(code(s) for s in RUN_SECTIONS)}; `data` names its files by their "
              "sha256, not their paths)"
              + (f" and {', '.join(code(s) for s in own)} (`signature_sections()`)" if own else
                 ", and no section of the metric's own")
              + f". Fields named {', '.join(code(f) for f in PLACEMENT_FIELDS)} are left out: they say where a step "
              "runs, not what it computes."]
    return lines


def _options(metrics: list[Metric], metric: Metric) -> list[str]:
    lines = ["## Options", ""]
    if metric.section is None:
        return lines + [f"None of its own: `{metric.name}` reads the run's sections "
                        f"({', '.join(code(s) for s in RUN_SECTIONS)}; `larev run --help`)."]
    owner = _section_owner(metrics, metric.section)
    if owner is not metric:
        where = f" (its card: [{owner.names()[0]}]({owner.names()[0]}.md#options))" if owner is not None else ""
        return lines + [f"None of its own: it reads section `{metric.section}`{where}, whose settings it trains "
                        "and scores with and whose digest its signature carries."]
    options = metric.options()
    lines += [f"Section `{metric.section}`" + (f": {metric.description}." if metric.description else ".")
              + f" Set any of them with `--set {metric.section}.PATH=VALUE` or a `--params` file; a default of "
              "`null` or `auto` is filled before the first metric step by the presets named (larev/presets.toml) "
              "or copies the setting after `=`; run.json records what filled each.", ""]
    rows = []
    for row in option_rows(options):
        if row.section:
            rows.append((f"**{row.path}**", "", row.description))
        else:
            rows.append((code(row.path), default_text(metric.section, row), row.description))
    lines += table(("setting", "default", "what it does"), rows)
    if metric.cli_options:
        lines += ["", "Command-line switches (`larev run`, `larev bench quality`):", ""]
        lines += table(("switch", "sets", "help"),
                       [(code(o.flag), code(f"{metric.section}.{o.field}")
                         + (f" = `{str(o.const).lower() if isinstance(o.const, bool) else o.const}`"
                            if o.is_switch else ""), o.help or "the setting's own description")
                        for o in metric.cli_options])
    return lines


def _enable_flag(metrics: list[Metric], metric: Metric) -> str:
    """What `larev run` needs to train `metric` when it is off by default ('' when it is on)."""
    owner = _section_owner(metrics, metric.section) if metric.section else None
    if owner is None or owner.options.model_fields.get("enabled") is None:
        return ""
    if owner.options.model_fields["enabled"].default:
        return ""
    on = [o.flag for o in owner.cli_options if o.field == "enabled" and o.is_switch and o.const is True]
    return f" {on[0]}" if on else f" --set {metric.section}.enabled=true"


def _reproduce(metrics: list[Metric], metric: Metric, name: str, text: CardText | None) -> list[str]:
    on = _enable_flag(metrics, metric)
    bench = ESNLI_BENCH.format(metrics=(text.bench_metrics if text and text.bench_metrics else name), name=name)
    commands = [(f"larev run{on}", "the demo data (NLI): runs/demo-nli/"),
                (f"larev run{on} --task nli --train train.parquet --test test.jsonl --run-name mine", ""),
                ("larev score --run runs/demo-nli --rationales my_model.jsonl --name my-model", "your rationales"),
                ("larev show runs/demo-nli --report", "the scores, each with its signature"),
                (bench, ""),
                *(text.reproduce if text else ()),
                (f"larev show --metric {name}", "this card")]
    lines = [f"{c}  # {comment}" if comment else c for c, comment in commands]
    return ["## Reproduce", "", "```bash", *lines, "```"]


def build_card(metrics: list[Metric], name: str) -> str:
    """The Markdown card of score name `name` (module docstring): its text from CARDS, the rest from its Metric."""
    metric = _owner(metrics, name)
    text = CARDS.get(name)
    title = text.title if text else metric.description or name
    lines = [f"# `{name}`: {title}", "",
             f"_Generated from the metric's declarations and its text in tasks/cards.py by `{WRITE_COMMAND}`; "
             "tests/test_cards.py fails when this file differs. Edit those, not this file._", ""]
    if text is None:
        lines += [f"No card text yet: add `{name}` to `CARDS` in tasks/cards.py.", ""]
    else:
        lines += [text.summary, ""]
    lines += _header(metrics, metric, name, text) + [""]
    if text is not None:
        lines += ["## Formula", "", f"**Formula:** `{text.formula}`: {text.source}.", ""]
        lines += [f"- {t}" for t in text.terms] + [""]
        lines += ["## Reading a score", "",
                  f"- **Direction:** {text.direction}.",
                  f"- **Range:** {text.range}.",
                  f"- **0 means:** {text.zero}.",
                  f"- **A source's score:** {text.aggregate}.",
                  *[f"- {n}" for n in text.notes], ""]
        lines += ["## Validated on", "", *[part for line in validity_lines(name) for part in (line, "")]]
        if text.validated:
            lines += [EARLIER_LINE, "", *[f"- {v}" for v in text.validated], ""]
        lines += ["## Known failure modes", ""] + [f"- {f}" for f in text.failures] + [""]
    lines += _signature(metric, name) + [""]
    lines += _options(metrics, metric) + [""]
    lines += _reproduce(metrics, metric, name, text)
    return "\n".join(lines) + "\n"


def build_index(metrics: list[Metric]) -> str:
    """docs/metrics/README.md: one line per card."""
    lines = ["# Metric cards", "",
             "One card per metric score name, as Hugging Face `evaluate` keeps one beside each metric: the formula "
             "with its paper's equation, how to read a score, what it was measured on, how it fails, its signature, "
             "its options and the commands that reproduce it. `larev show --metric NAME` prints one.", "",
             f"_Generated from the registry (flows/metrics.py) and tasks/cards.py by `{WRITE_COMMAND}`; "
             "tests/test_cards.py fails when a file here differs._", ""]
    for name in card_names(metrics):
        text = CARDS.get(name)
        what = f"{text.title}: `{text.formula}`" if text else "no card text yet"
        lines.append(f"- [`{name}`]({name}.md): {what}")
    return "\n".join(lines) + "\n"


def build_cards(metrics: list[Metric]) -> dict[str, str]:
    """{file name: Markdown} of every card and the index, as docs/metrics/ must hold them."""
    return {**{f"{name}.md": build_card(metrics, name) for name in card_names(metrics)}, INDEX: build_index(metrics)}


def write_cards(metrics: list[Metric], directory: str | Path) -> list[str]:
    """Write `build_cards(metrics)` into `directory`; the names of the files whose content changed."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, text in build_cards(metrics).items():
        path = out / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(name)
    return changed


def metric_card(metrics: list[Metric], name: str) -> str:
    """The card of `name` (a score name, any case); a ConfigError naming the known ones for an unknown name."""
    return build_card(metrics, name.strip().lower())
