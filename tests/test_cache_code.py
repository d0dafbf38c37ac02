"""A step's code version is the source of what it really runs: its module and every project module that module
imports, transitively (tasks/runtime/source_graph.py). Planted packages on tmp dirs, then the real tree."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import importlib

import pytest

from storage import ArtifactStore
from tasks.runtime import cache_audit, source_graph
from tasks.runtime.runner import StepRunner
from tasks.runtime.source_graph import SourceGraph, step_code

ROOT = Path(__file__).resolve().parents[1]


def write_package(root: Path, files: dict[str, str], name: str = "plant") -> Path:
    """A package `name` under root: {relative path: source}."""
    pkg = root / name
    for rel, source in {"__init__.py": "", **files}.items():
        path = pkg / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    return pkg


PLANTED = {
    # step_a -> middle (module level) -> helpers.deep (imported inside a function): two imports below step_a
    "step_a.py": "from plant import middle\n\ndef run():\n    return middle.go()\n",
    "middle.py": "def go():\n    from plant.helpers.deep import value\n    return value()\n",
    "helpers/__init__.py": "",
    "helpers/deep.py": "def value():\n    return 1\n",
    "step_b.py": "from .unrelated import other\n",  # a relative import
    "unrelated.py": "def other():\n    return 2\n",
}


def test_the_closure_follows_imports_inside_functions_and_relative_ones(tmp_path):
    graph = SourceGraph({"plant": write_package(tmp_path, PLANTED)})
    assert graph.closure("plant.step_a") == ["plant", "plant.helpers", "plant.helpers.deep", "plant.middle",
                                             "plant.step_a"]
    assert graph.closure("plant.step_b") == ["plant", "plant.step_b", "plant.unrelated"]


def test_a_change_two_imports_below_changes_that_step_only(tmp_path):
    pkg = write_package(tmp_path, PLANTED)
    before = {s: SourceGraph({"plant": pkg}).step_code(f"plant.{s}", "0.1.0") for s in ("step_a", "step_b")}
    (pkg / "helpers" / "deep.py").write_text("def value():\n    return 3  # changed\n")
    after = {s: SourceGraph({"plant": pkg}).step_code(f"plant.{s}", "0.1.0") for s in ("step_a", "step_b")}
    assert after["step_a"].version != before["step_a"].version
    assert after["step_b"].version == before["step_b"].version
    changed = {m for m in after["step_a"].modules if after["step_a"].modules[m] != before["step_a"].modules[m]}
    assert changed == {"plant.helpers.deep"}


def test_larev_version_is_part_of_the_code_version(tmp_path):
    graph = SourceGraph({"plant": write_package(tmp_path, PLANTED)})
    assert graph.step_code("plant.step_b", "0.1.0").version != graph.step_code("plant.step_b", "0.2.0").version


def test_the_version_does_not_depend_on_where_the_checkout_is(tmp_path):
    first = write_package(tmp_path / "one", PLANTED)
    second = tmp_path / "elsewhere" / "deeper" / "plant"
    shutil.copytree(first, second)
    assert (SourceGraph({"plant": first}).step_code("plant.step_a", "0.1.0")
            == SourceGraph({"plant": second}).step_code("plant.step_a", "0.1.0"))


def test_the_version_is_the_same_in_another_process():
    here = step_code("tasks.rora").version
    code = "from tasks.runtime.source_graph import step_code; print(step_code('tasks.rora').version)"
    there = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.strip()
    assert here == there


def test_a_real_step_covers_the_helpers_it_calls():
    """The step that motivated this: leaky-spans calls larev.formats.task_inputs and larev.schema.label_sets, which
    its hand-kept module list left out."""
    modules = step_code("tasks.rora").modules
    assert {"larev.formats", "larev.schema", "larev.leakage.spans", "tasks.rora"} <= set(modules)
    # and not what it does not import: the CLI and the flows
    assert not any(m.startswith("flows") for m in modules)


def test_no_step_keeps_a_hand_written_module_list():
    """`larev_task` takes no `code=` list any more: every step's code is found from its imports."""
    import inspect

    from tasks.runtime.cache import larev_task

    assert "code" not in inspect.signature(larev_task).parameters
    for path in (ROOT / "tasks").rglob("*.py"):
        assert "code=(" not in path.read_text(), f"{path.name} still lists modules by hand"


def test_a_module_outside_the_roots_is_an_error(tmp_path):
    graph = SourceGraph({"plant": write_package(tmp_path, PLANTED)})
    with pytest.raises(ModuleNotFoundError, match="plant.missing"):
        graph.closure("plant.missing")


# ------------------------------------------------------------------------ real steps, a real store, Prefect's cache

PLANTED_STEPS = {
    # two larev steps in modules of their own: step_a reaches helpers.deep through middle, step_b does not
    "step_a.py": """
        from storage import ArtifactStore
        from tasks.runtime.cache import larev_task


        @larev_task("planted-a")
        def step_a(store: ArtifactStore, x: int) -> int:
            from plantcache.middle import go
            return go() + x
        """,
    "step_b.py": """
        from storage import ArtifactStore
        from tasks.runtime.cache import larev_task


        @larev_task("planted-b")
        def step_b(store: ArtifactStore, x: int) -> int:
            from plantcache.unrelated import other
            return other() + x
        """,
    "middle.py": "def go():\n    from plantcache.helpers.deep import value\n    return value()\n",
    "helpers/__init__.py": "",
    "helpers/deep.py": "def value():\n    return 1\n",
    "unrelated.py": "def other():\n    return 2\n",
}


def import_planted(tmp_path, monkeypatch, files: dict[str, str], name: str, *functions: str):
    """Write package `name`, make it importable, and return (its folder, a store, the functions `module.attr`)."""
    pkg = write_package(tmp_path, files, name=name)
    monkeypatch.syspath_prepend(str(tmp_path))
    found = [getattr(importlib.import_module(f"{name}.{f.split('.')[0]}"), f.split(".")[1]) for f in functions]
    return pkg, ArtifactStore(tmp_path / "store"), found


def test_a_planted_change_reruns_exactly_the_steps_that_use_it(tmp_path, prefect_harness, monkeypatch, capsys):
    pkg, store, (step_a, step_b) = import_planted(tmp_path, monkeypatch, PLANTED_STEPS, "plantcache",
                                                  "step_a.step_a", "step_b.step_b")

    def run_both() -> tuple[dict[str, bool], tuple[int, int]]:
        with StepRunner(store, progress=False) as runner:
            values = runner.run(step_a, 1), runner.run(step_b, 1)
        return {r.step: r.cached for r in runner.records}, values

    assert run_both() == ({"planted-a": False, "planted-b": False}, (2, 3))
    assert run_both() == ({"planted-a": True, "planted-b": True}, (2, 3))
    assert {s.status for s in cache_audit.verify(store)} == {"current"}

    (pkg / "helpers" / "deep.py").write_text("def value():\n    return 10\n")  # two imports below step_a
    source_graph.forget()  # what a new process (an upgraded larev) does: read the sources again
    importlib.reload(importlib.import_module("plantcache.helpers.deep"))
    assert run_both() == ({"planted-a": False, "planted-b": True}, (11, 3))

    statuses = {(s.step, s.status): s for s in cache_audit.verify(store)}
    assert set(statuses) == {("planted-a", "current"), ("planted-a", "stale"), ("planted-b", "current")}
    from flows.cli import main

    assert main(["cache", "verify", "--store", str(store.root)]) == 0  # what a user runs
    printed = capsys.readouterr().out
    assert "3 cached step entries" in printed and "planted-a" in printed and "plantcache.helpers.deep" in printed
    assert statuses[("planted-a", "stale")].changed_modules == ["plantcache.helpers.deep"]
    gone = cache_audit.prune(store, list(statuses.values()))
    assert gone["entries"] == 1
    assert sorted(s.status for s in cache_audit.verify(store)) == ["current", "current"]
    assert run_both() == ({"planted-a": True, "planted-b": True}, (11, 3))  # pruning kept what today's code reads


PLANTED_CHAIN = {
    # a step writing a table whose content comes from a helper, and a step reading that table
    "writer.py": """
        import polars as pl

        from storage import ArtifactStore
        from storage.ref import ArtifactRef
        from tasks.runtime.cache import larev_task
        from tasks.runtime.outputs import put_table


        @larev_task("planted-writer")
        def write(store: ArtifactStore) -> ArtifactRef:
            from plantchain.helper import value
            return put_table(store, "t.parquet", pl.DataFrame({"v": [value()]}))
        """,
    "reader.py": """
        from storage import ArtifactStore
        from storage.ref import ArtifactRef
        from tasks.runtime.cache import larev_task


        @larev_task("planted-reader")
        def read(store: ArtifactStore, table: ArtifactRef) -> int:
            return int(store.read_parquet(table.key)["v"][0])
        """,
    "helper.py": "def value():\n    return 1\n",
}


def test_an_entry_reading_a_stale_steps_output_is_upstream_stale(tmp_path, prefect_harness, monkeypatch):
    """The reader's own code is unchanged, but it read what a stale step wrote: verify says so, prune keeps it."""
    pkg, store, (write, read) = import_planted(tmp_path, monkeypatch, PLANTED_CHAIN, "plantchain",
                                               "writer.write", "reader.read")

    def chain() -> tuple[dict[str, bool], int]:
        with StepRunner(store, progress=False) as runner:
            value = runner.run(read, runner.run(write))
        return {r.step: r.cached for r in runner.records}, value

    assert chain() == ({"planted-writer": False, "planted-reader": False}, 1)
    (pkg / "helper.py").write_text("def value():\n    return 5\n")
    source_graph.forget()
    statuses = {s.step: s for s in cache_audit.verify(store)}
    assert statuses["planted-writer"].status == "stale"
    assert statuses["planted-reader"].status == "upstream-stale"
    assert "planted-writer" in statuses["planted-reader"].why
    importlib.reload(importlib.import_module("plantchain.helper"))
    assert chain() == ({"planted-writer": False, "planted-reader": False}, 5)  # the rerun wrote another table
    counts = sorted(s.status for s in cache_audit.verify(store))
    assert counts == ["current", "current", "stale", "upstream-stale"]
    assert cache_audit.prune(store, cache_audit.verify(store))["entries"] == 1  # only the stale one goes
    assert chain() == ({"planted-writer": True, "planted-reader": True}, 5)
    # an entry without its step record (a store written before larev kept them) is unverifiable, named by its folder
    writer = next(s for s in cache_audit.verify(store) if s.step == "planted-writer")
    assert store.delete(f"_prefect/steps/{writer.key}.json")
    unknown = next(s for s in cache_audit.verify(store) if s.key == writer.key)
    assert (unknown.status, unknown.step) == ("unverifiable", "planted-writer")
    summary = cache_audit.summary(store, cache_audit.verify(store))
    assert "2 current, 0 upstream-stale, 0 stale, 1 unverifiable" in summary  # both readers are current again


def test_a_step_record_naming_a_module_is_read_not_imported(tmp_path, monkeypatch):
    """verify reads today's code of the function a step record names from its source: a planted record cannot make
    it import (run) a module, and a function the source no longer defines makes the entry stale."""
    import sys

    from tasks.runtime.cache import step_fingerprint

    write_package(tmp_path, {"boom.py": "raise SystemExit('imported!')\n\ndef step():\n    pass\n"},
                  name="plantboom")
    monkeypatch.syspath_prepend(str(tmp_path))
    args = {"x": 1}
    record = {"step": "s", "task": "plantboom.boom:step", "code": "old", "args": args, "modules": {}}
    status = cache_audit.check_entry(step_fingerprint("s", "old", args), record)
    assert status.status == "stale" and "+plantboom.boom" in status.changed_modules
    assert "plantboom.boom" not in sys.modules
    gone = cache_audit.check_entry(step_fingerprint("s", "old", args), {**record, "task": "plantboom.boom:nothing"})
    assert gone.status == "stale" and "no longer exists" in gone.why
