"""LAREV's steps: IG leakage terms on phi_base, the baseline environments, the leakage probe, phi_LA; scored with
REV's estimator (thesis eq. 4.4). The no-rationale-reference metric (`larev_vs_empty`) shares the first three."""

from __future__ import annotations

import polars as pl

import larev.methods.leakage_aware.config as la_config
import larev.methods.leakage_aware.instances as instances
from larev.config import ModelConfig, TrainConfig
from larev.errors import ConfigError
from larev.formats import baseline_input
from larev.leakage.attribution import AttributionConfig
from larev.methods.leakage_aware.antonyms import AntonymConfig
from larev.methods.leakage_aware.config import LeakageAwareConfig
from larev.metrics.scores import CONTROL_PREFIX
from larev.schema import label_sets
from larev.methods.leakage_aware.environments import MASKED
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.runtime.cache import larev_task
from tasks.runtime.checkpoints import epoch_checkpoints
from tasks.metric import Metric, MetricOption, Run, Trained
from tasks.runtime.outputs import put_bytes, put_table
from tasks.rev import relabel_scores, score_with_estimator, train_model
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
                 label_edits: str = "none", exclusive_terms: str = "none") -> ArtifactRef:
    """phi_LA (eq. 4.10) trained on the environments with the IRM and probe terms (and the zero terms where the
    objective has them): a fresh model, or a copy of the evaluator `start_from` (REV's phi); at least `min_steps`
    optimizer steps; `label_edits` edits the label's own text in the environments too; `exclusive_terms` names the
    terms the objective's counterfactual rationales swap ('none': no counterfactuals). Every setting arrives
    resolved (larev/presets.py); the training itself is larev/methods/leakage_aware/fit.py."""
    from larev.methods.leakage_aware.fit import fit_phi_la, phi_la_plan
    from larev.models.evaluator import load_evaluator, mask_token_of

    frame, env_names = environment_frame(store, examples, environments_ref)
    if start_from is None:
        phi_la = new_run_evaluator(store, tokenizer, model, train.seed)
    else:
        phi_la = load_evaluator(store.get_dir(start_from.key), device=train.device)
    psi = load_evaluator(store.get_dir(probe.key), device=train.device)
    plan = phi_la_plan(frame, env_names, train, objective, min_steps=min_steps, label_edits=label_edits,
                       exclusive_terms=exclusive_terms, mask_token=mask_token_of(psi.tokenizer), desc=name)
    with epoch_checkpoints(store, name, plan.train.epochs) as checkpoints:
        fit_phi_la(phi_la, psi, plan, objective, progress=progress, checkpointer=checkpoints, desc=name)
        phi_la.meta["la_start"] = "fresh" if start_from is None else "phi"
        return put_evaluator(store, name, phi_la, name)


def is_phi_la(name: str) -> bool:
    """Whether a run's model is one of LAREV's phi_LA: `larev` or an ablation's `larev_<ablation>`."""
    return name == "larev" or (name.startswith("larev_") and name[len("larev_"):] in la_config.ABLATIONS)


LA_EPOCHS_HELP = ("phi_LA epochs (more on a small training set, to reach larev.la_min_steps optimizer steps; "
                  "--set larev.la_min_steps=0 trains exactly these)")


@larev_task("report-larev")
def write_larev_report(store: ArtifactStore, tables: dict[str, ArtifactRef],
                       phi_las: dict[str, ArtifactRef]) -> ArtifactRef:
    """LAREV's section of the run's report.md: the top IG words, the leakage spans and their residual check, who
    built each environment, and each phi_LA's losses (larev/methods/leakage_aware/report.py)."""
    from larev.methods.leakage_aware.report import larev_diagnostics

    read = {k: store.read_parquet(v.key) for k, v in tables.items()}
    meta = {name: saved_meta(store, ref) for name, ref in phi_las.items()}
    markdown = larev_diagnostics(read.get("tokens"), read.get("terms"), read.get("environments"), meta,
                                 leakage=read.get("leakage_spans"))
    return put_bytes(store, "report_section.md", markdown.encode(), kind="text")


def leakage_environments(run: Run, models: dict[str, ArtifactRef]) -> tuple[dict[str, ArtifactRef], ArtifactRef,
                                                                              ArtifactRef]:
    """The steps LAREV and larev_vs_empty share, with `larev`'s settings: IG leakage terms on phi_base (their
    tables), the baseline environments and the leakage probe. Cached: the second metric reuses the first's."""
    cfg, steps = run.params.larev, run.steps
    terms = steps.run(find_leakage_terms, models["phi_base"], run.examples, run.baselines, cfg.attribution, run.device)
    envs = steps.run(make_environments, run.examples, run.baselines, terms["terms"], models["phi_base"], cfg.antonyms)
    probe = steps.run(train_probe, models["phi"], run.examples, envs, cfg.probe_train)
    return terms, envs, probe


def train_la(run: Run, models: dict[str, ArtifactRef], name: str, envs: ArtifactRef, probe: ArtifactRef,
             objective: LeakageAwareConfig, min_steps: int, exclusive_terms: str = "none") -> ArtifactRef:
    """One phi_LA named `name` on the run's environments, with `larev`'s resolved start, dropout, training and
    label edits: a fresh model (dropout larev.la_dropout) or REV's phi (larev.la_start phi)."""
    cfg = run.params.larev
    from_phi = cfg.la_start == "phi"
    model = run.params.model if from_phi else la_config.la_model_for(run.params.model, cfg.la_dropout)
    return run.steps.run(train_phi_la, name, run.examples, envs, probe, run.tokenizer, model, cfg.la_train, objective,
                         step_label=f"train-{name}", start_from=models["phi"] if from_phi else None,
                         min_steps=min_steps, label_edits=cfg.label_edits, exclusive_terms=exclusive_terms)


@larev_task("report-larev_vs_empty")
def write_larev_vs_empty_report(store: ArtifactStore, phi_la: ArtifactRef) -> ArtifactRef:
    """larev_vs_empty's section of report.md (larev/methods/leakage_aware/report.py): its definition, zero terms
    and phi_LA's epochs."""
    from larev.methods.leakage_aware.report import larev_vs_empty_diagnostics

    markdown = larev_vs_empty_diagnostics(saved_meta(store, phi_la))
    return put_bytes(store, "report_section.md", markdown.encode(), kind="text")


def saved_meta(store: ArtifactStore, evaluator: ArtifactRef) -> dict:
    """What a saved evaluator's training recorded (its larev config file's `meta`: losses, objective, rows)."""
    import json

    from larev.models.evaluator import LAREV_CONFIG_FILE

    return json.loads((store.get_dir(evaluator.key) / LAREV_CONFIG_FILE).read_text())["meta"]


class LeakageAware(Metric):
    """LAREV (thesis eq. 4.4): phi_LA (and its ablations, `larev_<ablation>`), scored with REV's estimator against
    REV's phi_base; with `larev.controls`, the controls (`control_<name>`) scored the same way: erm_envs (the erm_envs
    ablation's phi_LA), phi (REV's phi in phi_LA's place) and r_only (an evaluator trained on r alone)."""

    name = "larev"
    section = "larev"
    options = la_config.LarevConfig
    description = "LAREV (thesis eq. 4.4): the leakage-aware evaluator phi_LA against REV's phi_base"
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
        cfg = run.params.larev
        terms, envs, probe = leakage_environments(run, models)

        trained: list[tuple[LeakageAwareConfig, ArtifactRef]] = []  # (objective, phi_LA) of each one trained so far

        def trained_phi_la(ablation: str | None) -> ArtifactRef:
            """The phi_LA of an ablation; one whose objective equals one trained already (an ablation that sets
            a weight the defaults have at 0 already) is that model, not a second training."""
            name = "larev" if ablation is None else f"larev_{ablation}"
            objective = cfg.objective_for(ablation, run.task)
            same = next((ref for seen, ref in trained if seen == objective), None)
            if same is not None:
                return same
            trained.append((objective, train_la(run, models, name, envs, probe, objective, cfg.la_min_steps)))
            return trained[-1][1]

        phi_las = {"larev" if a is None else f"larev_{a}": trained_phi_la(a) for a in [None, *cfg.ablations]}
        controls = {}
        if "erm_envs" in cfg.controls:  # the erm_envs ablation's phi_LA (the same step when both are asked)
            controls[CONTROL_PREFIX + "erm_envs"] = phi_las.get("larev_erm_envs") or trained_phi_la("erm_envs")
        if "phi" in cfg.controls:
            controls[CONTROL_PREFIX + "phi"] = models["phi"]
        if "r_only" in cfg.controls:
            controls[CONTROL_PREFIX + "r_only"] = run.steps.run(train_model, "r_only", run.examples, run.baselines,
                                                                run.tokenizer, run.params.model, run.params.train,
                                                                step_label="train-r_only")
        return Trained(models={**phi_las, **controls, "probe": probe}, tables={**terms, "environments": envs})

    def row_names(self, models: dict[str, ArtifactRef]) -> list[str]:
        return self.model_names(models)

    def report_section(self, run: Run, trained: Trained) -> ArtifactRef:
        phi_las = {k: v for k, v in trained.models.items() if is_phi_la(k)}
        return run.steps.run(write_larev_report, trained.tables, phi_las)

    def trained(self, models: dict[str, ArtifactRef]) -> bool:
        return bool(self.model_names(models)) and "phi_base" in models

    def score(self, run: Run, models: dict[str, ArtifactRef],
              rationales: ArtifactRef | list[ArtifactRef]) -> list[ArtifactRef]:
        """Every model of `model_names` with REV's estimator against phi_base on b (eq. 4.4). A finished run whose
        run.json records another `larev.definition` (made before larev_vs_empty was a metric of its own) trained
        its phi_LA for another formula: refused, naming what to do."""
        saved = (run.saved_params or {}).get("larev", {}) if run.params is None else {}
        if saved.get("definition", "thesis") != "thesis":
            raise ConfigError(f"this run's LAREV phi_LA was trained under larev.definition={saved['definition']}, "
                              "which is the metric larev_vs_empty now; `larev` is eq. 4.4 with the thesis's phi_LA. "
                              "Run the pipeline again (larev run ..., --larev-vs-empty for the other) to score with it")
        scored: dict[ArtifactRef, ArtifactRef] = {}  # model -> its score table, for names that share a model
        out = []
        for name in self.model_names(models):
            model = models[name]
            if model in scored:  # an ablation or control that is the same phi_LA: its rows, relabelled
                out.append(run.steps.run(relabel_scores, scored[model], name, step_label=f"{run.label}score-{name}"))
                continue
            scored[model] = score_with_estimator(run, name, model, models["phi_base"], rationales, zero="base")
            out.append(scored[model])
        return out

    def bench_summary(self, artifacts: dict, store) -> dict | None:
        from larev.methods.leakage_aware.bench import larev_bench_summary

        return larev_bench_summary(artifacts, store)

    def bench_markdown(self, summary: dict) -> list[str]:
        from larev.methods.leakage_aware.bench import larev_bench_lines

        return larev_bench_lines(summary)


class LarevVsEmpty(Metric):
    """larev_vs_empty: log p_LA(y | r, b) - log p_LA(y | empty, b), its phi_LA trained on LAREV's environments with
    eq. 4.10's terms and the zero terms (no-rationale rows, the borrowed-rationale term, label statements, baselines
    as rationales): a rationale that says nothing about the instance should score about 0. Off unless asked for;
    it reads `larev`'s settings for the shared steps."""

    name = "larev_vs_empty"
    section = "larev_vs_empty"
    options = la_config.LarevVsEmptyConfig
    description = ("larev_vs_empty: LAREV's estimator against phi_LA's own reading of no rationale, phi_LA trained "
                   "with the zero terms (off unless asked for)")
    cli_options = (MetricOption("--larev-vs-empty", "enabled", const=True,
                                help="also train and score larev_vs_empty (the no-rationale-reference metric)"),)

    def signature_sections(self) -> tuple[str, ...]:
        return ("larev", self.section)  # the shared steps and phi_LA's eq. 4.10 terms come from `larev`

    def train(self, run: Run, models: dict[str, ArtifactRef]) -> Trained:
        own = run.params.larev_vs_empty
        _, envs, probe = leakage_environments(run, models)
        phi_la = train_la(run, models, self.name, envs, probe, own.objective(run.params.larev), own.la_min_steps,
                          exclusive_terms=own.exclusive_terms)
        return Trained(models={self.name: phi_la})

    def report_section(self, run: Run, trained: Trained) -> ArtifactRef:
        return run.steps.run(write_larev_vs_empty_report, trained.models[self.name])

    def trained(self, models: dict[str, ArtifactRef]) -> bool:
        return self.name in models and "phi_base" in models

    def score(self, run: Run, models: dict[str, ArtifactRef],
              rationales: ArtifactRef | list[ArtifactRef]) -> list[ArtifactRef]:
        return [score_with_estimator(run, self.name, models[self.name], models["phi_base"], rationales,
                                     zero="empty")]
