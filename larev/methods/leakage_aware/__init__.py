"""LAREV (the main method, thesis chapter 4): REV's estimator with phi replaced by a leakage-aware phi_LA.

  environments.py  E1 b / E2 leakage term masked / E3 term replaced by an antonym (environments as data)
  antonyms/        how E3 is built, one module per backend (lexicon, QA distractor, WordNet, LLM) and the chain
  objective.py     eq. 4.9/4.10: ERM + lambda_irm * IRMv1 - lambda_probe * bounded probe loss; the probe psi
  training.py      the IRM training loop (also RORA's Phi, with probe weight 0)
  config.py        LarevConfig, the objective's weights and the ablations
The leakage terms come from Integrated Gradients on phi_base (larev/leakage/attribution.py); the score is REV's
estimator (larev/metrics/rev.py) with phi_LA. docs/methods.md has the method in full.
"""
