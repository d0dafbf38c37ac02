"""The version says which score definitions computed a score: it moves with them, and the changelog with it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import larev
from flows.definitions import definitions_digest, score_definitions

REPO = Path(__file__).resolve().parents[1]


def newest_section(changelog: str) -> tuple[str, str]:
    """(version, the digest it names) of CHANGELOG.md's newest section."""
    match = re.search(r"^## (\d+\.\d+\.\d+)\n\nScore definitions: `([0-9a-f]{16})`", changelog, flags=re.MULTILINE)
    assert match, "CHANGELOG.md's newest section must open with `Score definitions: `DIGEST``"
    return match.group(1), match.group(2)


def test_the_package_and_the_core_say_the_same_version():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["version"] == larev.__version__


def test_the_score_definitions_are_the_newest_changelog_sections():
    """A change to a metric's formula version, a default, a preset or a named backbone changes the digest: then
    the version must move and CHANGELOG.md get a section naming the new digest."""
    version, digest = newest_section((REPO / "CHANGELOG.md").read_text())
    now = definitions_digest()
    assert version == larev.__version__, (f"CHANGELOG.md's newest section is {version}, the package is "
                                          f"{larev.__version__}: add a section for it")
    assert digest == now, (f"the score definitions changed (digest {now}, CHANGELOG.md's {version} says {digest}): "
                           "move the version in pyproject.toml and larev/__init__.py and add a CHANGELOG.md section "
                           f"naming `{now}`")


def test_the_digest_moves_with_a_default_a_formula_version_or_a_preset(monkeypatch):
    """Planted changes each move the digest: a metric's definition version, a field's default, a preset's value."""
    from flows.metrics import METRICS
    from larev import presets
    from larev.config import TrainConfig

    before = definitions_digest()
    rev = next(m for m in METRICS if m.name == "rev")
    monkeypatch.setattr(type(rev), "definition_version", "v2")
    assert definitions_digest() != before
    monkeypatch.undo()
    assert definitions_digest() == before
    field = TrainConfig.model_fields["batch_size"]
    monkeypatch.setattr(field, "default", 64)
    TrainConfig.model_rebuild(force=True)
    try:
        assert score_definitions()["defaults"]["embedded/nli/real"]["train"]["batch_size"] == 64
        assert definitions_digest() != before
    finally:
        monkeypatch.undo()
        TrainConfig.model_rebuild(force=True)
    original = presets.load_presets()
    changed = tuple(p if p.name != "embedded-learning-rate" else
                    type(p)(**{**p.__dict__, "settings": {"train.learning_rate": 2e-3}}) for p in original)
    monkeypatch.setattr(presets, "load_presets", lambda path=presets.PRESETS_FILE: changed)
    assert definitions_digest() != before
