"""REV (Chen et al., 2023): two evaluators of the same backbone, g = phi_base on the vacuous baseline b and
g' = phi on [r, b]; REV = log g'[r, b](y) - log g[b](y) (eq. 5), averaged over the test set (eq. 6).

  inputs.py   what each evaluator reads (the roles phi_base and phi)
The formula and its estimator are larev/metrics/rev.py; training is the shared loop of larev/models/train.py.
"""
