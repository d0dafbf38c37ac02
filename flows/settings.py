"""Parameters by dotted path: what `--set PATH=VALUE`, a `--params` file, a protocol's settings and a decision
candidate's settings all become before a parameter model validates them.

A setting is an `Assignment` of a value to a dotted path into a parameter model (`"larev.objective.lambda_irm"`).
`field_at` finds the field a path names (or fails naming the first unknown part and the valid names), `assign`
sets it in a nested dict whose missing sections start from their defaults, and `parse_set` reads the
`PATH=VALUE` form (VALUE as YAML, text kept as text where the field is text). The command line (flows/cli/) and
the benchmark flows (flows/validity.py) both build parameters this way, so a path means the same in each.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel

from larev.errors import ConfigError

#: "no value given" (a field's default may be None)
UNSET = object()


@dataclass
class Assignment:
    path: str
    value: Any
    origin: str  # where it came from, for error messages: "--lambda-irm", "--set", "params file run.yaml"


def unwrap_optional(annotation: Any) -> Any:
    """X for `X | None` / `Optional[X]`; the annotation itself otherwise."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def model_class(annotation: Any) -> type[BaseModel] | None:
    """The parameter model an annotation names (`X` or `X | None`), or None for a plain value."""
    inner = unwrap_optional(annotation)
    return inner if isinstance(inner, type) and issubclass(inner, BaseModel) else None


@dataclass(frozen=True)
class FieldAt:
    """The field at a dotted path: its annotation, description and effective default (a nested model's default
    instance counts, so `larev.la_train.epochs` shows LAREV's 2, not TrainConfig's 3)."""

    annotation: Any
    description: str | None
    default: Any  # PydanticUndefined when required


def field_at(model: type[BaseModel], path: str, *, origin: str = "") -> FieldAt:
    """The field at `path` in `model`, or a ConfigError naming the first unknown part and the valid names."""
    cls: type[BaseModel] | None = model
    parent: Any = UNSET  # the default instance of the current model, when there is one
    info = None
    parts = path.split(".")
    for i, name in enumerate(parts):
        if cls is None:
            raise ConfigError(f"{origin}: '{'.'.join(parts[:i])}' is a value, not a section: no '{path}'")
        if name not in cls.model_fields:
            where = ".".join(parts[:i]) or "the parameters"
            raise ConfigError(f"{origin}: unknown parameter '{path}': {where} has no field '{name}' (fields: "
                              f"{', '.join(cls.model_fields)})")
        info = cls.model_fields[name]
        if parent is not UNSET and parent is not None:
            value = getattr(parent, name)
        else:
            value = info.get_default(call_default_factory=True)
        parent = value
        cls = model_class(info.annotation)
    return FieldAt(info.annotation, info.description, parent)


def read_params_file(path: str) -> dict:
    """The mapping in a YAML or JSON file, or a ConfigError naming the file."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"--params {path}: cannot read it ({exc.strerror or exc})") from None
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"--params {path}: not valid YAML/JSON ({exc})") from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"--params {path}: expected a mapping of parameters, found a {type(value).__name__}")
    return value


def leaves(model: type[BaseModel], tree: dict, prefix: str, origin: str) -> Iterable[Assignment]:
    """A nested parameter mapping as (path, value) assignments, one per field that is not a section (a mapping
    given for a section becomes assignments to its fields, so the section's other defaults stay)."""
    for name, value in tree.items():
        path = f"{prefix}{name}"
        spec = field_at(model, path, origin=origin)
        if isinstance(value, dict) and model_class(spec.annotation) is not None:
            if not value:
                yield Assignment(path, {}, origin)
            yield from leaves(model, value, f"{path}.", origin)
        else:
            yield Assignment(path, value, origin)


def parse_set(model: type[BaseModel], item: str) -> Assignment:
    """`PATH=VALUE` as an assignment: the path checked against `model`, VALUE read as YAML (text stays text where
    the field is text: "no", "1e-3", "t5-large")."""
    path, sep, raw = item.partition("=")
    path = path.strip()
    if not sep or not path:
        raise ConfigError(f"--set {item!r}: expected PATH=VALUE, e.g. --set larev.objective.lambda_irm=2.5")
    spec = field_at(model, path, origin=f"--set {item}")
    inner = unwrap_optional(spec.annotation)
    literal_str = typing.get_origin(inner) is Literal and all(isinstance(a, str) for a in typing.get_args(inner))
    if (inner is str or literal_str) and raw.strip() not in ("null", "~"):
        return Assignment(path, raw, "--set")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise ConfigError(f"--set {item!r}: the value is not valid YAML ({exc})") from None
    return Assignment(path, value, "--set")


def assign(model: type[BaseModel], tree: dict, a: Assignment) -> None:
    """Set `a.path` in the nested dict `tree`. A section met on the way that is not in the tree yet starts from
    its default values (so LAREV's `la_train` keeps batch size 16 when only its epochs are set)."""
    parts = a.path.split(".")
    node = tree
    for i, name in enumerate(parts[:-1]):
        child = node.get(name)
        if not isinstance(child, dict):
            default = field_at(model, ".".join(parts[: i + 1]), origin=a.origin).default
            child = default.model_dump(mode="json") if isinstance(default, BaseModel) else {}
            node[name] = child
        node = child
    node[parts[-1]] = a.value


def assigned(model: type[BaseModel], tree: dict, settings: dict[str, Any], origin: str) -> dict:
    """`tree` with each of `settings` (dotted path -> value) assigned in order, every path checked first against
    `model` (an unknown one fails naming `origin`)."""
    for path, value in settings.items():
        field_at(model, path, origin=f"{origin} {path}")
        assign(model, tree, Assignment(path, value, origin))
    return tree


def given(items: list[Assignment], path: str) -> Any:
    """The last value assigned to `path`, or UNSET."""
    values = [a.value for a in items if a.path == path]
    return values[-1] if values else UNSET
