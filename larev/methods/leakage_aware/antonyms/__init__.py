"""Antonym rewrites of a baseline's leakage term: the E3 ("antonym") IRM environment of LAREV.

Thesis section 4.5.2 (table 4.2) builds three environments per training example from the baseline b and its
leakage term t_leak (found by Integrated Gradients): E1 keeps b, E2 masks t_leak and E3 reverses its polarity
while "keeping the surrounding context unchanged", e.g. "... at a crossroads implies that ..." becomes
"... at a crossroads denies that ...". Section 5.3.2 and appendix C.2 produce E3 with gemini-2.5-flash-lite;
this package also has offline backends, so the pipeline runs without an API key.

Every backend takes an `AntonymRequest` (b, the term's char span and the row's task context) and returns
`Rewritten(text=<the whole rewritten b>, backend=...)`, or None when it has no rewrite:

  RelationLexicon   NLI relation phrasings (template and paraphrases) -> a wrong-relation phrasing   'lexicon'
  DistractorChoice  QA: the answer (or the term inside it) -> another answer choice                  'distractor'
  WordNetAntonyms   WordNet 3.0 antonym pointers read from the database files                        'wordnet'
  GeminiAntonyms    the appendix C.2 prompt to a TextGenerator, replies validated                    'llm:<model>'

`AntonymChain` tries its backends in order and falls back to the masked text with backend 'fallback:mask'
(environments.py then gives the row no E3 rather than a copy of E2), so every row records where its E3 came
from. Every accepted rewrite differs from b only inside the term's span (the chain checks this for every
backend). `AntonymConfig.backend` picks the chain:
offline = lexicon -> distractor -> wordnet -> mask; llm = llm -> lexicon -> distractor -> wordnet -> mask.
"""

from larev.methods.leakage_aware.antonyms.chain import AntonymChain, AntonymConfig, build_chain, make_generator
from larev.methods.leakage_aware.antonyms.distractor import DistractorChoice
from larev.methods.leakage_aware.antonyms.lexicon import RELATIONS, Relation, RelationLexicon, RelationMatch
from larev.methods.leakage_aware.antonyms.llm import ANTONYM_PROMPT, GeminiAntonyms, accept_rewrite
from larev.methods.leakage_aware.antonyms.request import MASK_FALLBACK, AntonymBackend, AntonymRequest, masked_baseline
from larev.methods.leakage_aware.antonyms.wordnet import WordNetAntonyms, inflect

__all__ = ["ANTONYM_PROMPT", "MASK_FALLBACK", "RELATIONS", "AntonymBackend", "AntonymChain", "AntonymConfig",
           "AntonymRequest", "DistractorChoice", "GeminiAntonyms", "Relation", "RelationLexicon", "RelationMatch",
           "WordNetAntonyms", "accept_rewrite", "build_chain", "inflect", "make_generator", "masked_baseline"]
