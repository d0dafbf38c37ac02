"""Perturbations of the gold rationale that no scorer trains on: each a rationale source `perturb_<kind>` scored
beside gold on the same instances, with what a valid scorer gives it in protocols/validity.yaml.

  explanation_2 / _3  the second / third annotator's explanation of the instance (e-SNLI's rationale_2 / _3)
  shuffled            gold's content words shuffled among their own places (function words stay where they are)
  truncated           gold's first half: its first floor(n / 2) words (n >= 2)
  noun_swapped        gold's key word (the longest content word of the premise, QA: question, that gold repeats)
                      swapped everywhere in gold for another instance's key word (else the longest content word of
                      its premise) that this instance's texts lack
  negated             gold's first negation undone ('not', 'no', 'never' dropped, "isn't" -> 'is', 'cannot' ->
                      'can'); a gold without one gets 'not' after its first auxiliary ('is' -> 'is not')
  hypothesis_copied   the hypothesis as r (QA: the question)
  premise_copied      the premise as r (NLI only)
  label_novel         the label stated in words no template of the project uses (NOVEL_LABEL_STATEMENTS)

The shuffle's order follows from `seed` and the instance's id, so it is the same whichever rows are built with it;
noun_swapped's donor is drawn among the rows built together (from `seed` and the id, at an offset from the
instance's position), so it depends on the split. A row a kind cannot be built for (gold too short to cut, no
shared key word, no content word to move) is left out and counted in `skipped`. Punctuation is a word of its own
in e-SNLI's text; where it is attached to a word, it moves with it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from larev.stress.addtext.words import is_content

PREFIX = "perturb_"
NLI_KINDS = ("explanation_2", "explanation_3", "shuffled", "truncated", "noun_swapped", "negated",
             "hypothesis_copied", "premise_copied", "label_novel")
QA_KINDS = ("shuffled", "truncated", "noun_swapped", "negated", "hypothesis_copied", "label_novel")
# The label in words: none of these phrases is in a baseline template, the leaky variant's sentence or the label
# statements phi_LA may train on (a test checks).
NOVEL_LABEL_STATEMENTS = {
    "entailment": "the first sentence backs up the second one",
    "contradiction": "the two sentences clash with each other",
    "neutral": "the first sentence leaves the second one open",
}
NOVEL_QA_STATEMENT = "my pick would be {label}"
AUXILIARIES = ("is", "are", "was", "were", "can", "could", "will", "would", "should", "must", "does", "do", "did",
               "has", "have", "had", "may", "might")
_POSITIVE = {"ca": "can", "wo": "will", "sha": "shall"}  # what "ca n't", "wo n't", "sha n't" undo to
_WORD = re.compile(r"\S+")


@dataclass
class Perturbed:
    """The perturbation rows (id, source, rationale, label) and, per kind, how many instances were left out."""

    rows: pl.DataFrame
    skipped: dict[str, int]


def _rng(seed: int, key: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _core(word: str) -> str:
    """The word without surrounding punctuation, lower-cased."""
    return word.strip(".,;:!?\"'()").lower()


def shuffled(text: str, rng: np.random.Generator) -> str | None:
    """Content words permuted among their own positions (a permutation that moves at least one word); None with
    fewer than two distinct content words."""
    words = text.split()
    places = [i for i, w in enumerate(words) if is_content(_core(w))]
    if len({_core(words[i]) for i in places}) < 2:
        return None
    for _ in range(20):
        order = rng.permutation(len(places))
        moved = [words[places[j]] for j in order]
        if [_core(w) for w in moved] != [_core(words[i]) for i in places]:
            out = list(words)
            for i, w in zip(places, moved, strict=True):
                out[i] = w
            return " ".join(out)
    return None


def truncated(text: str) -> str | None:
    """The first floor(n / 2) words; None below two words."""
    words = text.split()
    return " ".join(words[: len(words) // 2]) if len(words) >= 2 else None


def content_words(text: str) -> list[str]:
    return [c for w in text.split() if is_content(c := _core(w))]


def key_word(text: str, source: str) -> str | None:
    """The longest content word of `source` that `text` repeats (ties: the first in `text`): what an explanation
    of the instance is about, most often a noun of the premise; None when they share none."""
    in_source = set(content_words(source))
    shared = [w for w in content_words(text) if w in in_source]
    return max(shared, key=len) if shared else None  # max keeps the first of equal lengths


def noun_swapped(text: str, source: str, donor_text: str, donor_source: str, context: str) -> str | None:
    """Gold's key word of `source` replaced everywhere in gold by the donor instance's own key word (of its
    rationale and premise), or else the longest content word of the donor's `donor_source`, provided this
    instance's texts (`context`) lack it; None without a key word or a replacement."""
    key = key_word(text, source)
    absent = set(content_words(context))
    donor_key = key_word(donor_text, donor_source)
    candidates = [donor_key] if donor_key and donor_key not in absent else \
        [w for w in content_words(donor_source) if w not in absent]
    if key is None or not candidates:
        return None
    new = max(candidates, key=len)
    return " ".join(w.replace(w.strip(".,;:!?\"'()"), new) if _core(w) == key else w for w in text.split())


def negated(text: str) -> str | None:
    """The first negation undone ('not', 'no', 'never' dropped; "isn't" / "is n't" -> 'is', 'cannot' / "ca n't" ->
    'can', "won't" -> 'will'); else 'not' after the first auxiliary; else None."""
    words = text.split()
    for i, w in enumerate(words):
        core = _core(w)
        if core in ("not", "no", "never"):
            return " ".join(words[:i] + words[i + 1:]) or None
        if core == "n't" and i > 0:  # PTB tokens: "does n't", "ca n't"
            return " ".join([*words[:i - 1], _POSITIVE.get(words[i - 1].lower(), words[i - 1]), *words[i + 1:]])
        if core == "cannot" or core.endswith("n't"):
            base = "can" if core == "cannot" else _POSITIVE.get(core[:-3], core[:-3])
            return " ".join([*words[:i], base, *words[i + 1:]])
    for i, w in enumerate(words):
        if _core(w) in AUXILIARIES:
            return " ".join([*words[: i + 1], "not", *words[i + 1:]])
    return None


def label_statement(label: str, task: str) -> str:
    if task == "nli":
        return NOVEL_LABEL_STATEMENTS[label]
    return NOVEL_QA_STATEMENT.format(label=label)


def perturbations(examples: pl.DataFrame, task: str, *, seed: int = 0, kinds: tuple[str, ...] | None = None
                  ) -> Perturbed:
    """Every perturbation kind of `task` (or `kinds`) for every example with a gold rationale. `examples`: id,
    label, rationale and the task's input columns (premise, hypothesis[, rationale_2, rationale_3] or question)."""
    all_kinds = NLI_KINDS if task == "nli" else QA_KINDS
    kinds = all_kinds if kinds is None else kinds
    unknown = [k for k in kinds if k not in all_kinds]
    if unknown:
        raise ValueError(f"perturbation kind(s) {unknown} are not defined for {task} (its kinds: {all_kinds})")
    source_column = "premise" if task == "nli" else "question"
    copied_column = "hypothesis" if task == "nli" else "question"
    rows = examples.filter(pl.col("rationale").is_not_null() & (pl.col("rationale").str.strip_chars() != ""))
    records = rows.to_dicts()
    out, skipped = [], {k: 0 for k in kinds}
    for n, row in enumerate(records):
        gold, key = row["rationale"].strip(), str(row["id"])
        context = " ".join(str(row.get(c) or "") for c in ("premise", "hypothesis", "question"))
        for kind in kinds:
            if kind.startswith("explanation_"):
                text = row.get(f"rationale_{kind[-1]}")
            elif kind == "shuffled":
                text = shuffled(gold, _rng(seed, f"shuffled:{key}"))
            elif kind == "truncated":
                text = truncated(gold)
            elif kind == "noun_swapped":
                others = len(records) - 1
                donor = records[(n + 1 + int(_rng(seed, f"donor:{key}").integers(others))) % len(records)] \
                    if others else None
                text = noun_swapped(gold, row[source_column], donor["rationale"] or "", donor[source_column],
                                    context) if donor else None
            elif kind == "negated":
                text = negated(gold)
            elif kind == "hypothesis_copied":
                text = row[copied_column]
            elif kind == "premise_copied":
                text = row["premise"]
            else:
                text = label_statement(row["label"], task)
            if text is None or not str(text).strip():
                skipped[kind] += 1
                continue
            out.append({"id": key, "source": PREFIX + kind, "rationale": str(text).strip(), "label": row["label"]})
    schema = {"id": pl.String, "source": pl.String, "rationale": pl.String, "label": pl.String}
    return Perturbed(rows=pl.DataFrame(out, schema=schema), skipped=skipped)
