"""Word-level helpers shared by the AddText perturbations: tokens, stable seeds, and the word lists that keep
inserted text free of label signal.

"Label-preserving" (Chen et al., "Can Rationalization Improve Robustness?", section 4.1: an AddText attack
A(x) adds text "without changing the ground truth label y") means, for a free-text rationale, that the
inserted text adds no evidence for or against any label. Every generator therefore avoids `BANNED`:

  * the NLI label names and their inflections (a rationale that says "entailment" leaks the label),
  * negations ("not", "no", "never", "n't", ...): in e-SNLI rationales they are the contradiction /
    neutral cue ("... cannot be ...", "not necessarily ..."),
  * hedges that mark neutral rationales ("necessarily", "probably", "maybe", ...) and the demo data's
    label-correlated cue adverbs (larev/data/demo.py NLI_CUES),
  * words that name an answer outright ("answer", "label", "true", "false").

For QA, each row also avoids the content words of its own answer choices (`row_forbidden`), so inserted text
never points at one of them. All lists here are this module's own.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence

from larev.schema import NLI_LABELS

# ---- tokens ----------------------------------------------------------------------------------------------

# A word: letters with inner apostrophes / hyphens ("don't", "to-go"), or a number ("9", "1,200").
WORD_RE = re.compile(r"[^\W\d_]+(?:['\u2019-][^\W\d_]+)*|\d+(?:[.,]\d+)*")


def words(text: str) -> list[str]:
    """The lower-cased words of a text (punctuation dropped); used for vocabularies and overlap."""
    return [w.lower() for w in WORD_RE.findall(text)]


def lexical_overlap(text: str, reference: str) -> float:
    """Share of `text`'s words (tokens, lower-cased) that also occur in `reference`; 0.0 for a text without
    words. This is how the tests measure AddText-Adv's "significant lexical overlap" (section 4.1)."""
    mine = words(text)
    if not mine:
        return 0.0
    ref = set(words(reference))
    return sum(w in ref for w in mine) / len(mine)


def stable_seed(*parts: object) -> int:
    """A 64-bit seed from the parts' text (sha256): the same on every run, platform and Python version,
    unlike hash() of a str, which is salted per process."""
    blob = "\x1f".join(str(p) for p in parts).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big")


# ---- words that carry label signal ---------------------------------------------------------------------------

LABEL_WORDS = frozenset({
    *NLI_LABELS,
    "entail", "entails", "entailed", "entailing", "entailments",
    "contradict", "contradicts", "contradicted", "contradicting", "contradictions", "contradictory",
    "neutrally", "neutrality",
    "imply", "implies", "implied", "implying", "implication",
    "answer", "answers", "label", "labels", "true", "false",
})
NEGATIONS = frozenset({
    "not", "no", "never", "nor", "none", "nobody", "nothing", "nowhere", "neither", "cannot", "n't", "without",
})
HEDGES = frozenset({
    "necessarily", "probably", "possibly", "possible", "perhaps", "maybe", "may", "might", "unknown", "unclear",
    "uncertain", "indeed", "actually",
})
BANNED = LABEL_WORDS | NEGATIONS | HEDGES


def is_banned(word: str) -> bool:
    """A word that could carry label signal (see the module docstring); 'isn't', "can't" etc. included."""
    w = word.lower().replace("\u2019", "'")
    return w in BANNED or w.endswith("n't")


# ---- function words ----------------------------------------------------------------------------------------

NUMBER_WORDS = frozenset({"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                          "twelve", "twenty", "hundred", "dozen"})
# Words that open a noun phrase (AddText-Adv finds the phrase's nouns after one of these).
DETERMINERS = frozenset({
    "a", "an", "the", "this", "that", "these", "those", "his", "her", "their", "its", "our", "my", "your",
    "some", "several", "many", "few", "each", "every", "another", "both", "all", "any",
}) | NUMBER_WORDS
FUNCTION_WORDS = DETERMINERS | frozenset({
    # pronouns and wh-words
    "i", "me", "you", "he", "him", "she", "it", "we", "us", "they", "them", "himself", "herself", "itself",
    "themselves", "someone", "somebody", "something", "anyone", "anything", "everyone", "everything", "who",
    "whom", "whose", "which", "what", "where", "when", "why", "how", "there", "here",
    # auxiliaries and modals
    "be", "is", "are", "was", "were", "been", "being", "am", "has", "have", "had", "having", "do", "does",
    "did", "will", "would", "shall", "should", "can", "could", "may", "must",
    # prepositions
    "of", "in", "on", "at", "to", "for", "with", "by", "from", "into", "onto", "over", "under", "above", "below",
    "near", "behind", "beside", "between", "among", "through", "across", "around", "about", "after", "before",
    "during", "since", "until", "up", "down", "out", "off", "inside", "outside", "along", "against", "toward",
    "towards", "upon", "within", "beyond", "like", "per", "next",
    # conjunctions and light adverbs
    "and", "or", "but", "so", "yet", "if", "than", "then", "as", "because", "while", "although", "though",
    "whether", "very", "too", "also", "just", "only", "even", "still", "again", "ever", "already", "now",
    "almost", "quite", "rather", "really",
})


def is_content(word: str) -> bool:
    """An alphabetic word that is neither a function word nor banned (a candidate noun / adjective / verb)."""
    w = word.lower()
    return bool(w) and w[0].isalpha() and w not in FUNCTION_WORDS and not is_banned(w)


# ---- vocabularies ------------------------------------------------------------------------------------------

def vocabulary(texts: Iterable[str | None]) -> tuple[str, ...]:
    """The sorted distinct words of some texts minus banned ones: AddText-Rand's "task vocabulary" (section
    4.1), sampled uniformly over types."""
    vocab: set[str] = set()
    for text in texts:
        if text:
            vocab.update(words(text))
    return tuple(sorted(w for w in vocab if not is_banned(w)))


def row_forbidden(task: str | None, choices: Sequence[str] | None, label: str | None) -> frozenset[str]:
    """Words one row's inserted text must avoid beyond `BANNED`: for QA the content words of every answer
    choice (and the label), so the insertion cannot point at a choice; nothing more for NLI."""
    if task != "qa":
        return frozenset()
    texts = [*(choices or ()), label or ""]
    return frozenset(w for t in texts for w in words(t) if w not in FUNCTION_WORDS)
