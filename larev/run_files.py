"""The files of a finished run directory that more than one layer reads by name (tasks/export.py writes them)."""

from __future__ import annotations

#: The run's record: its parameters, the artifact store and every artifact it used.
RUN_FILE = "run.json"
#: The run's test split, in the order the test file gave it: what a user's rationale file answers.
TEST_SPLIT_FILE = "test_split.jsonl"
#: The columns of TEST_SPLIT_FILE (those the task has).
TEST_SPLIT_COLUMNS = ("id", "task", "premise", "hypothesis", "question", "choices", "label", "rationale")
