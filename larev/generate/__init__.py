"""Rationales generated for a run's test split, one source per generator (`larev generate`; thesis section 5.4.5).

prompt.py    the thesis's appendix C.3 prompt (QA: question and answer; NLI: premise, hypothesis and answer)
config.py    one typed config per generator kind, the `--generators` specs, the default set in its expected order
defects.py   the known-defect generators: label-only, hypothesis-copy and the shuffled training pairs
trained.py   the generators trained here: the embedded T5 mapping (label, input) to the gold rationale, at graded
             budgets of the training rows
clients.py   the model-backed generators (Gemini, a Hugging Face seq2seq or causal model) over the C.3 prompt
table.py     generated texts as rows of the canonical rationale table, and the file they are written to
"""
