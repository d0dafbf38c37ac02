"""Per-backbone presets as data (larev/presets.toml), and the one step that resolves a run's settings with them.

A setting left unset (None, or 'auto') is filled, before a run's first metric step, by the presets that match the
run's backbone, task and kind of data (`preset_values`), then by the few rules that copy another setting
(`DERIVED`). The result has no None and no 'auto' in any setting a step reads; run.json records it whole, with the
preset each filled value came from. Pure: a dict of parameters in, a dict out.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

PRESETS_FILE = Path(__file__).with_name("presets.toml")
TASKS = ("nli", "qa")
DATA_KINDS = ("demo", "real")
UNSET = (None, "auto")

# Settings still unset after the presets take another setting's resolved value: (setting, the one it copies).
# A path ending in `*.learning_rate` stands for every training section's learning rate.
DERIVED: tuple[tuple[str, str], ...] = (
    ("larev.la_dropout", "model.dropout"),  # phi_LA's dropout: the backbone's, unless a preset says otherwise
    ("larev_vs_empty.la_min_steps", "larev.la_min_steps"),
    ("larev_vs_empty.lambda_irm", "larev.objective.lambda_irm"),
    ("larev_vs_empty.lambda_probe", "larev.objective.lambda_probe"),
    ("*.learning_rate", "train.learning_rate"),  # every evaluator trains at the backbone's rate unless set
)

# Settings that say where or in what chunks a step runs, not what it computes; they may stay unset (a GPU worker
# resolves the device; captum's internal batch is all rows at once when unset).
PLACEMENT = ("device", "internal_batch_size")


@dataclass(frozen=True)
class Preset:
    name: str
    backbone: tuple[str, ...] | str  # names, or "*"
    task: str  # "nli", "qa" or "*"
    data: str  # "demo", "real" or "*"
    chosen_on: str
    settings: dict[str, Any]

    def matches(self, backbone: str, task: str, data: str) -> bool:
        return ((self.backbone == "*" or backbone in self.backbone) and self.task in ("*", task)
                and self.data in ("*", data))


def _preset(entry: dict, where: str) -> Preset:
    keys = {"name", "backbone", "task", "data", "chosen_on", "settings"}
    if set(entry) != keys:
        raise ValueError(f"{where}: a preset has exactly the keys {sorted(keys)}, got {sorted(entry)}")
    backbone = entry["backbone"]
    if not (backbone == "*" or (isinstance(backbone, list) and backbone and all(isinstance(b, str) for b in backbone))):
        raise ValueError(f"{where} ({entry['name']}): backbone must be \"*\" or a list of names, got {backbone!r}")
    if entry["task"] not in ("*", *TASKS) or entry["data"] not in ("*", *DATA_KINDS):
        raise ValueError(f"{where} ({entry['name']}): task must be one of {('*', *TASKS)} and data one of "
                         f"{('*', *DATA_KINDS)}, got {entry['task']!r} / {entry['data']!r}")
    if not entry["chosen_on"].strip() or not entry["settings"]:
        raise ValueError(f"{where} ({entry['name']}): says where its values were chosen and fills at least one setting")
    return Preset(name=entry["name"], backbone=backbone if backbone == "*" else tuple(backbone), task=entry["task"],
                  data=entry["data"], chosen_on=entry["chosen_on"], settings=dict(entry["settings"]))


@lru_cache(maxsize=4)
def load_presets(path: Path = PRESETS_FILE) -> tuple[Preset, ...]:
    """The presets of `path`, checked: known keys, valid match values, unique names."""
    entries = tomllib.loads(Path(path).read_text()).get("preset", [])
    presets = tuple(_preset(e, f"{Path(path).name} preset {i + 1}") for i, e in enumerate(entries))
    names = [p.name for p in presets]
    if len(set(names)) != len(names):
        raise ValueError(f"{Path(path).name}: repeated preset name in {names}")
    return presets


def data_kind(source: str) -> str:
    """'demo' for the demo generator's data, 'real' for any other source."""
    return "demo" if source == "demo" else "real"


def preset_values(backbone: str, task: str, data: str,
                  presets: tuple[Preset, ...] | None = None) -> dict[str, tuple[Any, str]]:
    """{setting path: (value, preset name)} from every preset matching the run, later presets overriding earlier."""
    if task not in TASKS or data not in DATA_KINDS:
        raise ValueError(f"task must be one of {TASKS} and data one of {DATA_KINDS}, got {task!r} / {data!r}")
    out: dict[str, tuple[Any, str]] = {}
    for p in presets if presets is not None else load_presets():
        if p.matches(backbone, task, data):
            out.update({path: (value, p.name) for path, value in p.settings.items()})
    return out


def preset_named(name: str) -> Preset:
    found = [p for p in load_presets() if p.name == name]
    if not found:
        raise KeyError(f"no preset named {name!r} in {PRESETS_FILE.name}")
    return found[0]


def _get(params: dict, path: str) -> Any:
    node: Any = params
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(path)
        node = node[part]
    return node


def _set(params: dict, path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node = params
    for part in parents:
        node = node[part]
    node[last] = value


def _paths(params: dict, suffix: str, prefix: str = "") -> list[str]:
    """Every path in `params` ending in `suffix` (a leaf name)."""
    out = []
    for key, value in params.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            out += _paths(value, suffix, path + ".")
        elif key == suffix:
            out.append(path)
    return out


def resolve_settings(params: dict, *, backbone: str, task: str, data: str,
                     presets: tuple[Preset, ...] | None = None) -> tuple[dict, dict[str, str]]:
    """`params` (a run's parameters as JSON) with every unset setting filled: first by the matching presets, then
    by DERIVED. Returns (the filled parameters, {setting path: what filled it}: a preset's name, or `=PATH` for a
    copied setting). A setting that is set is never changed; a preset naming a setting the parameters do not have
    is an error (a typo in the table would otherwise be silent)."""
    import copy

    out = copy.deepcopy(params)
    filled: dict[str, str] = {}
    for path, (value, name) in preset_values(backbone, task, data, presets).items():
        section = path.split(".")[0]
        if section not in out:  # a metric that is not registered in this build
            continue
        try:
            current = _get(out, path)
        except KeyError:
            raise ValueError(f"preset {name!r} sets {path!r}, which the run's parameters do not have") from None
        if current in UNSET:
            _set(out, path, value)
            filled[path] = name
    for target, source in DERIVED:
        targets = _paths(out, target.split(".")[-1]) if target.startswith("*.") else [target]
        for path in targets:
            if path == source or path.split(".")[0] not in out:
                continue
            if _get(out, path) in UNSET:
                _set(out, path, _get(out, source))
                filled[path] = f"={source}"
    return out, filled


def unset_settings(params: dict, sections: tuple[str, ...], prefix: str = "") -> list[str]:
    """The paths under `sections` still None or 'auto' (placement settings aside): what resolution left unset."""
    out = []
    for key, value in params.items():
        if not prefix and key not in sections:
            continue
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            out += unset_settings(value, sections, path + ".")
        elif value in UNSET and key not in PLACEMENT:
            out.append(path)
    return out
