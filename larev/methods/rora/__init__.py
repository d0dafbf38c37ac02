"""RORA (Jiang et al. 2024): leakage-robust rationale evaluation.

  3.1  leaky spans of the training rationales         larev/leakage/ (rationale_model.py, spans.py, probe.py)
  3.2  counterfactual rationales r^e for every label  infill.py, environments.py
  3.3  Phi: IRMv1 over the environments {D^e} (eq. 8)  LAREV's IRM loop (methods/leakage_aware/training.py) with
       probe weight 0 and the penalty on the label-set-normalised log-probability (irm_on='label_set')
       theta: log p(y | x) with no rationale (eq. 9)   the shared evaluator training loop (larev/models/train.py)
       score: log p_Phi(y | x, r) - log p_theta(y | x) (eq. 10)   larev/metrics/rora.py

Which rationales the models learn from. RORA's evaluator reads rationales from the distribution it is trained on
(eq. 10's note: the test set has the training set's rationale distribution), so `train_on='each_source'` (the
paper's protocol, default) trains the rationale-only model, the infiller and Phi once per rationale source that
has training rationales: the built-in variants, which larev can build for the training split too. Sources with
test rationales only (a user's model outputs) are scored with the models trained on the gold rationales.
`train_on='gold'` trains once on the gold rationales and scores every source with them (cheaper).
"""
