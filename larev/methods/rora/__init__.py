"""RORA (Jiang et al. 2024): leakage-robust rationale evaluation.

  3.1  leaky spans of the training rationales         larev/leakage/ (rationale_model.py, spans.py, probe.py)
  3.2  counterfactual rationales r^e for every label  infill.py, environments.py
  3.3  Phi: IRMv1 over the environments {D^e} (eq. 8)  LAREV's IRM loop (methods/leakage_aware/training.py) with
       probe weight 0 and the penalty on the label-set-normalised log-probability (irm_on='label_set')
       theta: log p(y | x) with no rationale (eq. 9)   the shared evaluator training loop (larev/models/train.py)
       score: log p_Phi(y | x, r) - log p_theta(y | x) (eq. 10)   larev/metrics/rora.py

Which rationales the models learn from. `train_on='gold'` (default) trains the rationale-only model, the
infiller and Phi once, on the gold training rationales, and scores every source with them: a model's own
rationales (a user file) have no training split anyway, and it is a quarter of the work. `train_on='each_source'`
is the paper's protocol (eq. 10's note: the test set has the training set's rationale distribution): those models
once per rationale source that has training rationales (the built-in variants, which larev builds for the
training split too); sources with test rationales only are scored with gold's models. RQ and LAS train their
proxy on each source's rationales either way (their definition). The two compared: docs/defaults.md#rora.
"""
