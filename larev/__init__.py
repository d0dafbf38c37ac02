"""larev: leakage-robust evaluation of free-text rationales.

The pure core: data contract, demo data, baseline rationales, evaluator models, metrics and reports.
Nothing in this package imports Prefect; `tasks/` and `flows/` wrap it.
"""

__version__ = "0.2.0"
