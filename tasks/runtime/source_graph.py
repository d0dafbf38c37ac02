"""Which project source a step runs: the modules it imports, transitively, found by reading their source.

A step's code version (tasks/runtime/cache.py) is a digest of the source of the step's own module and of every project
module that module imports, directly or through others, at module level or inside a function, plus larev's
version. Nothing is imported to find them: each module's file is parsed (`ast`) and its `import` / `from ... import`
statements are resolved to files under the project packages. The graph is built once per process and memoised.

Project packages: `larev`, `tasks`, `storage`, and the top-level package of the step's own module (a metric
declared in a package of its own is covered by its own source too). `flows/` only wires steps and is not in any
step's code. What is not followed: imports built from strings at run time (`importlib.import_module(name)`), and
third-party packages (their versions are pinned by constraints.txt, not hashed).

Digests are of the file's bytes, keyed by the dotted module name, so the same source gives the same key in another
process and in a checkout at another path.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import json
import threading
from dataclasses import dataclass
from pathlib import Path

#: The packages whose modules are part of every step's code when imported.
PROJECT_PACKAGES: tuple[str, ...] = ("larev", "tasks", "storage")


# CPython 3.11's compile() to an AST is not safe in two threads at once: concurrent chains of steps computing their
# cache keys failed with "SystemError: AST constructor recursion depth mismatch". Every parse here takes this lock
# (each module is parsed once per graph and the result kept, so it is held only while a graph is cold).
_PARSE_LOCK = threading.Lock()


def parse_source(path: Path) -> ast.Module:
    """The AST of a source file, parsed under `_PARSE_LOCK`."""
    source = path.read_bytes()
    with _PARSE_LOCK:
        return ast.parse(source, filename=str(path))


@dataclass(frozen=True)
class StepCode:
    """The code a step runs: `modules` (dotted name -> sha256 of its source) and `version`, the digest of them
    together with larev's version, which enters the step's cache key."""

    version: str
    modules: dict[str, str]
    larev_version: str


def top_level_source(top: str) -> Path | None:
    """Where top-level module `top` lives, found without importing it: a package's directory, a plain module's
    file; None when it is neither (not installed, built in, a namespace package)."""
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))) if spec.origin else None
    return Path(spec.origin) if spec.origin and spec.origin.endswith(".py") else None


class SourceGraph:
    """The import graph of the modules of some top-level packages, read from their source files.

    roots: top-level name -> its package directory (or, for a plain top-level module, its file). A dotted name
    `a.b.c` is the file `<roots[a]>/b/c.py` or the package `<roots[a]>/b/c/__init__.py`.
    """

    def __init__(self, roots: dict[str, Path]) -> None:
        self.roots = dict(roots)
        self._imports: dict[str, frozenset[str]] = {}
        self._digests: dict[str, str] = {}

    def module_file(self, name: str) -> Path | None:
        """The source file of module `name`, or None when it is not a module of the roots."""
        top, *rest = name.split(".")
        root = self.roots.get(top)
        if root is None:
            return None
        if root.suffix == ".py":  # a plain top-level module
            return None if rest else root
        base = root.joinpath(*rest)
        for candidate in (base / "__init__.py", base.with_suffix(".py") if rest else None):
            if candidate is not None and candidate.is_file():
                return candidate
        return None

    def is_package(self, name: str) -> bool:
        path = self.module_file(name)
        return path is not None and path.name == "__init__.py"

    def digest(self, name: str) -> str:
        """sha256 of module `name`'s source bytes."""
        if name not in self._digests:
            self._digests[name] = hashlib.sha256(self._file(name).read_bytes()).hexdigest()
        return self._digests[name]

    def _file(self, name: str) -> Path:
        path = self.module_file(name)
        if path is None:
            raise ModuleNotFoundError(f"{name} is not a module of {sorted(self.roots)}")
        return path

    def defines(self, name: str, function: str) -> bool:
        """Whether module `name` defines `function` at its top level (read from its source, nothing imported)."""
        path = self.module_file(name)
        if path is None:
            return False
        tree = parse_source(path)
        return any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function
                   for node in tree.body)

    def _with_parents(self, name: str) -> set[str]:
        """`name` and the packages above it that are modules of the roots (importing a.b.c runs a and a.b)."""
        parts = name.split(".")
        return {".".join(parts[:i]) for i in range(1, len(parts) + 1)
                if self.module_file(".".join(parts[:i])) is not None}

    def imports(self, name: str) -> frozenset[str]:
        """The modules of the roots that module `name` imports anywhere in its source (inside functions too),
        with their parent packages; `name`'s own parent packages too."""
        if name in self._imports:
            return self._imports[name]
        path = self._file(name)
        tree = parse_source(path)
        package = name if self.is_package(name) else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    found |= self._with_parents(alias.name)
            elif isinstance(node, ast.ImportFrom):
                base = self._resolve_from(node, package)
                if base is None:
                    continue
                found |= self._with_parents(base)
                for alias in node.names:  # `from a.b import c`: c may be a module
                    if alias.name != "*" and self.module_file(f"{base}.{alias.name}") is not None:
                        found |= self._with_parents(f"{base}.{alias.name}")
        found |= self._with_parents(package) if package else set()
        found.discard(name)
        self._imports[name] = frozenset(found)
        return self._imports[name]

    @staticmethod
    def _resolve_from(node: ast.ImportFrom, package: str) -> str | None:
        """The absolute module a `from ... import` names (relative imports resolved against `package`)."""
        if node.level == 0:
            return node.module
        parts = package.split(".") if package else []
        if node.level - 1 > len(parts):
            return None
        base = parts[:len(parts) - (node.level - 1)]
        return ".".join([*base, *([node.module] if node.module else [])]) or None

    def closure(self, name: str) -> list[str]:
        """`name` and every module of the roots it imports, transitively; sorted."""
        seen, todo = {name}, [name]
        while todo:
            for dep in self.imports(todo.pop()):
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        return sorted(seen)

    def step_code(self, name: str, larev_version: str) -> StepCode:
        """The digests of `name`'s closure and the version made of them and `larev_version`."""
        modules = {m: self.digest(m) for m in self.closure(name)}
        blob = json.dumps({"larev": larev_version, "modules": modules}, sort_keys=True, separators=(",", ":"))
        return StepCode(hashlib.sha256(blob.encode()).hexdigest()[:16], modules, larev_version)


def larev_version() -> str:
    from larev import __version__

    return __version__


@functools.cache
def _project_graph(extra_top: str) -> SourceGraph:
    tops = dict.fromkeys((*PROJECT_PACKAGES, extra_top))
    return SourceGraph({top: path for top in tops if (path := top_level_source(top)) is not None})


@functools.cache
def step_code(module: str) -> StepCode:
    """The code of a step declared in module `module` (memoised per process: sources are read once)."""
    return _project_graph(module.partition(".")[0]).step_code(module, larev_version())


def step_code_of(module: str, function: str) -> StepCode | None:
    """The code of step function `module.function` as today's source has it; None when that source no longer
    defines it. Nothing is imported (a step record names the function, and a record may not be larev's own)."""
    graph = _project_graph(module.partition(".")[0])
    return step_code(module) if graph.defines(module, function) else None


def forget() -> None:
    """Drop the memoised graphs and digests (tests that edit source files and read them again)."""
    _project_graph.cache_clear()
    step_code.cache_clear()
