"""The validity benchmark's core (`larev bench validity`): the protocol file, perturbations no scorer trains on,
the criteria with intervals over seeds and instances, the results page and the ledger of report-split runs.
Pure Python (polars, numpy, scipy, scikit-learn); flows/validity.py runs the pipeline and feeds it."""
