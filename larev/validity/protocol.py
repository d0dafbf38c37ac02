"""The validity protocol (protocols/validity.yaml): data and splits, seeds, scorers, perturbations and criteria,
read and checked up front. `protocol_digest` is the sha256 of the file's bytes: results carry it, and a result is
only read against the protocol that made it."""

from __future__ import annotations

import hashlib
import math
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from larev.errors import ConfigError
from larev.methods.leakage_aware.config import ABLATIONS

SPLITS = ("tune", "report")
EXPECTED = ("below", "near")
# criteria whose figure is read against a threshold, by the part of a name before '/'
HUMAN_CRITERIA = ("acceptability_auroc", "acceptability_ap", "pairwise", "spearman_new_info", "spearman_supports")
PERTURB_CRITERIA = ("perturb_below", "perturb_near", "perturb_order", "perturb_corr")
# Kendall's tau of a scorer's ranking of the task's generators with their known order (tasks.<task>.generators)
GENERATOR_ORDER = "generator_order"
# a decision candidate or an arm scored in a run of its own (tasks.<task>.decisions, tasks.<task>.arms): METRIC@LABEL
CANDIDATE_NAME = re.compile(r"[a-z][a-z_]*@[a-z0-9][a-z0-9_.-]*")
# Settings that train a scorer on kinds of text the benchmark also judges it on: a setting -> (the scorers of a
# run that train with it, as names or name prefixes; the kinds it resembles). Wherever the protocol turns one on
# (a task's settings, a candidate's, an arm's), `trained_on` must mark those kinds for those scorers: their cells
# on them are then never counted as evidence.
SIGNALS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # LAREV's mismatched-rationale term: another training instance's rationale of another label (every phi_LA of
    # the `larev` section: the metric, its ablations larev_NAME and the control erm_envs; not larev_vs_empty's)
    "larev.lambda_mismatched": (("larev", *(f"larev_{a}" for a in ABLATIONS), "control_erm_envs"),
                                ("borrowed", "borrowed_other")),
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TaskData(_Strict):
    data: str  # the examples file (train rows and both test splits come from it)
    train_rows: str  # python-style row slice
    splits: dict[Literal["tune", "report"], str]  # split -> row slice of the same file
    human: list[str] = Field(default_factory=list)  # annotation files of this task
    settings: dict[str, Any] = Field(default_factory=dict)  # pipeline settings by dotted path, for this task's runs
    # rationale generators (`larev generate` specs or configs) in their known order of quality, best first; an entry
    # that is a list is a tier of generators with no known order among them. Trained once (their own seeds, not the
    # run's), they write rationales for the split's rows, which every seed scores.
    generators: list[str | dict[str, Any] | list[str | dict[str, Any]]] = Field(default_factory=list)
    # defaults decided on this task's tune split (`decision_rule`): metric -> {candidate: the settings (dotted path ->
    # value) it stands for on the protocol's backbone}. A candidate is a scorer the run scores anyway (LAREV's
    # ablations and controls), or METRIC@LABEL: the tune run scores it in a run of its own with those settings.
    decisions: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)
    # scorers read on both splits in runs of their own, decided nothing: METRIC@LABEL -> its settings (a form the
    # decisions set aside, kept in view on the report split)
    arms: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @field_validator("splits")
    @classmethod
    def _both(cls, splits: dict) -> dict:
        if set(splits) != set(SPLITS):
            raise ValueError(f"splits must name both {SPLITS}, got {sorted(splits)}")
        return splits

    @field_validator("generators")
    @classmethod
    def _generators(cls, generators: list) -> list:
        if generators:
            from larev.generate.config import generator_configs

            flat = [g for entry in generators for g in (entry if isinstance(entry, list) else [entry])]
            if any(isinstance(entry, list) and not entry for entry in generators):
                raise ValueError("an empty tier of generators")
            try:
                generator_configs(flat)
            except ConfigError as error:
                raise ValueError(str(error)) from None
            if len(flat) < 3 or len(generators) < 2:
                raise ValueError(f"{len(flat)} generator(s) in {len(generators)} tier(s): an order needs at least "
                                 "3 generators in at least 2 tiers to be tested")
        return generators

    def generator_configs(self) -> list:
        """The generators' validated configs, best first (a tier's in the order listed); none when none named."""
        from larev.generate.config import generator_configs

        return generator_configs([g for _, g in self._tiered()]) if self.generators else []

    def generator_tiers(self) -> list[int]:
        """Each generator's place in the known order (0: best), in `generator_configs`' order."""
        return [tier for tier, _ in self._tiered()]

    def _tiered(self) -> list[tuple[int, Any]]:
        return [(tier, g) for tier, entry in enumerate(self.generators)
                for g in (entry if isinstance(entry, list) else [entry])]


class Scorers(_Strict):
    metrics: list[str]
    controls: list[str] = Field(default_factory=list)
    ablations: list[str] = Field(default_factory=list)
    baselines: list[Literal["length", "gpt3_nll"]] = Field(default_factory=list)


class Criterion(_Strict):
    direction: Literal["above", "below"]
    threshold: float | Literal["prevalence"]
    judge: Literal["low", "high", "value", "abs_value"]  # what meets the threshold ("on" is a YAML boolean)
    scale: Literal["gold_sd"] | None = None

    @model_validator(mode="after")
    def _consistent(self):
        if (self.judge == "abs_value") != (self.scale is not None):
            raise ValueError("`scale` goes with judge: abs_value, and only with it")
        return self


class Protocol(_Strict):
    name: str
    backbone: str
    seeds: list[int] = Field(min_length=1)
    bootstrap: int = Field(ge=0)
    level: float = Field(gt=0, lt=1)
    tasks: dict[Literal["nli", "qa"], TaskData]
    human_split: Literal["sha256-first-byte-parity"]
    acceptable_votes: int = Field(ge=1)
    scorers: Scorers
    trained_on: dict[str, list[str]] = Field(default_factory=dict)
    perturbations: dict[str, Literal["below", "near"]]
    variants: dict[str, Literal["below", "near"]] = Field(default_factory=dict)
    criteria: dict[str, Criterion]
    # how tasks.<task>.decisions are decided (larev/validity/decisions.py): a candidate replaces the metric's default
    # when, paired over seeds and instances, it is better beyond the interval on more criteria than it is worse
    decision_rule: Literal["paired-wins-minus-losses"] = "paired-wins-minus-losses"

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, seeds: list[int]) -> list[int]:
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"repeated seed in {seeds}")
        return seeds

    @model_validator(mode="after")
    def _every_criterion(self):
        needed = (*HUMAN_CRITERIA, *PERTURB_CRITERIA,
                  *((GENERATOR_ORDER,) if any(t.generators for t in self.tasks.values()) else ()))
        missing = [c for c in needed if c not in self.criteria]
        if missing:
            raise ValueError(f"criteria {missing} are not stated (each needs direction, threshold and judge)")
        return self

    @model_validator(mode="after")
    def _decisions(self):
        variants = [n for n in self.scored_names() if n not in self.scorers.metrics]  # ablations and controls
        for task, data in self.tasks.items():
            for metric, candidates in data.decisions.items():
                where = f"tasks.{task}.decisions.{metric}"
                if metric not in self.scorers.metrics:
                    raise ValueError(f"{where}: {metric!r} is not one of scorers.metrics {self.scorers.metrics}")
                if not candidates:
                    raise ValueError(f"{where}: no candidate (name scorers the run scores, each with its settings)")
                for name, settings in candidates.items():
                    own_run = name.startswith(f"{metric}@")
                    if own_run and not CANDIDATE_NAME.fullmatch(name):
                        raise ValueError(f"{where}.{name}: a candidate run's name is {metric}@LABEL, LABEL of "
                                         "lower-case letters, digits, '_', '.' and '-'")
                    if not own_run and (metric != "larev" or name not in variants):
                        raise ValueError(f"{where}.{name}: neither one of LAREV's ablations or controls the run "
                                         f"scores ({variants}, candidates for larev only) nor a candidate run "
                                         f"({metric}@LABEL)")
                    if not settings:
                        raise ValueError(f"{where}.{name}: no settings (the dotted paths this candidate stands for)")
            for name, settings in data.arms.items():
                metric = name.split("@")[0]
                if not CANDIDATE_NAME.fullmatch(name) or metric not in self.scorers.metrics:
                    raise ValueError(f"tasks.{task}.arms.{name}: an arm is METRIC@LABEL with a metric of "
                                     f"scorers.metrics {self.scorers.metrics}")
                if not settings or name in self.candidate_runs(task):
                    raise ValueError(f"tasks.{task}.arms.{name}: an arm has settings and is not also a candidate")
        return self

    @model_validator(mode="after")
    def _signals_marked(self):
        """Every scorer trained with a setting of SIGNALS has the kinds it resembles in `trained_on`."""
        for task, data in self.tasks.items():
            runs = {"": (data.settings, self.scored_names()),
                    **{name: ({**data.settings, **settings}, [name])
                       for name, (_, settings) in {**self.candidate_runs(task), **self.arm_runs(task)}.items()}}
            for run, (settings, names) in runs.items():
                for path, (prefixes, kinds) in SIGNALS.items():
                    if not settings.get(path):
                        continue
                    for name in names:
                        if name.split("@")[0] not in prefixes:
                            continue
                        missing = [k for k in kinds if k not in self.trained_on_kinds(name)]
                        if missing:
                            where = f"tasks.{task}" + (f" ({run})" if run else ".settings")
                            raise ValueError(f"{where} sets {path}, which trains {name} on text like {missing}: "
                                             f"trained_on.{name} must list {list(kinds)}, so that those cells are "
                                             "never counted as its evidence")
        return self

    def candidate_runs(self, task: str) -> dict[str, tuple[str, dict[str, Any]]]:
        """The task's decision candidates scored in runs of their own: name -> (metric, settings)."""
        return {name: (metric, settings) for metric, candidates in self.tasks[task].decisions.items()
                for name, settings in candidates.items() if name.startswith(f"{metric}@")}

    def arm_runs(self, task: str) -> dict[str, tuple[str, dict[str, Any]]]:
        """The task's arms, each scored in a run of its own on every split: name -> (metric, settings)."""
        return {name: (name.split("@")[0], settings) for name, settings in self.tasks[task].arms.items()}

    def trained_on_kinds(self, scorer: str) -> list[str]:
        """The kinds of text `scorer` trains on: its metric's (a candidate or arm, METRIC@LABEL, trains on its
        metric's), and its own where `trained_on` names it."""
        own = self.trained_on.get(scorer, []) if "@" in scorer else []
        return list(dict.fromkeys([*self.trained_on.get(scorer.split("@")[0], []), *own]))

    def scored_names(self) -> list[str]:
        """The names of the trained scorers a run scores: the metrics, LAREV's ablations (larev_NAME) and its
        controls (control_NAME)."""
        return [*self.scorers.metrics, *(f"larev_{a}" for a in self.scorers.ablations),
                *(f"control_{c}" for c in self.scorers.controls)]

    def criterion(self, name: str) -> Criterion | None:
        """The criterion a results.json figure `name` ('acceptability_auroc/<file>', 'perturb/<kind>',
        'generator_order', ...) is judged by; None for a figure with no threshold (the order share of a 'near'
        kind)."""
        head, _, kind = name.partition("/")
        if head in HUMAN_CRITERIA or head == GENERATOR_ORDER:
            return self.criteria.get(head)
        expected = self.perturbations.get(kind) if head.startswith("perturb") else self.variants.get(kind)
        if expected is None:
            return None
        if head in ("perturb", "variant"):
            return self.criteria[f"perturb_{expected}"]
        if head in ("perturb_order", "variant_order"):
            return self.criteria["perturb_order"] if expected == "below" else None
        if head in ("perturb_corr", "variant_corr"):
            return self.criteria["perturb_corr"] if expected == "near" else None
        return None


def protocol_digest(path: str | Path) -> str:
    """sha256 of the protocol file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


#: the placeholder a protocol's data paths start with: the data directory (larev/data/location.py, LAREV_DATA)
DATA_PLACEHOLDER = "${LAREV_DATA}"


def with_data_dir(raw: Any) -> Any:
    """`raw` (a protocol as read) with DATA_PLACEHOLDER in every task's data and human paths replaced by the data
    directory: `LAREV_DATA`, else ../shared/data where it exists, else data/ (where `larev data get` writes). A
    path under ../shared/data (the first protocol's, written before the placeholder) reads as the same file under
    the data directory, so that protocol runs in a clone with `larev data get`'s folder too; its digest, of the
    file as written, stays."""
    from larev.data.location import SHARED_DATA, data_dir

    shared = f"{SHARED_DATA.as_posix()}/"

    def expand(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if value.startswith(shared):
            return str(data_dir() / value.removeprefix(shared))
        return value.replace(DATA_PLACEHOLDER, str(data_dir()))

    if not isinstance(raw, dict) or not isinstance(raw.get("tasks"), dict):
        return raw
    for task in raw["tasks"].values():
        if isinstance(task, dict):
            if "data" in task:
                task["data"] = expand(task["data"])
            if isinstance(task.get("human"), list):
                task["human"] = [expand(h) for h in task["human"]]
    return raw


def load_protocol(path: str | Path) -> Protocol:
    """The protocol at `path` (its data paths in the data directory: `with_data_dir`); ConfigError names the file
    and the field that does not fit."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such protocol file (the repository's are protocols/validity*.yaml)")
    try:
        raw = with_data_dir(yaml.safe_load(path.read_text()))
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
    try:
        return Protocol.model_validate(raw)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ConfigError(f"{path}: {where}: {first['msg']}") from None


def is_met(criterion: Criterion | None, value: float | None, low: float | None, high: float | None, *,
           prevalence: float | None = None, gold_sd: float | None = None) -> bool | None:
    """Whether a figure meets its criterion: the part `judge` names, against the threshold in the direction. None
    when there is no criterion or the figure (or what the threshold needs) is undefined."""
    if criterion is None:
        return None
    part = {"low": low, "high": high, "value": value,
            "abs_value": None if value is None else abs(value)}[criterion.judge]
    threshold = prevalence if criterion.threshold == "prevalence" else criterion.threshold
    if criterion.scale == "gold_sd":
        threshold = None if gold_sd is None or threshold is None else threshold * gold_sd
    if part is None or threshold is None or math.isnan(part) or math.isnan(threshold):
        return None
    return part > threshold if criterion.direction == "above" else part < threshold


def check_inputs(protocol: Protocol, protocol_path: str, task: str, human: list[str], seeds: list[int] | None,
                 metrics: list[str] | None) -> list[str]:
    """Before the first step: the seeds and metrics asked are the protocol's, and every file the run reads exists
    (the task's data and human files, and `human`), each human file of the task. Returns the human files."""
    from larev.human.annotations import read_annotations

    if task not in protocol.tasks:
        raise ConfigError(f"{protocol_path}: no task {task!r} (it has {sorted(protocol.tasks)})")
    if seeds and len(set(seeds)) != len(seeds):
        raise ConfigError(f"seeds {seeds}: a seed is named twice")
    unknown_seeds = [s for s in seeds or [] if s not in protocol.seeds]
    if unknown_seeds:
        raise ConfigError(f"seeds {unknown_seeds} are not the protocol's ({protocol.seeds})")
    unknown = [m for m in metrics or [] if m not in protocol.scorers.metrics]
    if unknown:
        raise ConfigError(f"metrics {unknown} are not the protocol's ({protocol.scorers.metrics})")
    files = [*protocol.tasks[task].human, *human]
    missing = [f for f in [protocol.tasks[task].data, *files] if not Path(f).is_file()]
    if missing:
        raise ConfigError(f"{protocol_path}: file(s) not found from {Path.cwd()}: {missing}")
    stems = [Path(f).stem for f in files]
    if len(set(stems)) != len(stems):
        raise ConfigError(f"two human files share a name ({stems}): their results would be mixed; rename one")
    for path in files:
        if (found := read_annotations(path).task) != task:
            raise ConfigError(f"{path}: {found.upper()} annotations for the {task.upper()} protocol")
    return files


def check_beside_split(path: str | None, split: str) -> None:
    """`--beside` belongs to a report-split run: refused on any other split, before any file is looked for."""
    if path and split != "report":
        raise ConfigError(f"--beside {path}: only a report-split run is set beside a tune run (this is {split!r})")


def read_beside(path: str, digest: str, task: str, split: str) -> dict:
    """The tune run's results.json a report run is set beside (`--beside`): refused before any step unless this run
    is on the report split and the file is the tune split of the same protocol (`digest`, its sha256) and task."""
    import json

    check_beside_split(path, split)
    try:
        results = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(f"--beside {path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--beside {path}: not a results.json ({exc})") from None
    found = {k: results.get(k) if isinstance(results, dict) else None for k in ("protocol", "task", "split")}
    if found != {"protocol": digest, "task": task, "split": "tune"}:
        raise ConfigError(f"--beside {path}: expected the tune split of protocol {digest[:12]} on {task}, got "
                          f"{found['split']!r} of protocol {str(found['protocol'])[:12]} on {found['task']!r}")
    if results.get("partial"):
        raise ConfigError(f"--beside {path}: a partial tune run (not every seed, metric or row, or settings "
                          "overridden) decides nothing the report split may read")
    return results
