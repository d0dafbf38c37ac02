"""FTC, Faithfulness-Through-Counterfactuals for NLI explanations ("Logical Satisfiability of Counterfactuals
for Faithful Explanations in NLI"): the pure core, no Prefect.

An explanation z of label y states a relation R(A, B) (table 2); a counterfactual hypothesis x_cf is built by
substituting the spans in x, with the label y_cf logic says it must get (propositions 1-3); FTC compares the task
model's distribution on (premise, x_cf) with y_cf (section 2.3).

  relations.py       Relation, Counterfactual, Extraction, FtcAttempt; table 2's cases and y_cf; reasons
  text.py            explanation normalisation, word tokens and word classes for the rules
  extract.py         RuleExtractor: regex templates per label (appendix tables 15-17)     backend 'rules'
  llm_extract.py     LlmRelationExtractor: few-shot LLM extraction, validated            'llm:<model>' /
                     replies, rules as fallback                                           'fallback:rules'
  counterfactual.py  build_counterfactuals: R(A, B) + x -> x_cf per case, or a reason
  distances.py       ftc_delta, ftc_kl, ftc_wasserstein (and the exact 3x3 wasserstein)
  task_model.py      NliTaskModel; HFSequenceClassifier, EvaluatorTaskModel
  metric.py          ftc_scores: rows -> per-(example, case) table + summary
"""

from larev.stress.ftc.counterfactual import build_counterfactuals, locate
from larev.stress.ftc.distances import (DEFAULT_ALPHA, ftc_delta, ftc_kl, ftc_wasserstein, ground_distance,
                                 kl_divergence, one_hot, wasserstein)
from larev.stress.ftc.extract import RuleExtractor
from larev.stress.ftc.llm_extract import LlmRelationExtractor, build_prompt, parse_reply
from larev.stress.ftc.metric import ftc_scores
from larev.stress.ftc.relations import (Counterfactual, Extraction, FtcAttempt, Relation, RelationExtractor, Y_CF,
                                 cases_for)
from larev.stress.ftc.task_model import EvaluatorTaskModel, HFSequenceClassifier, NliTaskModel, nli_input_text

__all__ = [
    "DEFAULT_ALPHA", "Counterfactual", "EvaluatorTaskModel", "Extraction", "FtcAttempt", "HFSequenceClassifier",
    "LlmRelationExtractor", "NliTaskModel", "Relation", "RelationExtractor", "RuleExtractor", "Y_CF",
    "build_counterfactuals", "build_prompt", "cases_for", "ftc_delta", "ftc_kl", "ftc_scores", "ftc_wasserstein",
    "ground_distance", "kl_divergence", "locate", "nli_input_text", "one_hot", "parse_reply", "wasserstein",
]
