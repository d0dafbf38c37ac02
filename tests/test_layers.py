"""The project's imports are layered and acyclic, read from the source (`ast`, nothing imported).

Layers, bottom to top: `larev` (the pure core), then `storage` and `tasks`, then `flows`, then `benchmarks` (one-off
diagnostics, not installed). The rule enforced:
- a module in larev/ imports no module of tasks/, storage/, flows/ or benchmarks/;
- a module in storage/ imports only larev/ (and storage/): no tasks/, no flows/ (what it does today; the tasks
  read and write artifacts through it);
- a module in tasks/ imports no module of flows/;
- nothing imports benchmarks/;
- nothing outside flows/cli/ imports flows/cli/: the command line sits on top of the flows (it parses and calls
  them), so a flow started from the UI or a schedule runs no command-line code.

Inside the core, its parts (a subpackage larev/<name>/ or a module larev/<name>.py) are layered too (`CORE_LAYERS`,
bottom first): a module imports only parts of its own layer or of a layer below. So larev/config.py imports nothing
of larev/models/, and larev/models/ nothing of larev/methods/. Every part of the core must be in a layer.

Every import counts: at module level, inside functions, under `if TYPE_CHECKING:`; `import a.b`, `from a import b`
(a.b when a/b is a module, else a) and relative imports resolved. A package's `__init__.py` is the module `pkg`.
Imports built from strings at run time (`importlib.import_module(name)`) are not seen.

The modules must also form no import cycle: no strongly connected component of more than one module, no module
importing itself.
"""

from __future__ import annotations

import ast
import shutil
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: The project's packages, bottom layer first.
PACKAGES: tuple[str, ...] = ("larev", "storage", "tasks", "flows", "benchmarks")

#: package -> the other project packages its modules may import.
ALLOWED: dict[str, frozenset[str]] = {
    "larev": frozenset(),
    "storage": frozenset({"larev"}),
    "tasks": frozenset({"larev", "storage"}),
    "flows": frozenset({"larev", "storage", "tasks"}),
    "benchmarks": frozenset({"larev", "storage", "tasks", "flows"}),
}

#: The command line: the top of flows/, imported by no module outside it.
CLI_PACKAGE = "flows.cli"

#: The core's layers, bottom first: (name, the parts of larev/ in it). A part is `larev.<name>` for larev/<name>/ or
#: larev/<name>.py; `larev` is larev/__init__.py. A module imports only parts of its own layer or of layers below.
CORE_LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    # shared configs, errors, the data contract, input formats and small utilities
    ("foundation", frozenset({"larev", "larev.config", "larev.errors", "larev.schema", "larev.formats",
                              "larev.digests", "larev.device", "larev.progress", "larev.stats", "larev.presets",
                              "larev.run_files", "larev.signature", "larev.llm"})),
    # loaders, the data contract's validation, demo data, variants; the baseline rationales b
    ("inputs", frozenset({"larev.data", "larev.baselines"})),
    # the evaluators: backbones, tokenizer, training loop, IRM penalty, checkpoints
    ("models", frozenset({"larev.models"})),
    # what LAREV and RORA share: IG attribution, the rationale-only model, leaky spans, the probe
    ("leakage", frozenset({"larev.leakage"})),
    # the score contract and the scores (REV, RORA, RQ / LAS), bootstrap and intervals
    ("metrics", frozenset({"larev.metrics"})),
    # report tables and figures
    ("reports", frozenset({"larev.reports"})),
    # FTC and AddText
    ("stress", frozenset({"larev.stress"})),
    # REV's, LAREV's and RORA's evaluators and their training
    ("methods", frozenset({"larev.methods"})),
    # what uses the rest: benchmark figures, human agreement, compare, the leaderboard, metric cards, the inbox
    # ledger, the validity benchmark, the rationale generators of `larev generate`
    ("applications", frozenset({"larev.bench", "larev.human", "larev.compare", "larev.leaderboard", "larev.cards",
                                "larev.service", "larev.validity", "larev.generate"})),
)


@dataclass(frozen=True)
class Import:
    """One project import: module `source` imports module `target` at `path`:`line` (`statement` as written)."""

    source: str
    target: str
    path: str
    line: int
    statement: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.statement}  ({self.source} -> {self.target})"


def module_name(relative: Path) -> str:
    """Dotted name of the module at `relative` (a path under the root): `a/b/__init__.py` is `a.b`."""
    parts = list(relative.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _from_base(node: ast.ImportFrom, package: str) -> str | None:
    """The absolute module a `from ... import` names (a relative one resolved against `package`)."""
    if not node.level:
        return node.module
    parts = package.split(".") if package else []
    if node.level - 1 > len(parts):
        return None
    return ".".join([*parts[:len(parts) - (node.level - 1)], *([node.module] if node.module else [])])


def project_imports(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, list[Import]]:
    """Every module of `packages` (directories under `root`) -> the project imports in its source, by line."""
    files = {module_name(path.relative_to(root)): path
             for package in packages if (root / package).is_dir()
             for path in sorted((root / package).rglob("*.py")) if "__pycache__" not in path.parts}

    def existing(dotted: str) -> str | None:
        """The longest prefix of `dotted` that is a project module (`import a.b.c` names module a.b.c)."""
        parts = dotted.split(".")
        for end in range(len(parts), 0, -1):
            if (name := ".".join(parts[:end])) in files:
                return name
        return None

    def targets(node: ast.AST, package: str) -> list[str]:
        """The project modules an import statement imports (none for any other node)."""
        if isinstance(node, ast.Import):
            found = [existing(alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and (base := _from_base(node, package)):
            found = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else existing(base)
                     for alias in node.names]
        else:
            return []
        return list(dict.fromkeys(t for t in found if t is not None))

    graph: dict[str, list[Import]] = {}
    for name, path in files.items():
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: list[Import] = []
        for node in ast.walk(ast.parse(source, filename=str(path))):
            for target in targets(node, package):
                statement = " ".join(" ".join(lines[node.lineno - 1:node.end_lineno]).split())
                found.append(Import(name, target, path.relative_to(root).as_posix(), node.lineno, statement))
        graph[name] = sorted(found, key=lambda i: (i.line, i.target))
    return graph


def layer_violations(graph: dict[str, list[Import]],
                     allowed: dict[str, frozenset[str]] = ALLOWED) -> list[Import]:
    """The imports that reach a package the importing module's package may not import (`allowed`)."""
    bad = []
    for imports in graph.values():
        for imp in imports:
            own, other = imp.source.partition(".")[0], imp.target.partition(".")[0]
            if own != other and own in allowed and other not in allowed[own]:
                bad.append(imp)
    return bad


def cli_imports(graph: dict[str, list[Import]], cli: str = CLI_PACKAGE) -> list[Import]:
    """The imports of the command line (`cli` or a module under it) by a module outside it."""
    def inside(name: str) -> bool:
        return name == cli or name.startswith(cli + ".")

    return [imp for imports in graph.values() for imp in imports if inside(imp.target) and not inside(imp.source)]


def core_part(module: str) -> str:
    """The part of the core a module of larev/ belongs to: `larev.x.y.z` -> `larev.x`; `larev` -> `larev`."""
    return ".".join(module.split(".")[:2])


def unplaced_core_parts(graph: dict[str, list[Import]],
                        layers: tuple[tuple[str, frozenset[str]], ...] = CORE_LAYERS) -> list[str]:
    """The parts of the core (modules of larev/ in `graph`) that no layer names."""
    placed = {part for _, parts in layers for part in parts}
    return sorted({core_part(name) for name in graph if name.partition(".")[0] == "larev"} - placed)


def core_layer_violations(graph: dict[str, list[Import]],
                          layers: tuple[tuple[str, frozenset[str]], ...] = CORE_LAYERS) -> list[tuple[Import, str]]:
    """The imports inside larev/ that reach a part of a higher layer than the importing module's, each with a line
    naming the two layers. Parts in no layer are left to `unplaced_core_parts`."""
    rank = {part: (i, name) for i, (name, parts) in enumerate(layers) for part in parts}
    bad = []
    for imports in graph.values():
        for imp in imports:
            if imp.source.partition(".")[0] != "larev" or imp.target.partition(".")[0] != "larev":
                continue
            own, other = rank.get(core_part(imp.source)), rank.get(core_part(imp.target))
            if own is not None and other is not None and other[0] > own[0]:
                bad.append((imp, f"layer {own[1]} ({core_part(imp.source)}) imports layer {other[1]} "
                                 f"({core_part(imp.target)}) above it"))
    return bad


def import_cycles(graph: dict[str, list[Import]]) -> list[list[Import]]:
    """The import cycles: per strongly connected component of more than one module (or a module importing itself),
    the imports between its modules. Tarjan's algorithm, iterative."""
    edges = {name: sorted({imp.target for imp in imports if imp.target in graph}) for name, imports in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges[node]:
                    components.append(component)
    return [[imp for name in sorted(c) for imp in graph[name] if imp.target in c]
            for c in sorted(components, key=sorted)]


def describe(cycles: list[list[Import]]) -> str:
    return "\n\n".join(f"cycle among {sorted({i.source for i in cycle})}:\n" + "\n".join(f"  {i}" for i in cycle)
                       for cycle in cycles)


@pytest.fixture(scope="module")
def repo_graph() -> dict[str, list[Import]]:
    return project_imports(REPO)


def test_the_checker_reads_the_whole_project(repo_graph):
    assert {name.partition(".")[0] for name in repo_graph} == set(PACKAGES)
    assert len(repo_graph) > 100
    # a function-level import is seen (tasks/runtime/source_graph.py's larev_version imports larev inside the function)
    assert "larev" in {imp.target for imp in repo_graph["tasks.runtime.source_graph"]}


def test_no_import_goes_up_a_layer(repo_graph):
    bad = layer_violations(repo_graph)
    assert not bad, "imports against the layers (larev < storage, tasks < flows):\n" + "\n".join(map(str, bad))


def test_nothing_imports_the_command_line(repo_graph):
    bad = cli_imports(repo_graph)
    assert not bad, "imports of flows/cli/ from below it (move what they use to flows/):\n" + "\n".join(map(str, bad))


def test_the_checker_finds_a_planted_import_of_the_command_line(tmp_path):
    """A copy of flows/ passes; the same copy with flows/pipeline.py importing flows/cli/preflight.py inside a
    function fails, naming that import and nothing else."""
    shutil.copytree(REPO / "flows", tmp_path / "flows", ignore=shutil.ignore_patterns("__pycache__"))
    assert not cli_imports(project_imports(tmp_path, ("flows",)))
    pipeline = tmp_path / "flows" / "pipeline.py"
    pipeline.write_text(pipeline.read_text(encoding="utf-8")
                        + "\n\ndef planted():\n    from flows.cli.preflight import check_inputs\n"
                          "    return check_inputs\n", encoding="utf-8")
    line = len(pipeline.read_text(encoding="utf-8").splitlines()) - 1
    bad = cli_imports(project_imports(tmp_path, ("flows",)))
    assert [(imp.source, imp.target, imp.path, imp.line) for imp in bad] == [
        ("flows.pipeline", "flows.cli.preflight", "flows/pipeline.py", line)]


def test_every_part_of_the_core_is_in_a_layer(repo_graph):
    unplaced = unplaced_core_parts(repo_graph)
    assert not unplaced, f"parts of larev/ in no layer of CORE_LAYERS (tests/test_layers.py): {unplaced}"


def test_no_import_goes_up_a_layer_inside_the_core(repo_graph):
    bad = core_layer_violations(repo_graph)
    order = " < ".join(name for name, _ in CORE_LAYERS)
    assert not bad, (f"imports against the core's layers ({order}):\n"
                     + "\n".join(f"{imp}: {why}" for imp, why in bad))


def test_no_import_cycle(repo_graph):
    cycles = import_cycles(repo_graph)
    assert not cycles, describe(cycles)


def _plant(root: Path, files: dict[str, str]) -> None:
    for relative, source in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")


def test_the_checker_finds_a_planted_cycle_through_a_function_level_import(tmp_path):
    _plant(tmp_path, {
        "a/__init__.py": "",
        "a/x.py": """\
            def f():
                import a.y
                return a.y
            """,
        "a/y.py": "from a import x\n",
        "a/z.py": "from .y import x\n",  # imports into the cycle, not part of it
        "a/self_.py": "from . import self_\n",
    })
    graph = project_imports(tmp_path, ("a",))
    cycles = import_cycles(graph)
    assert [{imp.source for imp in cycle} for cycle in cycles] == [{"a.self_"}, {"a.x", "a.y"}]
    found = {(imp.source, imp.target, imp.line, imp.statement) for imp in cycles[1]}
    assert found == {("a.x", "a.y", 2, "import a.y"), ("a.y", "a.x", 1, "from a import x")}
    assert "a/x.py:2: import a.y" in describe(cycles)


def test_the_checker_finds_a_planted_upward_import(tmp_path):
    _plant(tmp_path, {
        "larev/__init__.py": "",
        "larev/core.py": """\
            import math


            def f():
                from tasks import step
                return step
            """,
        "tasks/__init__.py": "",
        "tasks/step.py": "from larev import core\nimport storage.store\n",
        "storage/__init__.py": "",
        "storage/store.py": "import larev\n\n\ndef g():\n    from tasks.step import x\n",
        "flows/__init__.py": "",
        "flows/run.py": "from tasks.step import x\nfrom larev.core import f\nfrom storage import store\n",
    })
    graph = project_imports(tmp_path)
    assert [(imp.target, imp.line) for imp in graph["flows.run"]] == [
        ("tasks.step", 1), ("larev.core", 2), ("storage.store", 3)]
    assert [(imp.source, imp.target, imp.line) for imp in layer_violations(graph)] == [
        ("larev.core", "tasks.step", 5), ("storage.store", "tasks.step", 5)]
    assert [{imp.source for imp in cycle} for cycle in import_cycles(graph)] == [
        {"larev.core", "storage.store", "tasks.step"}]


def _copy_core(dest: Path) -> None:
    shutil.copytree(REPO / "larev", dest / "larev", ignore=shutil.ignore_patterns("__pycache__"))


def test_the_checker_finds_a_method_planted_in_a_copy_of_the_models(tmp_path):
    """A copy of larev/ passes; the same copy with larev/models importing larev/methods (inside a function) and
    larev/config importing larev/models fails, naming both imports and nothing else."""
    _copy_core(tmp_path)
    assert not core_layer_violations(project_imports(tmp_path, ("larev",)))
    tokenizer = tmp_path / "larev" / "models" / "tokenizer.py"
    tokenizer.write_text(tokenizer.read_text(encoding="utf-8")
                         + "\n\ndef planted():\n    from larev.methods.rev.inputs import evaluator_inputs\n"
                           "    return evaluator_inputs\n", encoding="utf-8")
    line = len(tokenizer.read_text(encoding="utf-8").splitlines()) - 1
    config = tmp_path / "larev" / "config.py"
    config.write_text(config.read_text(encoding="utf-8") + "\nfrom larev.models import pretrained\n", encoding="utf-8")
    bad = core_layer_violations(project_imports(tmp_path, ("larev",)))
    assert sorted((imp.source, imp.target, imp.path, imp.line, why) for imp, why in bad) == [
        ("larev.config", "larev.models.pretrained", "larev/config.py", len(config.read_text().splitlines()),
         "layer foundation (larev.config) imports layer models (larev.models) above it"),
        ("larev.models.tokenizer", "larev.methods.rev.inputs", "larev/models/tokenizer.py", line,
         "layer models (larev.models) imports layer methods (larev.methods) above it"),
    ]


def test_the_checker_finds_a_part_of_the_core_in_no_layer(tmp_path):
    _copy_core(tmp_path)
    before = unplaced_core_parts(project_imports(tmp_path, ("larev",)))
    (tmp_path / "larev" / "newpart").mkdir()
    (tmp_path / "larev" / "newpart" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "larev" / "loose.py").write_text("from larev.methods import rev\n", encoding="utf-8")
    graph = project_imports(tmp_path, ("larev",))
    assert unplaced_core_parts(graph) == sorted([*before, "larev.loose", "larev.newpart"])
    assert not core_layer_violations(graph)  # an unplaced part is reported once, by unplaced_core_parts


# ---- docs/architecture.md describes today's tree; tasks/ holds steps only --------------------------------------------

#: the modules of tasks/ that define no step, and why
TASKS_WITHOUT_STEPS = {
    "tasks/__init__.py": "the package",
    "tasks/metric.py": "the seam every metric module declares itself through (Metric, Run, resolved_params)",
    "tasks/r_only.py": "r_only's Metric object: its steps are REV's training and score steps, run with its role",
}


def _diagram(page: str) -> str:
    return page.split("```", 2)[1]


def test_the_architecture_page_names_every_module_of_flows_tasks_and_storage():
    """Every module of flows/, flows/cli/, tasks/, tasks/runtime/ and storage/ (and every part of larev/) is named
    in docs/architecture.md's diagram, and the diagram names no module that is not there."""
    import re

    diagram = _diagram((REPO / "docs" / "architecture.md").read_text())
    upper = diagram.split("larev/    ")[0]  # the blocks of flows/, tasks/ and storage/
    named = set(re.findall(r"\b([a-z0-9_]+\.py)\b", upper))
    actual = {p.name for folder in ("flows", "flows/cli", "tasks", "tasks/runtime", "storage")
              for p in (REPO / folder).glob("*.py") if p.name != "__init__.py"}
    assert named == actual, (f"docs/architecture.md's diagram: missing {sorted(actual - named)}, "
                             f"gone {sorted(named - actual)}")
    parts = {p.name for p in (REPO / "larev").iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert all(f"{part}/" in diagram for part in parts), sorted(p for p in parts if f"{p}/" not in diagram)


def test_tasks_holds_steps_only():
    """Each module of tasks/ (runtime/ aside: the step machinery) declares at least one step, or is a named
    exception with its reason."""
    import re

    without = []
    for path in sorted((REPO / "tasks").glob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        source = path.read_text()
        if not re.search(r"^@(larev_task|task)\(", source, flags=re.MULTILINE) and relative not in TASKS_WITHOUT_STEPS:
            without.append(relative)
    assert not without, f"modules of tasks/ with no step (move them, or name the exception): {without}"
    assert all((REPO / name).is_file() for name in TASKS_WITHOUT_STEPS)
