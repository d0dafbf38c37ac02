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
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from flows.settings import UNSET, Assignment, assign, field_at, leaves, parse_set, read_params_file, unwrap_optional

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
    const: Any = UNSET
    help: str | None = None
    default: str | None = None


@dataclass
class Command:
    """A command whose parameters are one pydantic model: its options and how assignments become the model."""

    model: type[BaseModel]
    options: list[Option]
    presets: dict[str, Any] = field(default_factory=dict)  # lowest precedence, e.g. {"name": "ftc"}
    adjust: Callable[[list[Assignment]], list[Assignment]] | None = None  # e.g. derive a default run name


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
    inner = unwrap_optional(annotation)
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


def option_specs(command: Command) -> list[dict]:
    """The arguments `add_options` gives `command`, as JSON (the snapshot the parser is built from: `SNAPSHOT`): per
    option its flag, destination and help, and a switch's constant or a value's kind (int, float, str, list, json),
    choices and metavar, all read from the command's parameter model."""
    specs = []
    for option in command.options:
        spec = field_at(command.model, option.path, origin=option.flag)
        dest = _DEST + option.path
        if option.const is not UNSET:
            text = option.help or spec.description or ""
            specs.append({"flag": option.flag, "dest": dest, "const": option.const,
                          "help": f"{text} (sets {option.path})".strip()})
            continue
        kind, choices, metavar = _converter(spec.annotation, option.flag)
        if kind is None:
            raise TypeError(f"{option.flag}: no command-line form for {spec.annotation!r} at {option.path}")
        shown = option.default or (None if spec.default is PydanticUndefined else _shown(spec.default))
        default = f"; default {shown}" if shown else ""
        text = (option.help or spec.description or "").replace("%", "%%")
        kind_name = {_comma_list: "list"}.get(kind) or getattr(kind, "__name__", "")
        specs.append({"flag": option.flag, "dest": dest,
                      "kind": "json" if kind_name.startswith("JSON") else kind_name, "choices": choices,
                      "metavar": metavar or (None if choices else option.path.rsplit(".", 1)[-1].upper()),
                      "help": f"{text} ({option.path}{default})".lstrip()})
    return specs


_KINDS: dict[str, Callable[[str], Any]] = {"int": int, "float": float, "str": str, "list": _comma_list}


def add_options(parser: argparse.ArgumentParser, specs: list[dict]) -> None:
    """A command's options from their specs (`option_specs`), plus --params, --set and --print-params."""
    for spec in specs:
        if "const" in spec:
            parser.add_argument(spec["flag"], dest=spec["dest"], action="store_const", const=spec["const"],
                                default=argparse.SUPPRESS, help=spec["help"])
            continue
        kind = _json_object(spec["flag"]) if spec["kind"] == "json" else _KINDS[spec["kind"]]
        parser.add_argument(spec["flag"], dest=spec["dest"], type=kind, choices=spec["choices"],
                            metavar=spec["metavar"], default=argparse.SUPPRESS, help=spec["help"])
    parser.add_argument("--params", metavar="FILE", default=None,
                        help="a YAML or JSON file of parameters (the Prefect UI form's shape); options and --set win")
    parser.add_argument("--set", metavar="PATH=VALUE", dest="set_values", action="append", default=[],
                        help="any parameter by its dotted path, e.g. --set larev.objective.lambda_irm=2.5 (repeatable; "
                             "VALUE is read as YAML)")
    parser.add_argument("--print-params", action="store_true",
                        help="print the resolved parameters as JSON and exit")


# ------------------------------------------------------------------------------------------------ resolution


def assignments(command: Command, args: argparse.Namespace) -> list[Assignment]:
    """Every assignment the user made, lowest precedence first."""
    out = [Assignment(path, value, "preset") for path, value in command.presets.items()]
    if getattr(args, "params", None):
        out += leaves(command.model, read_params_file(args.params), "", f"--params {args.params}")
    flags = {option.path: option.flag for option in command.options}
    out += [Assignment(dest[len(_DEST):], value, flags[dest[len(_DEST):]])
            for dest, value in vars(args).items() if dest.startswith(_DEST)]
    out += [parse_set(command.model, item) for item in getattr(args, "set_values", [])]
    return command.adjust(out) if command.adjust else out


def resolve(command: Command, args: argparse.Namespace) -> BaseModel:
    """The command's parameter model, validated, from its presets, --params file, options and --set."""
    tree: dict = {}
    for a in assignments(command, args):
        field_at(command.model, a.path, origin=a.origin)
        assign(command.model, tree, a)
    return command.model.model_validate(tree)
