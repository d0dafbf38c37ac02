"""The metrics both flows train and score, in order: wiring as data.

A metric may read models an earlier one trained (LAREV reads REV's phi_base and phi; RQ / LAS read RORA's theta,
training rationales and rationale-only models). Adding a metric is one entry here (CONTRIBUTING.md).
"""

from __future__ import annotations

from tasks.accuracy import Accuracy
from tasks.leakage_aware import LeakageAware
from tasks.metric import Metric
from tasks.rev import Rev
from tasks.rora import Rora

METRICS: list[Metric] = [Rev(), LeakageAware(), Rora(), Accuracy()]
