"""Command-line options made from the pydantic parameter models.

A command's options are a table of `Option`s, each naming a dotted path into the command's parameter model
(`"larev.objective.lambda_irm"`). The option's type, choices, help text and the default shown in `--help` are
read from that field (its annotation, description and default), so they cannot drift from the configs.
Every command built this way also takes

    --params FILE        a YAML or JSON mapping of parameters, the same shape as the Prefect UI's form
    --set PATH=VALUE     any parameter by its dotted path (VALUE is read as YAML: 2.5, true, [a, b], null)
    --print-params       print the resolved parameters as JSON and exit

Precedence: the command's presets < the --params file < the command's own options < --set. Everything ends
as a list of (path, value) assignments applied to a nested dict that the parameter model then validates, so
a bad value fails with pydantic's message naming its path, before anything runs.
"""

from __future__ import annotations

import argparse
import json
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from larev.errors import ConfigError

_UNSET = object()
#: argparse destinations of generated options start with this (the rest is the parameter path)
_DEST = "param:"


@dataclass(frozen=True)
class Option:
    """One command-line option bound to a parameter path.

    `const`: the option is a switch that stores this value (`--no-rora` stores False at `rora.enabled`).
    `help`: words of its own instead of the field's description (the default is still read from the model).
    `default`: what --help shows as the default when the command derives it (the run name, say).
    """

    flag: str
    path: str
    const: Any = _UNSET
    help: str | None = None
    default: str | None = None


@dataclass
class Assignment:
    path: str
    value: Any
    origin: str  # where it came from, for error messages: "--lambda-irm", "--set", "params file run.yaml"


@dataclass
class Command:
    """A command whose parameters are one pydantic model: its options and how assignments become the model."""

    model: type[BaseModel]
    options: list[Option]
    presets: dict[str, Any] = field(default_factory=dict)  # lowest precedence, e.g. {"name": "ftc"}
    adjust: Callable[[list[Assignment]], list[Assignment]] | None = None  # e.g. derive a default run name


# ------------------------------------------------------------------------------------------ model introspection


def _unwrap_optional(annotation: Any) -> Any:
    """X for `X | None` / `Optional[X]`; the annotation itself otherwise."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _model_class(annotation: Any) -> type[BaseModel] | None:
    inner = _unwrap_optional(annotation)
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
    parent: Any = _UNSET  # the default instance of the current model, when there is one
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
        if parent is not _UNSET and parent is not None:
            value = getattr(parent, name)
        else:
            value = info.get_default(call_default_factory=True)
        parent = value
        cls = _model_class(info.annotation)
    return FieldAt(info.annotation, info.description, parent)


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, BaseModel):
        return "on"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value)) or "none"
    if isinstance(value, dict):
        return json.dumps(value) if value else "none"
    return str(value)


def _converter(annotation: Any, flag: str) -> tuple[Callable[[str], Any] | None, list | None, str | None]:
    """(type, choices, metavar) for an option over a field of this annotation."""
    inner = _unwrap_optional(annotation)
    origin = typing.get_origin(inner)
    if origin is Literal:
        choices = list(typing.get_args(inner))
        return type(choices[0]), choices, None
    if origin in (list, tuple):
        return _comma_list, None, "A,B,..."
    if origin is dict or inner is dict:
        return _json_object(flag), None, "JSON"
    if inner in (int, float, str):
        return inner, None, None
    return None, None, None


def _comma_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _json_object(flag: str) -> Callable[[str], dict]:
    def parse(text: str) -> dict:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise argparse.ArgumentTypeError(f"not JSON ({exc.msg}): {text!r}") from None
        if not isinstance(value, dict):
            raise argparse.ArgumentTypeError(f"expected a JSON object such as '{{\"q\": \"question\"}}': {text!r}")
        return value
    parse.__name__ = f"JSON object for {flag}"
    return parse


# ------------------------------------------------------------------------------------------------ the parser


def add_options(parser: argparse.ArgumentParser, command: Command) -> None:
    """The command's generated options, plus --params, --set and --print-params."""
    for option in command.options:
        spec = field_at(command.model, option.path, origin=option.flag)
        dest = _DEST + option.path
        if option.const is not _UNSET:
            text = option.help or spec.description or ""
            parser.add_argument(option.flag, dest=dest, action="store_const", const=option.const,
                                default=argparse.SUPPRESS, help=f"{text} (sets {option.path})".strip())
            continue
        kind, choices, metavar = _converter(spec.annotation, option.flag)
        if kind is None:
            raise TypeError(f"{option.flag}: no command-line form for {spec.annotation!r} at {option.path}")
        shown = option.default or (None if spec.default is PydanticUndefined else _shown(spec.default))
        default = f"; default {shown}" if shown else ""
        text = (option.help or spec.description or "").replace("%", "%%")
        metavar = metavar or (None if choices else option.path.rsplit(".", 1)[-1].upper())
        parser.add_argument(option.flag, dest=dest, type=kind, choices=choices, metavar=metavar,
                            default=argparse.SUPPRESS, help=f"{text} ({option.path}{default})".lstrip())
    parser.add_argument("--params", metavar="FILE", default=None,
                        help="a YAML or JSON file of parameters (the Prefect UI form's shape); options and --set win")
    parser.add_argument("--set", metavar="PATH=VALUE", dest="set_values", action="append", default=[],
                        help="any parameter by its dotted path, e.g. --set larev.objective.lambda_irm=2.5 (repeatable; "
                             "VALUE is read as YAML)")
    parser.add_argument("--print-params", action="store_true",
                        help="print the resolved parameters as JSON and exit")


# ------------------------------------------------------------------------------------------------ resolution


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


def _leaves(model: type[BaseModel], tree: dict, prefix: str, origin: str) -> Iterable[Assignment]:
    """A nested parameter mapping as (path, value) assignments, one per field that is not a section (a mapping
    given for a section becomes assignments to its fields, so the section's other defaults stay)."""
    for name, value in tree.items():
        path = f"{prefix}{name}"
        spec = field_at(model, path, origin=origin)
        if isinstance(value, dict) and _model_class(spec.annotation) is not None:
            if not value:
                yield Assignment(path, {}, origin)
            yield from _leaves(model, value, f"{path}.", origin)
        else:
            yield Assignment(path, value, origin)


def _parse_set(model: type[BaseModel], item: str) -> Assignment:
    path, sep, raw = item.partition("=")
    path = path.strip()
    if not sep or not path:
        raise ConfigError(f"--set {item!r}: expected PATH=VALUE, e.g. --set larev.objective.lambda_irm=2.5")
    spec = field_at(model, path, origin=f"--set {item}")
    inner = _unwrap_optional(spec.annotation)
    literal_str = typing.get_origin(inner) is Literal and all(isinstance(a, str) for a in typing.get_args(inner))
    if (inner is str or literal_str) and raw.strip() not in ("null", "~"):
        return Assignment(path, raw, "--set")  # text stays text ("no", "1e-3", "t5-large")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise ConfigError(f"--set {item!r}: the value is not valid YAML ({exc})") from None
    return Assignment(path, value, "--set")


def assignments(command: Command, args: argparse.Namespace) -> list[Assignment]:
    """Every assignment the user made, lowest precedence first."""
    out = [Assignment(path, value, "preset") for path, value in command.presets.items()]
    if getattr(args, "params", None):
        out += _leaves(command.model, read_params_file(args.params), "", f"--params {args.params}")
    flags = {option.path: option.flag for option in command.options}
    out += [Assignment(dest[len(_DEST):], value, flags[dest[len(_DEST):]])
            for dest, value in vars(args).items() if dest.startswith(_DEST)]
    out += [_parse_set(command.model, item) for item in getattr(args, "set_values", [])]
    return command.adjust(out) if command.adjust else out


def _assign(model: type[BaseModel], tree: dict, a: Assignment) -> None:
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


def resolve(command: Command, args: argparse.Namespace) -> BaseModel:
    """The command's parameter model, validated, from its presets, --params file, options and --set."""
    tree: dict = {}
    for a in assignments(command, args):
        field_at(command.model, a.path, origin=a.origin)
        _assign(command.model, tree, a)
    return command.model.model_validate(tree)


def given(items: list[Assignment], path: str) -> Any:
    """The last value assigned to `path`, or _UNSET."""
    values = [a.value for a in items if a.path == path]
    return values[-1] if values else _UNSET


UNSET = _UNSET
