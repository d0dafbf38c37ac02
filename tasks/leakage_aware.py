"""LAREV's steps: IG leakage terms on phi_base, the baseline environments, the leakage probe, phi_LA; scored with
REV's estimator against the zero point of `larev.definition`."""

from __future__ import annotations

import polars as pl

import larev.methods.leakage_aware.config as la_config
import larev.methods.leakage_aware.instances as instances
from larev.config import ModelConfig, TrainConfig
from larev.formats import baseline_input
from larev.leakage.attribution import AttributionConfig
from larev.methods.leakage_aware.antonyms import AntonymConfig
from larev.methods.leakage_aware.config import LeakageAwareConfig
from larev.metrics.scores import CONTROL_PREFIX
from larev.methods.leakage_aware.environments import MASKED
from larev.methods.leakage_aware.instances import la_env_names, la_instances
from larev.schema import label_sets
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.runtime.cache import larev_task
from tasks.runtime.checkpoints import epoch_checkpoints
from tasks.metric import Metric, MetricOption, Run, Trained
from tasks.runtime.outputs import put_bytes, put_table
from tasks.rev import score_with_estimator, train_model
from tasks.training import (new_run_evaluator, put_evaluator, split_train_validation,
                            train_val_examples, training_frame)


@larev_task("leakage-terms", gpu=True)
def find_leakage_terms(store: ArtifactStore, phi_base: ArtifactRef, examples: ArtifactRef, baselines: ArtifactRef,
                       config: AttributionConfig, device: str = "auto",
                       progress: bool = True) -> dict[str, ArtifactRef]:
    """Integrated Gradients of phi_base's label log-likelihood over b (train and validation rows), then the span
    rule: every baseline's leakage spans (`terms`), the global word attribution table of the training rows
    (`tokens`) and a one-row `leakage_spans` summary (residual accuracy of a fresh probe before and after masking, the
    probe on x, chance, span recall, the growth steps)."""
    import json

    from larev.methods.leakage_aware.leakage_spans import find_baseline_spans
    from larev.models.evaluator import load_evaluator

    tr, val = split_train_validation(training_frame(store, examples, baselines))
    phi_b = load_evaluator(store.get_dir(phi_base.key), device=device)
    rows, table, summary = find_baseline_spans(phi_b, pl.concat([tr, val]), tr.height, config, progress=progress)
    summary = pl.DataFrame([{**summary, "steps": json.dumps(summary["steps"])}])
    return {"terms": put_table(store, "leakage_terms.parquet", rows),
            "tokens": put_table(store, "token_attributions.parquet", table),
            "leakage_spans": put_table(store, "leakage_summary.parquet", summary)}


@larev_task("environments")
def make_environments(store: ArtifactStore, examples: ArtifactRef, baselines: ArtifactRef, terms: ArtifactRef,
                      phi_base: ArtifactRef, config: AntonymConfig, progress: bool = True) -> ArtifactRef:
    """Every environment of larev/methods/leakage_aware/environments.py (E1 b, E2 leakage spans masked, E3 spans
    rewritten to another label) for every train/validation example, with the backend that built each."""
    from transformers import AutoTokenizer

    from larev.methods.leakage_aware.antonyms import make_generator
    from larev.methods.leakage_aware.environments import build_environments
    from larev.models.evaluator import mask_token_of
    from tasks.runtime.secrets import gemini_options

    df = training_frame(store, examples, baselines).join(
        store.read_parquet(terms.key).select("id", "term", "spans"), on="id", how="left")
    mask = mask_token_of(AutoTokenizer.from_pretrained(store.get_dir(phi_base.key)))
    generator = None
    if config.backend == "llm":
        generator = make_generator(config, **gemini_options(store))
    envs = build_environments(df.select("id", "task", "question", "choices", "label", "baseline", "term", "spans"),
                              mask, config, generator=generator, progress=progress)
    return put_table(store, "environments.parquet", envs)


def environment_frame(store: ArtifactStore, examples: ArtifactRef,
                      environments_ref: ArtifactRef) -> tuple[pl.DataFrame, list[str]]:
    """Train/validation examples with one column per environment (its text), and the environment names."""
    return instances.environment_frame(train_val_examples(store, examples), store.read_parquet(environments_ref.key))


@larev_task("probe", gpu=True)
def train_probe(store: ArtifactStore, phi: ArtifactRef, examples: ArtifactRef, environments_ref: ArtifactRef,
                train: TrainConfig, progress: bool = True) -> ArtifactRef:
    """psi (eq. 4.8): phi's copy with its encoder frozen; the decoder learns y from Enc_phi(b~), b~ the masked
    environment."""
    from larev.methods.leakage_aware.objective import probe_from
    from larev.models.evaluator import load_evaluator
    from larev.models.train import train_evaluator

    frame, _ = environment_frame(store, examples, environments_ref)
    tr, val = split_train_validation(frame)
    psi = probe_from(load_evaluator(store.get_dir(phi.key), device=train.device))
    with epoch_checkpoints(store, "probe", train.epochs) as checkpoints:
        train_evaluator(psi, [baseline_input(b) for b in tr[MASKED]], tr["label"].to_list(),
                        [baseline_input(b) for b in val[MASKED]], val["label"].to_list(), label_sets(val), train,
                        progress=progress, desc="probe", keep_eval=[psi.model.get_encoder()],
                        checkpointer=checkpoints, chance_is_expected=True)  # on masked b: chance is the aim
        return put_evaluator(store, "probe", psi, "probe")


@larev_task("train-la", task_run_name="train-{name}", gpu=True)
def train_phi_la(store: ArtifactStore, name: str, examples: ArtifactRef, environments_ref: ArtifactRef,
                 probe: ArtifactRef, tokenizer: ArtifactRef | None, model: ModelConfig, train: TrainConfig,
                 objective: LeakageAwareConfig, progress: bool = True,
                 start_from: ArtifactRef | None = None, min_steps: int = 0,
                 label_edits: str = "auto", la_start: str = "phi", exclusive_terms: str = "none") -> ArtifactRef:
    """phi_LA (eq. 4.10) trained on the environments with the IRM and probe terms (and, unless the objective is
    the thesis's, no-rationale instances and the borrowed-rationale term): a fresh model, or a copy of
    the evaluator `start_from` (REV's phi) when `la_start` (larev.la_start, resolved for the task) is 'phi';
    at least `min_steps` optimizer steps; `label_edits` (larev.label_edits) edits the label's own text in the
    environments too; `exclusive_terms` (larev.exclusive_terms, resolved) names the terms the objective's
    counterfactual rationales swap ('none': no counterfactuals)."""
    from larev.methods.leakage_aware.counterfactuals import exclusive_terms_named
    from larev.methods.leakage_aware.training import epochs_for_min_steps, train_leakage_aware
    from larev.models.evaluator import load_evaluator, mask_token_of

    terms = exclusive_terms_named(exclusive_terms)  # checked before any model loads
    objective = objective.resolved(model.backbone)  # resolved by the flow already; here for direct callers
    df, env_names = environment_frame(store, examples, environments_ref)
    task = df["task"][0]
    tr, val = split_train_validation(df)
    start = "fresh" if start_from is None else la_config.resolve_la_start(la_start, task)
    if start == "fresh":
        phi_la = new_run_evaluator(store, tokenizer, model, train.seed)
    else:
        phi_la = load_evaluator(store.get_dir(start_from.key), device=train.device)
    psi = load_evaluator(store.get_dir(probe.key), device=train.device)
    edits = {"label_edits": la_config.resolve_label_edits(label_edits, task),
             "mask_token": mask_token_of(psi.tokenizer),
             "empty_rationales": objective.empty_rationales, "borrowed": objective.lambda_borrowed > 0,
             "label_statements": objective.label_statements,
             "baseline_rationales": objective.baseline_rationales, "seed": train.seed}
    # the twins train only (validation's label sets are per row of `val`)
    twins = {"counterfactuals": objective.counterfactual_rationales if terms else 0.0, "exclusive_terms": terms}
    train_instances = la_instances(tr, env_names, **edits, **twins)
    train = epochs_for_min_steps(la_config.la_train_for(train, model.backbone), len(train_instances), min_steps,
                                 desc=name)
    with epoch_checkpoints(store, name, train.epochs) as checkpoints:
        train_leakage_aware(phi_la, psi, train_instances, la_instances(val, env_names, **edits),
                            label_sets(val), train, objective, task=task, progress=progress,
                            env_names=tuple(la_env_names(env_names, edits["label_edits"])), checkpointer=checkpoints)
        phi_la.meta["label_edits"], phi_la.meta["la_start"] = edits["label_edits"], start
        phi_la.meta["zero_rows"] = {"empty_rationales": edits["empty_rationales"], "borrowed": edits["borrowed"],
                                    "label_statements": edits["label_statements"],
                                    "baseline_rationales": edits["baseline_rationales"],
                                    "counterfactuals": len(train_instances) - tr.height if terms else 0,
                                    "exclusive_terms": exclusive_terms if terms else "none"}
        return put_evaluator(store, name, phi_la, name)


def larev_definition(run: Run) -> str:
    """The run's `larev.definition`, concrete: a training run's resolved for its data's task and backbone
    ('auto', la_config.resolve_definition); a finished run's as its run.json records it (resolved when it was
    written; a run made before the definition existed trained the thesis's phi_LA)."""
    if run.params is not None:
        return la_config.resolve_definition(run.params.larev.definition, run.task, run.params.model.backbone)
    saved = run.saved_params or {}
    definition = saved.get("larev", {}).get("definition", "thesis")
    backbone = saved.get("model", {}).get("backbone", "embedded")
    return la_config.resolve_definition(definition, run.task, backbone) if definition == "auto" else definition


def larev_zero(run: Run) -> str:
    """The zero point LAREV's scores are read against: the run's definition's (`larev_definition`)."""
    return la_config.zero_point(larev_definition(run))


def is_phi_la(name: str) -> bool:
    """Whether a run's model is one of LAREV's phi_LA: `larev` or an ablation's `larev_<ablation>`."""
    return name == "larev" or name.startswith("larev_")


LA_EPOCHS_HELP = ("phi_LA epochs (more on a small training set, to reach larev.la_min_steps optimizer steps; "
                  "--set larev.la_min_steps=0 trains exactly these)")


@larev_task("report-larev")
def write_larev_report(store: ArtifactStore, tables: dict[str, ArtifactRef],
                       phi_las: dict[str, ArtifactRef]) -> ArtifactRef:
    """LAREV's section of the run's report.md: the top IG words, the leakage spans and their residual check, who
    built each environment, and each phi_LA's losses (larev/methods/leakage_aware/report.py)."""
    import json

    from larev.methods.leakage_aware.report import larev_diagnostics
    from larev.models.evaluator import LAREV_CONFIG_FILE

    read = {k: store.read_parquet(v.key) for k, v in tables.items()}
    meta = {name: json.loads((store.get_dir(ref.key) / LAREV_CONFIG_FILE).read_text())["meta"]
            for name, ref in phi_las.items()}
    markdown = larev_diagnostics(read.get("tokens"), read.get("terms"), read.get("environments"), meta,
                                 leakage=read.get("leakage_spans"))
    return put_bytes(store, "report_section.md", markdown.encode(), kind="text")


class LeakageAware(Metric):
    """LAREV: phi_LA (and its ablations, `larev_<ablation>`), scored with REV's estimator against REV's phi_base;
    with `larev.controls`, the controls (`control_<name>`) scored the same way: erm_envs (the erm_envs ablation's
    phi_LA), phi (REV's phi in phi_LA's place) and r_only (an evaluator trained on r alone)."""

    name = "larev"
    section = "larev"
    options = la_config.LarevConfig
    description = "LAREV's leakage-aware evaluator"
    controls = la_config.CONTROLS
    cli_options = (
        MetricOption("--no-larev", "enabled", const=False, help="REV only: skip LAREV's steps"),
        MetricOption("--lambda-irm", "objective.lambda_irm"),
        MetricOption("--lambda-probe", "objective.lambda_probe"),
        MetricOption("--irm-on", "objective.irm_on"),
        MetricOption("--ablations", "ablations"),
        MetricOption("--antonyms", "antonyms.backend"),
        MetricOption("--ig-steps", "attribution.n_steps"),
        MetricOption("--la-epochs", "la_train.epochs", help=LA_EPOCHS_HELP),
    )

    @staticmethod
    def model_names(models: dict[str, ArtifactRef]) -> list[str]:
        """The models scored with LAREV's estimator among a run's models: `larev`, `larev_<ablation>` and the
        controls, `control_<name>`."""
        return [k for k in models if is_phi_la(k) or k.startswith(CONTROL_PREFIX)]

    def train(self, run: Run, models: dict[str, ArtifactRef]) -> Trained:
        cfg, steps, definition = run.params.larev, run.steps, larev_definition(run)
        terms = steps.run(find_leakage_terms, models["phi_base"], run.examples, run.baselines, cfg.attribution,
                          run.device)
        envs = steps.run(make_environments, run.examples, run.baselines, terms["terms"], models["phi_base"],
                         cfg.antonyms)
        probe = steps.run(train_probe, models["phi"], run.examples, envs, cfg.probe_train)
        min_steps = la_config.resolve_la_min_steps(cfg.la_min_steps, definition, run.params.model.backbone)
        exclusive_terms = la_config.resolve_exclusive_terms(cfg.exclusive_terms, run.params.data.source)
        la_model = self.la_model(run)

        def trained_phi_la(ablation: str | None) -> ArtifactRef:
            name = "larev" if ablation is None else f"larev_{ablation}"
            return steps.run(train_phi_la, name, run.examples, envs, probe, run.tokenizer, la_model,
                             cfg.la_train, cfg.objective_for(ablation, definition, run.params.model.backbone),
                             step_label=f"train-{name}",
                             start_from=None if cfg.la_start == "fresh" else models["phi"],
                             min_steps=min_steps, label_edits=cfg.label_edits, la_start=cfg.la_start,
                             exclusive_terms=exclusive_terms)

        phi_las = {"larev" if a is None else f"larev_{a}": trained_phi_la(a) for a in [None, *cfg.ablations]}
        controls = {}
        if "erm_envs" in cfg.controls:  # the erm_envs ablation's phi_LA (the same step when both are asked)
            controls[CONTROL_PREFIX + "erm_envs"] = phi_las.get("larev_erm_envs") or trained_phi_la("erm_envs")
        if "phi" in cfg.controls:
            controls[CONTROL_PREFIX + "phi"] = models["phi"]
        if "r_only" in cfg.controls:
            controls[CONTROL_PREFIX + "r_only"] = steps.run(train_model, "r_only", run.examples, run.baselines,
                                                            run.tokenizer, run.params.model, run.params.train,
                                                            step_label="train-r_only")
        return Trained(models={**phi_las, **controls, "probe": probe}, tables={**terms, "environments": envs})

    @staticmethod
    def la_model(run: Run) -> ModelConfig:
        """The model config phi_LA is built from: with larev.la_dropout resolved for a fresh phi_LA (la_start
        fresh); a phi_LA started from phi keeps phi's."""
        cfg = run.params.larev
        fresh = la_config.resolve_la_start(cfg.la_start, run.task) == "fresh"
        return la_config.la_model_for(run.params.model, cfg.la_dropout) if fresh else run.params.model

    def recorded_options(self, run: Run) -> dict:
        """The larev section as the run used it: `definition` with 'auto' resolved, the objective with its unset
        zero-term settings resolved for the backbone (`LeakageAwareConfig.resolved`), phi_LA's dropout and the
        exclusive terms resolved."""
        cfg = run.params.larev
        return {**cfg.model_dump(mode="json"), "definition": larev_definition(run),
                "la_dropout": self.la_model(run).dropout,
                "exclusive_terms": la_config.resolve_exclusive_terms(cfg.exclusive_terms, run.params.data.source),
                "objective": cfg.objective.resolved(run.params.model.backbone).model_dump(mode="json")}

    def report_section(self, run: Run, trained: Trained) -> ArtifactRef:
        phi_las = {k: v for k, v in trained.models.items() if is_phi_la(k)}
        return run.steps.run(write_larev_report, trained.tables, phi_las)

    def trained(self, models: dict[str, ArtifactRef]) -> bool:
        return bool(self.model_names(models)) and "phi_base" in models

    def score(self, run: Run, models: dict[str, ArtifactRef],
              rationales: ArtifactRef | list[ArtifactRef]) -> list[ArtifactRef]:
        """Every model of `model_names` with REV's estimator, read against `larev.definition`'s zero point: the
        model's own reading of no rationale ('new_information'), or phi_base on b ('thesis')."""
        zero = larev_zero(run)
        return [score_with_estimator(run, name, models[name], models["phi_base"], rationales, zero=zero)
                for name in self.model_names(models)]

    def bench_summary(self, artifacts: dict, store) -> dict | None:
        from larev.methods.leakage_aware.bench import larev_bench_summary

        return larev_bench_summary(artifacts, store)

    def bench_markdown(self, summary: dict) -> list[str]:
        from larev.methods.leakage_aware.bench import larev_bench_lines

        return larev_bench_lines(summary)
