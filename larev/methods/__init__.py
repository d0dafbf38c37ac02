"""The three rationale metrics, one package each: ``rev`` (REV, conditional V-information),
``leakage_aware`` (LAREV: IG leakage spans, counterfactual environments, IRM-trained evaluators) and
``rora`` (RORA: leakage-masked and infilled rationales, IRM over infill variants).

The score arithmetic all of them share lives in :mod:`larev.metrics`; what LAREV and RORA share
(leakage spans, the residual probe, attribution) lives in :mod:`larev.leakage`; the texts all of their evaluators
read, which the embedded tokenizer is trained on, in :mod:`larev.methods.vocabulary`.
"""
