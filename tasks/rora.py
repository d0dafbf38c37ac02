"""RORA's steps (paper section 3): per rationale source with training rationales, the rationale-only model, its
leaky spans, the counterfactual infiller, the counterfactual environments and Phi (IRM); theta on x alone; the
score step (eq. 10)."""

from __future__ import annotations

import tempfile

import polars as pl

import larev.data.variants as variants
import larev.methods.rora.environments as rora_envs
from larev.config import ModelConfig, ScoreConfig, TrainConfig
from larev.leakage.rationale_model import RationaleModelConfig
from larev.leakage.spans import LeakageDetectionConfig
from larev.methods.leakage_aware.config import LeakageAwareConfig
from larev.methods.rora.config import RoraConfig, training_sources
from larev.methods.rora.infill import InfillerConfig
from larev.schema import label_sets
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.runtime.cache import larev_task
from tasks.runtime.checkpoints import epoch_checkpoints
from tasks.metric import Metric, MetricOption, Run, Trained
from tasks.runtime.outputs import put_bytes, put_dir, put_table
from tasks.training import (load_tokenizer, new_run_evaluator, put_evaluator, source_frame,
                            split_train_validation, train_input_model, train_val_examples)


@larev_task("training-rationales")
def make_training_rationales(store: ArtifactStore, examples: ArtifactRef, baselines: ArtifactRef,
                             sources: list[str]) -> ArtifactRef:
    """The train/validation split's rationales of every source RORA trains on (the built-in variants)."""
    ex = train_val_examples(store, examples)
    b = store.read_parquet(baselines.key)
    out = variants.make_variants(ex, b.filter(pl.col("id").is_in(ex["id"].implode())), tuple(sources))
    return put_table(store, "training_rationales.parquet", out)


@larev_task("rationale-model", task_run_name="rationale-model-{source}")
def train_rationale_only(store: ArtifactStore, source: str, examples: ArtifactRef, training_rationales: ArtifactRef,
                         config: RationaleModelConfig, progress: bool = True) -> ArtifactRef:
    """Phi_small (RORA 3.1): predicts the label from the source's training rationales alone."""
    from larev.leakage.rationale_model import save_rationale_model, train_rationale_model

    tr, _ = split_train_validation(source_frame(store, examples, training_rationales, source))
    model = train_rationale_model(tr["rationale"].to_list(), tr["label"].to_list(), label_sets(tr), config,
                                  progress=progress)
    with tempfile.TemporaryDirectory() as tmp:
        save_rationale_model(model, tmp)
        return put_dir(store, "rationale_model", tmp)


@larev_task("leaky-spans", task_run_name="leaky-spans-{source}")
def find_leaky_spans(store: ArtifactStore, source: str, rationale_model: ArtifactRef, examples: ArtifactRef,
                     training_rationales: ArtifactRef, config: LeakageDetectionConfig,
                     progress: bool = True) -> dict[str, ArtifactRef]:
    """IG of Phi_small over the training rationales: the global word attribution table (`words`), the leaky
    spans of every train/validation rationale (`spans`: the span rule by default, RORA 3.1's threshold with
    rule='threshold'), and a one-row `summary` with the residual leakage: the validation accuracy of a fresh
    probe trained on the masked rationales (beside chance and the unmasked model's accuracy) and, for the span
    rule, on (x, masked r) against the same probe on x (residual_gain). The sentinels stay in the masked text, so
    where and how many spans were masked counts as information left over."""
    from larev.formats import task_inputs
    from larev.leakage.probe import residual_leakage
    from larev.leakage.rationale_model import accuracy_of, load_rationale_model
    from larev.leakage.spans import detect_leakage, detect_leakage_spans
    from larev.stats import chance_level
    from larev.methods.rora.infill import mask_spans

    df = source_frame(store, examples, training_rationales, source)
    model = load_rationale_model(store.get_dir(rationale_model.key))
    # the global attribution comes from the training split only; its leaky words then mark validation rows too
    tr, val = split_train_validation(df)
    ordered = pl.concat([tr, val])
    cands = label_sets(ordered)
    labels, rationales, n = ordered["label"].to_list(), ordered["rationale"].to_list(), tr.height
    chance = chance_level(cands[n:]) if len(cands) > n else float("nan")
    if config.rule == "spans":
        table, per_row, found = detect_leakage_spans(model, rationales, labels, cands, task_inputs(ordered), n, config,
                                                     lambda text, spans: mask_spans(text, spans)[0],
                                                     progress=progress)
        extra = {k: found[k] for k in ("accuracy_x", "accuracy_x_masked", "residual_gain", "converged")}
        masked_accuracy = found["accuracy_masked"]
    else:
        table, per_row = detect_leakage(model, rationales, labels, cands, config, progress=progress, n_global=n)
        masked = [mask_spans(r, s)[0] for r, s in zip(rationales, per_row["spans"].to_list())]
        masked_accuracy = residual_leakage(masked[:n], labels[:n], cands[:n], masked[n:], labels[n:], cands[n:],
                                           config.model)
        extra = {}
    per_row = per_row.drop("row").insert_column(0, ordered["id"])
    # how much label information is left once the spans are masked, and how much there was
    summary = pl.DataFrame([{
        "source": source, "rule": config.rule, "threshold": config.threshold, "leaky_words": int(table["leaky"].sum()),
        "with_spans": float((per_row["span_source"] != "none").mean()),
        "by_fallback": float((per_row["span_source"] == "fallback").mean()), "chance": chance,
        "accuracy_unmasked": accuracy_of(model, rationales[n:], labels[n:], cands[n:]),
        "accuracy_masked": masked_accuracy, **extra}])
    return {"words": put_table(store, "word_attributions.parquet", table),
            "spans": put_table(store, "leaky_spans.parquet", per_row),
            "summary": put_table(store, "leakage_summary.parquet", summary)}


def spans_frame(store: ArtifactStore, examples: ArtifactRef, training_rationales: ArtifactRef, source: str,
                spans: ArtifactRef) -> pl.DataFrame:
    df = source_frame(store, examples, training_rationales, source)
    return df.join(store.read_parquet(spans.key).select("id", "spans"), on="id", how="inner")


def new_infiller(store: ArtifactStore, tokenizer: ArtifactRef | None, model: ModelConfig, config: InfillerConfig,
                 seed: int):
    """A fresh seq2seq model whose tokenizer has the sentinels (added to the embedded tokenizer; T5 checkpoints
    have them; other checkpoints get them added and their embeddings resized)."""
    from larev.methods.rora.infill import with_sentinels
    from larev.models.evaluator import new_evaluator
    from larev.models.pretrained import resize_vocabulary

    model = model.model_copy(update={"max_target_tokens": max(model.max_target_tokens, config.max_new_tokens)})
    if model.backbone == "embedded":
        tok = load_tokenizer(store, tokenizer)
        with_sentinels(tok, config.max_spans)
        return new_evaluator(model, tokenizer=tok, seed=seed)
    ev = new_evaluator(model, seed=seed)
    if with_sentinels(ev.tokenizer, config.max_spans):
        resize_vocabulary(ev.model, len(ev.tokenizer), seed)
    return ev


@larev_task("infiller", task_run_name="infiller-{source}", gpu=True)
def train_infiller(store: ArtifactStore, source: str, examples: ArtifactRef, training_rationales: ArtifactRef,
                   spans: ArtifactRef, tokenizer: ArtifactRef | None, model: ModelConfig, config: InfillerConfig,
                   progress: bool = True) -> ArtifactRef | None:
    """The label-conditioned infiller (RORA 3.2); None when no training rationale has a leaky span."""
    from larev.models.train import train_evaluator

    df = spans_frame(store, examples, training_rationales, source, spans)
    tr, val = split_train_validation(df)
    pairs_tr = rora_envs.infill_examples(tr, tr["spans"].to_list(), config.max_spans)
    if pairs_tr.is_empty():
        return None
    pairs_val = rora_envs.infill_examples(val, val["spans"].to_list(), config.max_spans)
    ev = new_infiller(store, tokenizer, model, config, config.train.seed)
    with epoch_checkpoints(store, "infiller", config.train.epochs, f"infiller[{source}]") as checkpoints:
        train_evaluator(ev, pairs_tr["input"].to_list(), pairs_tr["target"].to_list(), pairs_val["input"].to_list(),
                        pairs_val["target"].to_list(), [[t] for t in pairs_val["target"]], config.train,
                        progress=progress, desc=f"infiller[{source}]", checkpointer=checkpoints)
        return put_evaluator(store, "infiller", ev, f"infiller-{source}")


@larev_task("counterfactuals", task_run_name="counterfactuals-{source}", gpu=True)
def make_counterfactuals(store: ArtifactStore, source: str, infiller_ref: ArtifactRef | None, examples: ArtifactRef,
                         training_rationales: ArtifactRef, spans: ArtifactRef, config: InfillerConfig,
                         device: str = "auto", progress: bool = True) -> ArtifactRef:
    """D^e for every label e: id, env, env_label, rationale (counterfactual), n_spans, n_missing."""
    from larev.methods.rora.infill import generate_fills
    from larev.models.evaluator import load_evaluator

    df = spans_frame(store, examples, training_rationales, source, spans)
    requests = rora_envs.counterfactual_requests(df, df["spans"].to_list(), config.max_spans)
    if infiller_ref is None:
        fills = [[] for _ in range(requests.height)]
    else:
        ev = load_evaluator(store.get_dir(infiller_ref.key), device=device)
        fills = generate_fills(ev, requests["input"].to_list(), requests["n_spans"].to_list(), config,
                               progress=progress, desc=f"counterfactuals[{source}]")
    texts, missing = rora_envs.rebuild_all(requests["masked"].to_list(), fills)
    ids = df["id"].to_list()
    out = requests.select("env", "env_label", "n_spans").with_columns(
        id=pl.Series([ids[i] for i in requests["row"]]), rationale=pl.Series(texts, dtype=pl.String),
        n_missing=pl.Series(missing, dtype=pl.Int64))
    return put_table(store, "counterfactuals.parquet", out.select("id", "env", "env_label", "rationale", "n_spans",
                                                                  "n_missing"))


@larev_task("train-rora", task_run_name="train-rora-{source}", gpu=True)
def train_rora_phi(store: ArtifactStore, source: str, examples: ArtifactRef, training_rationales: ArtifactRef,
                   counterfactuals: ArtifactRef, tokenizer: ArtifactRef | None, model: ModelConfig,
                   train: TrainConfig, objective: LeakageAwareConfig, progress: bool = True) -> ArtifactRef:
    """Phi (RORA eq. 8): ERM over the environments D^e plus lambda * the per-environment IRMv1 penalty."""
    from larev.methods.leakage_aware.training import train_leakage_aware

    df = source_frame(store, examples, training_rationales, source)
    cf = store.read_parquet(counterfactuals.key).sort("env")
    by_id = cf.group_by("id", maintain_order=True).agg(pl.col("rationale"))
    df = df.join(by_id.rename({"rationale": "envs"}), on="id", how="inner")
    n_env = int(cf["env"].max()) + 1
    tr, val = split_train_validation(df)
    phi = new_run_evaluator(store, tokenizer, model, train.seed)
    with epoch_checkpoints(store, "rora_phi", train.epochs, f"rora[{source}]") as checkpoints:
        train_leakage_aware(phi, None, rora_envs.rora_instances(tr, tr["envs"].to_list(), n_env),
                            rora_envs.rora_instances(val, val["envs"].to_list(), n_env), label_sets(val), train,
                            objective, task=df["task"][0], progress=progress,
                            env_names=rora_envs.environment_names(n_env), desc=f"rora[{source}]",
                            checkpointer=checkpoints, settings="rora.phi_train", irm_option="--rora-lambda")
        return put_evaluator(store, "rora_phi", phi, f"rora-{source}")


def by_model_source(rationales: pl.DataFrame, trained: list[str]):
    """Rationale rows grouped by the source whose models score them."""
    from larev.methods.rora.config import model_source

    owner = {source: model_source(source, trained) for source in rationales["source"].unique()}
    keyed = rationales.with_columns(model_source=pl.col("source").replace_strict(owner))
    for (source,), part in keyed.group_by("model_source", maintain_order=True):
        yield source, part.drop("model_source")


@larev_task("score-rora")
def score_rora(store: ArtifactStore, phis: dict[str, ArtifactRef], theta: ArtifactRef, rationales: ArtifactRef,
               examples: ArtifactRef, score: ScoreConfig, device: str = "auto", progress: bool = True) -> ArtifactRef:
    """RORA eq. 10 for every rationale, each source scored by its own Phi (gold's for sources without one)."""
    from larev.metrics.rora import score_rora as score_fn
    from larev.models.evaluator import load_evaluator

    ex = store.read_parquet(examples.key)
    th = load_evaluator(store.get_dir(theta.key), device=device)
    frames = []
    for model_source, part in by_model_source(store.read_parquet(rationales.key), list(phis)):
        phi = load_evaluator(store.get_dir(phis[model_source].key), device=device)
        frames.append(score_fn(phi, th, part, ex, score, progress=progress))
    return put_table(store, "scores.parquet", pl.concat(frames))


def per_source(models: dict[str, ArtifactRef], kind: str) -> dict[str, ArtifactRef]:
    """A run's per-source models of one kind (`rora_phi`, `rationale_model`, `proxy`, ...), keyed by source."""
    return {k.split(":", 1)[1]: v for k, v in models.items() if k.startswith(f"{kind}:")}


@larev_task("report-rora")
def write_rora_report(store: ArtifactStore, tables: dict[str, ArtifactRef]) -> ArtifactRef:
    """RORA's section of the run's report.md: per training source the leaky words, how many training rationales
    had spans, what a probe still reads with the spans masked (residual leakage against chance and x alone), how
    often the counterfactuals differ between labels (larev/methods/rora/report.py)."""
    from larev.methods.rora.report import rora_diagnostics

    markdown = rora_diagnostics({k: store.read_parquet(v.key) for k, v in tables.items()})
    return put_bytes(store, "report_section.md", markdown.encode(), kind="text")


class Rora(Metric):
    """RORA: per training source the rationale-only model, leaky spans, infiller, counterfactuals and Phi; theta on
    x alone (shared with RQ / LAS); scored with eq. 10. Model keys: theta, training_rationales, rora_phi:<source>,
    rationale_model:<source>, infiller:<source>."""

    name = "rora"
    section = "rora"
    options = RoraConfig
    description = "RORA's evaluator and the RQ / LAS baselines"
    cli_options = (
        MetricOption("--no-rora", "enabled", const=False, help="skip RORA, RQ and LAS"),
        MetricOption("--rora-train-on", "train_on"),
        MetricOption("--rora-lambda", "objective.lambda_irm", help="RORA: IRM weight of Phi"),
        MetricOption("--rora-threshold", "detection.threshold"),
    )

    def train(self, run: Run, models: dict[str, ArtifactRef]) -> Trained:
        p, steps = run.params, run.steps
        cfg = p.rora
        sources = cfg.sources(p.variants)
        training = steps.run(make_training_rationales, run.examples, run.baselines, training_sources(p.variants))
        theta = steps.run(train_input_model, "theta", run.examples, None, None, run.tokenizer, p.model, p.train,
                          step_label="train-theta")
        out = {"theta": theta, "training_rationales": training}
        tables: dict[str, ArtifactRef] = {}

        def chain(source: str) -> tuple[dict[str, ArtifactRef], dict[str, ArtifactRef]]:
            """One source's rationale-only model, leaky spans, infiller, counterfactuals and Phi."""
            small = steps.run(train_rationale_only, source, run.examples, training, cfg.detection.model,
                              step_label=f"rationale-model-{source}")
            spans = steps.run(find_leaky_spans, source, small, run.examples, training, cfg.detection,
                              step_label=f"leaky-spans-{source}")
            infiller = steps.run(train_infiller, source, run.examples, training, spans["spans"], run.tokenizer,
                                 p.model, cfg.infiller, step_label=f"infiller-{source}")
            counterfactuals = steps.run(make_counterfactuals, source, infiller, run.examples, training,
                                        spans["spans"], cfg.infiller, run.device,
                                        step_label=f"counterfactuals-{source}")
            phi = steps.run(train_rora_phi, source, run.examples, training, counterfactuals, run.tokenizer, p.model,
                            cfg.phi_train, cfg.objective, step_label=f"train-rora-{source}")
            models = {f"rora_phi:{source}": phi, f"rationale_model:{source}": small,
                      **({f"infiller:{source}": infiller} if infiller is not None else {})}
            return models, {f"rora_words:{source}": spans["words"], f"rora_spans:{source}": spans["spans"],
                            f"rora_leakage:{source}": spans["summary"], f"counterfactuals:{source}": counterfactuals}

        for models, source_tables in steps.map_chains(chain, sources, name="rora-source"):
            out.update(models)
            tables.update(source_tables)
        return Trained(models=out, tables=tables)

    def report_section(self, run: Run, trained: Trained) -> ArtifactRef:
        shown = {k: v for k, v in trained.tables.items()
                 if k.startswith(("rora_words:", "rora_spans:", "rora_leakage:", "counterfactuals:"))}
        return run.steps.run(write_rora_report, shown)

    def trained(self, models: dict[str, ArtifactRef]) -> bool:
        return "theta" in models and bool(per_source(models, "rora_phi"))

    def score(self, run: Run, models: dict[str, ArtifactRef],
              rationales: ArtifactRef | list[ArtifactRef]) -> list[ArtifactRef]:
        return [run.steps.score(score_rora, per_source(models, "rora_phi"), models["theta"], rationales=rationales,
                                examples=run.examples, score=run.score, device=run.device,
                                step_label=f"{run.label}score-rora")]

    def bench_summary(self, artifacts: dict, store) -> dict | None:
        from larev.methods.rora.bench import rora_bench_summary

        return rora_bench_summary(artifacts, store)

    def bench_markdown(self, summary: dict) -> list[str]:
        from larev.methods.rora.bench import rora_bench_lines

        return rora_bench_lines(summary)
