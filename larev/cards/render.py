"""Metric cards: one per score name (docs/metrics/<name>.md), as Hugging Face `evaluate` keeps one beside each metric.

A card is built from three things:
  - what the metric declares, read from the registry's Metric objects (flows/metrics.py, passed in: the core imports
    no registry): its name and score names, description, definition version, options section with each field's
    default and description, command-line switches and signature sections; larev/signature.py's fields; the presets
    that fill its unset settings;
  - its text, larev/cards/texts/<name>.toml (larev/cards/texts.py): the formula with the paper's equation, how to
    read a score, what it was measured on, how it fails, and commands beyond the generated ones;
  - the committed results under the docs directory: the validity benchmark's (docs/validity/) and every figure the
    text quotes through a placeholder (larev/cards/figures.py): no figure is typed into a card.

The committed cards must equal `build_cards(...)`: tests/test_cards.py regenerates them and compares, so a card
cannot drift from the code or from the results. `larev show --write-cards docs/metrics` rewrites them (flows/cards.py
passes the registry); `larev show --metric NAME` prints one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from larev.cards import code, default_text, option_rows, table
from larev.cards.figures import render_figures
from larev.cards.texts import CardText, card_texts
from larev.errors import ConfigError
from larev.signature import SIGNATURE_FIELDS
from larev.validity.protocol import GENERATOR_ORDER
from larev.validity.report import EVIDENCE_HEADS, cell_text, human_criteria, inverted_pairs, met_counts, met_in

WRITE_COMMAND = "larev show --write-cards docs/metrics"
INDEX = "README.md"
RESULTS = "../results.md"
DEFAULTS = "../defaults.md"
# the data directory: LAREV_DATA, else ../shared/data where it exists (larev/data/location.py; docs/data.md)
ESNLI_BENCH = ("larev bench quality --task nli --train $LAREV_DATA/esnli/dev.parquet --train-rows :8000 \\\n"
               "    --test $LAREV_DATA/esnli/dev.parquet --test-rows 8000: --metrics {metrics} --no-stress "
               "--seeds 3 --out bench/{name}")
DATA_COMMAND = ("larev data get esnli --only dev --out data  # e-SNLI from its authors' release; "
                "then LAREV_DATA=data (docs/data.md)")


@dataclass(frozen=True)
class Registry:
    """What a card reads of the project beyond its text: the registered metrics (tasks.metric.Metric objects, in
    order), the run's own parameter sections and the setting names that say where a step runs, and the docs
    directory whose committed results the figures come from."""

    metrics: Sequence[Any]
    run_sections: tuple[str, ...]
    placement_fields: tuple[str, ...]
    docs: Path
    texts: dict[str, CardText] | None = None

    def text(self, name: str) -> CardText | None:
        texts = self.texts if self.texts is not None else card_texts()
        return texts.get(name)


SIGNATURE_TEXT: dict[str, str] = {
    "metric": "the score row's name and its definition's version: a new formula under a name is a new version",
    "backbone": ("the evaluator backbone (`model.backbone`), with `@` and the first 8 hex digits of the sha256 of the "
                 "pretrained weights it starts from (none for `embedded`, which is built from its settings)"),
    "settings": ("the first 8 hex digits of the sha256 of the resolved settings (presets filled) of the sections "
                 "below, as canonical JSON"),
    "seed": "the evaluators' training seed (`train.seed`)",
    "larev": "the larev version that scored",
}

# per task, the committed validity runs a card cites (under the docs directory), each on a line of its own: the
# report split (read once, with the defaults the tune split decided) first, then the tune split
VALIDITY_RESULTS = {"nli": ("validity/nli-report.json", "validity/nli-tune.json"),
                    "qa": ("validity/qa-tune-seed0.json",)}
# the committed run that judged the scorers on generators of known quality (criterion generator_order): the report
# split, with today's defaults; and the section of docs/validity.md that shows it
GENERATOR_RESULTS = "validity/nli-report.json"
GENERATOR_SECTION = "todays-table-nli-report-split"
VALIDITY_PAGE = "../validity.md"
VALIDITY_MISSING = "**The validity benchmark (`larev bench validity`) has no {task} figures for `{name}` yet.**"
EARLIER_LINE = ("Measured before the validity benchmark and before signatures existed; each figure is in "
                f"[docs/results.md]({RESULTS}) with the command and the commit that made it:")


def validity_lines(name: str, docs: Path) -> list[str]:
    """What the committed validity results (VALIDITY_RESULTS, under `docs`) say of score name `name`: its
    human-judgement figures with their intervals and marks, and how many perturbation and variant criteria it
    meets."""
    lines = []
    for task, paths in VALIDITY_RESULTS.items():
        found = [r for r in (json.loads((docs / p).read_text()) for p in paths if (docs / p).is_file())
                 if name in r["scorers"]]
        if not found:
            lines.append(VALIDITY_MISSING.format(task=task.upper(), name=name))
        lines += [_validity_line(results, task, name) for results in found]
    return lines + generator_order_lines(name, docs)


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


def generator_order_lines(name: str, docs: Path) -> list[str]:
    """Score name `name`'s Kendall tau with the known order of the generators (GENERATOR_RESULTS), and the pairs
    of generators its mean scores put the other way round."""
    if not (docs / GENERATOR_RESULTS).is_file():
        return []
    results = json.loads((docs / GENERATOR_RESULTS).read_text())
    cell = results["scorers"].get(name, {}).get(GENERATOR_ORDER)
    if cell is None or name not in ((results.get("generators") or {}).get("mean_score") or {}):
        return []
    inverted = [f"`{a}` below `{b}`" for a, b in inverted_pairs(results, name)]
    return [f"**Generators of known quality** ([validity.md]({VALIDITY_PAGE}#{GENERATOR_SECTION}), "
            f"{results['task'].upper()}, {results['split']} split, seeds "
            f"{', '.join(map(str, results['seeds']))}): Kendall's tau with their known order {cell_text(cell)}; "
            + (f"its mean scores put {', '.join(inverted)}." if inverted
               else "its mean scores over the seeds keep every ranked pair in order.")]


# ---- from the registry ----------------------------------------------------------------------------------------

def card_names(metrics: Sequence[Any]) -> list[str]:
    """Every registered metric's score names, in registry order: one card each."""
    return [name for m in metrics for name in m.names()]


def _owner(metrics: Sequence[Any], name: str) -> Any:
    for metric in metrics:
        if name in metric.names():
            return metric
    raise ConfigError(f"no metric named {name!r}; the metrics with a card: {', '.join(card_names(metrics))}")


def _section_owner(metrics: Sequence[Any], section: str) -> Any | None:
    """The metric that declares `section`'s options model."""
    return next((m for m in metrics if m.section == section and m.options is not None), None)


def signed_sections(reg: Registry, metric: Any) -> list[str]:
    """The parameter sections whose resolved settings enter `metric`'s settings digest (tasks.metric.metric_settings):
    the run's own sections, then the metric's `signature_sections()`."""
    return list(dict.fromkeys([*reg.run_sections, *metric.signature_sections()]))


def _switches(metric: Any, field: str) -> list[str]:
    return [o.flag for o in metric.cli_options if o.field == field]


def _trains(metrics: Sequence[Any], metric: Any) -> str:
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


def _header(metrics: Sequence[Any], metric: Any, name: str, text: CardText | None) -> list[str]:
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


def _signature(reg: Registry, metric: Any, name: str) -> list[str]:
    version = metric.definition_version
    lines = ["## Signature", "",
             f"Every score row of `{name}` carries a signature (larev/signature.py), one string per run: scores are "
             "comparable only when their signatures are equal, and `larev compare` refuses (exit 2) to compare "
             "scores whose signatures differ in anything but the seed.", "",
             code(f"metric:{name}.{version}|backbone:BACKBONE[@WEIGHTS]|settings:DIGEST|seed:SEED|larev:VERSION"), ""]
    lines += table(("field", "what it holds"),
                   [(code(f), (f"`{name}.{version}`: " if f == "metric" else "") + SIGNATURE_TEXT[f])
                    for f in SIGNATURE_FIELDS])
    sections = signed_sections(reg, metric)
    own = [s for s in sections if s not in reg.run_sections]
    lines += ["", "The settings digest covers the sections "
              + ", ".join(code(s) for s in sections)
              + f": the run's own ({', '.join(code(s) for s in reg.run_sections)}; `data` names its files by their "
              "sha256, not their paths)"
              + (f" and {', '.join(code(s) for s in own)} (`signature_sections()`)" if own else
                 ", and no section of the metric's own")
              + f". Fields named {', '.join(code(f) for f in reg.placement_fields)} are left out: they say where a "
              "step runs, not what it computes."]
    return lines


def _options(reg: Registry, metric: Any) -> list[str]:
    metrics = reg.metrics
    lines = ["## Options", ""]
    if metric.section is None:
        return lines + [f"None of its own: `{metric.name}` reads the run's sections "
                        f"({', '.join(code(s) for s in reg.run_sections)}; `larev run --help`)."]
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


def _enable_flag(metrics: Sequence[Any], metric: Any) -> str:
    """What `larev run` needs to train `metric` when it is off by default ('' when it is on)."""
    owner = _section_owner(metrics, metric.section) if metric.section else None
    if owner is None or owner.options.model_fields.get("enabled") is None:
        return ""
    if owner.options.model_fields["enabled"].default:
        return ""
    on = [o.flag for o in owner.cli_options if o.field == "enabled" and o.is_switch and o.const is True]
    return f" {on[0]}" if on else f" --set {metric.section}.enabled=true"


def _reproduce(metrics: Sequence[Any], metric: Any, name: str, text: CardText | None) -> list[str]:
    on = _enable_flag(metrics, metric)
    bench = ESNLI_BENCH.format(metrics=(text.bench_metrics if text and text.bench_metrics else name), name=name)
    commands = [(DATA_COMMAND, ""),
                (f"larev run{on}", "the demo data (NLI): runs/demo-nli/"),
                (f"larev run{on} --task nli --train train.parquet --test test.jsonl --run-name mine", ""),
                ("larev score --run runs/demo-nli --rationales my_model.jsonl --name my-model", "your rationales"),
                ("larev show runs/demo-nli --report", "the scores, each with its signature"),
                (bench, ""),
                *(text.reproduce if text else ()),
                (f"larev show --metric {name}", "this card")]
    lines = [f"{c}  # {comment}" if comment else c for c, comment in commands]
    return ["## Reproduce", "", "```bash", *lines, "```"]


def build_card(reg: Registry, name: str) -> str:
    """The Markdown card of score name `name` (module docstring): its text (larev/cards/texts/NAME.toml, its figures
    read from the committed results), the rest from its Metric."""
    metrics = reg.metrics
    metric = _owner(metrics, name)
    text = reg.text(name)
    title = text.title if text else metric.description or name
    lines = [f"# `{name}`: {title}", "",
             f"_Generated from the metric's declarations, its text in larev/cards/texts/{name}.toml and the committed "
             f"results by `{WRITE_COMMAND}`; tests/test_cards.py fails when this file differs. Edit those, not this "
             "file._", ""]
    if text is None:
        lines += [f"No card text yet: add larev/cards/texts/{name}.toml.", ""]
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
        lines += ["## Validated on", "", *[part for line in validity_lines(name, reg.docs) for part in (line, "")]]
        if text.validated:
            lines += [EARLIER_LINE, "", *[f"- {v}" for v in text.validated], ""]
        lines += ["## Known failure modes", ""] + [f"- {f}" for f in text.failures] + [""]
    lines += _signature(reg, metric, name) + [""]
    lines += _options(reg, metric) + [""]
    lines += _reproduce(metrics, metric, name, text)
    return render_figures("\n".join(lines) + "\n", reg.docs)


def build_index(reg: Registry) -> str:
    """docs/metrics/README.md: one line per card."""
    lines = ["# Metric cards", "",
             "One card per metric score name, as Hugging Face `evaluate` keeps one beside each metric: the formula "
             "with its paper's equation, how to read a score, what it was measured on, how it fails, its signature, "
             "its options and the commands that reproduce it. `larev show --metric NAME` prints one.", "",
             f"_Generated from the registry (flows/metrics.py) and larev/cards/texts/ by `{WRITE_COMMAND}`; "
             "tests/test_cards.py fails when a file here differs._", ""]
    for name in card_names(reg.metrics):
        text = reg.text(name)
        what = f"{text.title}: `{text.formula}`" if text else "no card text yet"
        lines.append(f"- [`{name}`]({name}.md): {what}")
    return "\n".join(lines) + "\n"


def build_cards(reg: Registry) -> dict[str, str]:
    """{file name: Markdown} of every card and the index, as docs/metrics/ must hold them."""
    return {**{f"{name}.md": build_card(reg, name) for name in card_names(reg.metrics)}, INDEX: build_index(reg)}


def write_cards(reg: Registry, directory: str | Path) -> list[str]:
    """Write `build_cards(reg)` into `directory`; the names of the files whose content changed."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, text in build_cards(reg).items():
        path = out / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(name)
    return changed


def metric_card(reg: Registry, name: str) -> str:
    """The card of `name` (a score name, any case); a ConfigError naming the known ones for an unknown name."""
    return build_card(reg, name.strip().lower())
