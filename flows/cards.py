"""The metric cards of the registered metrics (docs/metrics/): larev/cards/render.py builds them from what it is
given here, the registry (flows/metrics.py), the run's sections, and the docs directory whose committed results
the cards quote."""

from __future__ import annotations

from pathlib import Path

#: the repository's docs directory (its committed results), wherever larev is run from
ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def registry(docs: str | Path = DOCS):
    """The cards' `Registry`: the registered metrics and the pipeline's run sections and placement fields."""
    from flows.metrics import METRICS
    from larev.cards.render import Registry
    from tasks.metric import PLACEMENT_FIELDS, RUN_SECTIONS

    return Registry(metrics=METRICS, run_sections=RUN_SECTIONS, placement_fields=PLACEMENT_FIELDS, docs=Path(docs))


def write_cards(directory: str | Path, docs: str | Path = DOCS) -> list[str]:
    """Rewrite the cards in `directory`; the files whose content changed."""
    from larev.cards.render import write_cards as write

    return write(registry(docs), directory)


def metric_card(name: str, docs: str | Path = DOCS) -> str:
    from larev.cards.render import metric_card as card

    return card(registry(docs), name)


#: the pages whose figures are marked with the result they come from (larev/cards/figures.py)
FIGURE_PAGES = ("README.md", "docs/results.md", "docs/validity.md", "docs/defaults.md")


def write_figures(root: str | Path = ROOT, docs: str | Path = DOCS) -> list[str]:
    """Rewrite every marked figure of FIGURE_PAGES (under `root`) from its committed result; the pages changed."""
    from larev.cards.figures import render_marked

    changed = []
    for name in FIGURE_PAGES:
        path = Path(root) / name
        text = path.read_text(encoding="utf-8")
        rendered = render_marked(text, Path(docs))
        if rendered != text:
            path.write_text(rendered, encoding="utf-8")
            changed.append(name)
    return changed
