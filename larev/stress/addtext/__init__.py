"""AddText stress test of the rationale metrics (Chen et al., "Can Rationalization Improve Robustness?",
section 4.1): add label-preserving text to rationales and measure how each metric's scores move.

  config.py    AddTextConfig: kinds (rand, wiki, adv), positions (start, end, random), seed, ...
  words.py     tokens, stable per-row seeds, the banned label-signal words, the task vocabulary
  corpus.py    AddText-Wiki sentences: the generated offline default corpus, or a user file
  adv.py       AddText-Adv: the query with its noun phrases swapped (overlaps lexically, keeps the label)
  insert.py    splicing the text in at the start, the end or a seeded gap between words
  perturb.py   AddTextPerturber (one rationale), perturb_rationales (a rationale file), as_rationale_file
  shift.py     score_shift_table: score shift perturbed - original per metric x kind x position

Pure: polars and the standard library only (no Prefect, no model).
"""

from larev.stress.addtext.adv import AdvLexicon, adv_text
from larev.stress.addtext.config import KINDS, AddTextConfig
from larev.stress.addtext.corpus import default_wiki_corpus, load_corpus
from larev.stress.addtext.insert import POSITIONS, Insertion, insert_text
from larev.stress.addtext.perturb import (PERTURBED_SCHEMA, AddTextPerturber, Perturbation, addtext_source,
                                   as_rationale_file, perturb_rationales, rand_text, wiki_text)
from larev.stress.addtext.shift import SHIFT_SCHEMA, parse_addtext_sources, score_shift_table
from larev.stress.addtext.words import BANNED, lexical_overlap, stable_seed

__all__ = [
    "BANNED", "KINDS", "PERTURBED_SCHEMA", "POSITIONS", "SHIFT_SCHEMA", "AddTextConfig", "AddTextPerturber",
    "AdvLexicon", "Insertion", "Perturbation", "addtext_source", "adv_text", "as_rationale_file",
    "default_wiki_corpus", "insert_text", "lexical_overlap", "load_corpus", "parse_addtext_sources",
    "perturb_rationales", "rand_text", "score_shift_table", "stable_seed", "wiki_text",
]
