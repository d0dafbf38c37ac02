"""What LAREV and RORA both use to find label leakage: attributions, leaky spans, the residual-leakage probe.

  attribution.py      Integrated Gradients over a seq2seq evaluator's encoder input (LAREV: phi_base on b)
  rationale_model.py  the rationale-only model and IG over it (RORA 3.1's Phi_small; LAS's leakage indicator)
  spans.py            global word attribution -> leaky words -> leaky spans of each text (threshold and span rule)
  text.py             span arithmetic on strings: merge, replace, mask (no torch)
  probe.py            residual leakage: a fresh probe on the masked texts
"""
