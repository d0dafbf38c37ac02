"""The inbox ledger by hand: what counts as new, one record per (file, content), safe output names."""

from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
import pytest

from larev.service.inbox import (InboxFile, empty_ledger, inbox_label, ledger_entry, matches, new_files, output_name, record,
                         results_rows, scan_report)

A, B = InboxFile("a.jsonl", "1" * 64), InboxFile("b.csv", "2" * 64)
NOW = datetime(2026, 11, 22, 8, 0, tzinfo=timezone.utc)


def test_new_files_are_those_the_ledger_has_not_seen_by_name_and_content():
    ledger = record(empty_ledger(), ledger_entry(A, "scored", rows=3, output="runs/x", now=NOW))
    assert new_files([B, A], ledger) == [B]
    edited = InboxFile("a.jsonl", "3" * 64)  # same name, new content: new
    assert new_files([A, edited], ledger) == [edited]
    assert ledger.row(0, named=True) == {"file": "a.jsonl", "sha256": "1" * 64, "status": "scored",
                                         "handled_at": "2026-11-22T08:00:00+00:00", "rows": 3,
                                         "output": "runs/x", "error": None}


def test_a_file_is_recorded_once_and_statuses_are_checked():
    ledger = record(empty_ledger(), ledger_entry(A, "quarantined", error="row 3: bad"))
    with pytest.raises(ValueError, match="already records a.jsonl"):
        record(ledger, ledger_entry(A, "scored"))
    with pytest.raises(ValueError, match="status must be one of"):
        ledger_entry(B, "done")


@pytest.mark.parametrize("name, expected", [("m.parquet", True), ("m.jsonl", True), ("m.csv", True),
                                            ("m.txt", False), (".m.csv", False), ("m.csv.tmp", False),
                                            ("~m.csv", False)])
def test_patterns_skip_hidden_and_temporary_files(name, expected):
    assert matches(name) is expected


def test_output_names_are_safe_and_unique_per_content():
    assert output_name(InboxFile("my model (v2).jsonl", "abcdef0123" + "0" * 54)) == "inbox-my-model-v2-abcdef01"
    assert output_name(InboxFile("...csv", "f" * 64)) == "inbox-file-ffffffff"


def test_results_rows_and_report():
    summary = pl.DataFrame({"metric": ["rev"], "source": ["m"], "score": [0.25], "n": [4]})
    rows = results_rows(summary, A, "t0")
    assert rows.columns == ["file", "sha256", "scored_at", "metric", "source", "score", "n"]
    handled = pl.concat([ledger_entry(A, "scored", rows=4, output="runs/x/inbox-a"),
                         ledger_entry(B, "quarantined", output="inbox/quarantine/b.csv",
                                      error="b.csv: row 2, column 'id': unknown id\nmore")])
    text = scan_report("inbox", handled, rows, {"c.csv": "OSError: gone"})
    assert "| a.jsonl | rev | m | 0.2500 | 4 |" in text
    assert "| b.csv | inbox/quarantine/b.csv | b.csv: row 2, column 'id': unknown id |" in text
    assert "- c.csv: OSError: gone" in text
    assert "No new rationale files." in scan_report("inbox", empty_ledger(), None, {})


def test_the_report_says_which_files_wait_and_why():
    text = scan_report("inbox", empty_ledger(), None, {}, waiting={"late.jsonl": 4.2}, settle_seconds=30)
    assert "No new rationale files ready" in text
    assert "## Held back (changed less than 30 s ago; scored on the next scan)" in text
    assert "- late.jsonl: changed 4 s ago" in text
    assert "Held back" not in scan_report("inbox", empty_ledger(), None, {})


def test_inbox_labels_differ_for_inboxes_with_the_same_folder_name():
    labels = {inbox_label(x) for x in ("a/inbox", "b/inbox", "s3://bucket/inbox", "s3://bucket/inbox/")}
    assert len(labels) == 3  # the trailing slash names the same place
    assert all(label.startswith("inbox-") for label in labels)


def test_the_scan_holds_back_files_that_are_still_changing(tmp_path):
    import os
    import time

    from tasks.inbox import scan_inbox

    (tmp_path / "old.jsonl").write_text("{}\n")
    (tmp_path / "new.jsonl").write_text("{}\n")
    os.utime(tmp_path / "old.jsonl", (time.time() - 120, time.time() - 120))
    found, waiting = scan_inbox.fn(str(tmp_path), ["*.jsonl"], 30.0)
    assert [f.name for f in found] == ["old.jsonl"] and list(waiting) == ["new.jsonl"]
    assert 0 <= waiting["new.jsonl"] < 30
