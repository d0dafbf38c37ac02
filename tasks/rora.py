"""RORA's steps (paper section 3) and the models of the RQ / LAS baselines.

Per rationale source with training rationales: the rationale-only model, its leaky spans, the counterfactual
infiller, the counterfactual environments, Phi (IRM), and the (x, r) proxy of RQ / LAS. Shared: theta on x alone.
"""

from __future__ import annotations

import tempfile

import polars as pl

import larev.formats as formats
import larev.infill as infill
import larev.irm as irm
import larev.leakage_aware as leakage_aware
import larev.metrics.accuracy as accuracy
import larev.metrics.rora as rora_metric
import larev.models.evaluator as evaluator_mod
import larev.models.train as train_mod
import larev.rationale_leakage as rationale_leakage
import larev.rora as rora
import larev.variants as variants
from larev.config import ModelConfig, ScoreConfig, TrainConfig
from larev.infill import InfillerConfig
from larev.leakage_aware import LeakageAwareConfig
from larev.rationale_leakage import LeakageDetectionConfig, RationaleModelConfig
from larev.schema import label_sets
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.checkpoints import epoch_checkpoints
from tasks.common import larev_task, put_dir, put_table
from tasks.training import load_tokenizer, put_evaluator, split_train_validation, train_val_examples


@larev_task("training-rationales", code=(variants,))
def make_training_rationales(store: ArtifactStore, examples: ArtifactRef, baselines: ArtifactRef,
                             sources: list[str]) -> ArtifactRef:
    """The train/validation split's rationales of every source RORA trains on (the built-in variants)."""
    ex = train_val_examples(store, examples)
    b = store.read_parquet(baselines.key)
    out = variants.make_variants(ex, b.filter(pl.col("id").is_in(ex["id"].implode())), tuple(sources))
    return put_table(store, "training_rationales.parquet", out)


def source_frame(store: ArtifactStore, examples: ArtifactRef, training_rationales: ArtifactRef,
                 source: str) -> pl.DataFrame:
    """Train/validation examples with the `source` rationale in place of the gold one."""
    ex = train_val_examples(store, examples).drop("rationale")
    rat = store.read_parquet(training_rationales.key).filter(pl.col("source") == source).select("id", "rationale")
    if rat.is_empty():
        raise ValueError(f"no training rationales for source {source!r}")
    return ex.join(rat, on="id", how="inner")


@larev_task("rationale-model", code=(rationale_leakage,), task_run_name="rationale-model-{source}")
def train_rationale_only(store: ArtifactStore, source: str, examples: ArtifactRef, training_rationales: ArtifactRef,
                         config: RationaleModelConfig, progress: bool = True) -> ArtifactRef:
    """Phi_small (RORA 3.1): predicts the label from the source's training rationales alone."""
    from larev.rationale_leakage import save_rationale_model, train_rationale_model

    tr, _ = split_train_validation(source_frame(store, examples, training_rationales, source))
    model = train_rationale_model(tr["rationale"].to_list(), tr["label"].to_list(), label_sets(tr), config,
                                  progress=progress)
    with tempfile.TemporaryDirectory() as tmp:
        save_rationale_model(model, tmp)
        return put_dir(store, "rationale_model", tmp)


@larev_task("leaky-spans", code=(rationale_leakage, infill), task_run_name="leaky-spans-{source}")
def find_leaky_spans(store: ArtifactStore, source: str, rationale_model: ArtifactRef, examples: ArtifactRef,
                     training_rationales: ArtifactRef, config: LeakageDetectionConfig,
                     progress: bool = True) -> dict[str, ArtifactRef]:
    """IG of Phi_small over the training rationales: the global word attribution table (`words`), the leaky
    spans of every train/validation rationale (`spans`), and a one-row `summary` with the residual leakage: the
    validation accuracy of a fresh rationale-only model trained on the masked rationales, beside chance and the
    unmasked model's accuracy. The sentinels stay in the masked text, so where and how many spans were masked
    counts as information left over."""
    from larev.infill import mask_spans
    from larev.rationale_leakage import accuracy_of, detect_leakage, load_rationale_model, residual_leakage

    df = source_frame(store, examples, training_rationales, source)
    model = load_rationale_model(store.get_dir(rationale_model.key))
    # the global attribution comes from the training split only; its leaky words then mark validation rows too
    tr, val = split_train_validation(df)
    ordered = pl.concat([tr, val])
    cands = label_sets(ordered)
    labels = ordered["label"].to_list()
    table, per_row = detect_leakage(model, ordered["rationale"].to_list(), labels, cands, config, progress=progress,
                                    n_global=tr.height)
    per_row = per_row.drop("row").insert_column(0, ordered["id"])
    # how much label information is left once the spans are masked, and how much there was
    masked = [mask_spans(r, s)[0] for r, s in zip(ordered["rationale"], per_row["spans"].to_list())]
    n = tr.height
    summary = pl.DataFrame([{
        "source": source, "threshold": config.threshold, "leaky_words": int(table["leaky"].sum()),
        "with_spans": float((per_row["span_source"] != "none").mean()),
        "by_fallback": float((per_row["span_source"] == "fallback").mean()),
        "chance": sum(1 / len(c) for c in cands[n:]) / (len(cands) - n) if len(cands) > n else float("nan"),
        "accuracy_unmasked": accuracy_of(model, ordered["rationale"].to_list()[n:], labels[n:], cands[n:]),
        "accuracy_masked": residual_leakage(masked[:n], labels[:n], cands[:n], masked[n:], labels[n:], cands[n:],
                                            config.model)}])
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
    from larev.infill import with_sentinels
    from larev.models.evaluator import new_evaluator

    model = model.model_copy(update={"max_target_tokens": max(model.max_target_tokens, config.max_new_tokens)})
    if model.backbone == "embedded":
        tok = load_tokenizer(store, tokenizer)
        with_sentinels(tok, config.max_spans)
        return new_evaluator(model, tokenizer=tok, seed=seed)
    ev = new_evaluator(model, seed=seed)
    if with_sentinels(ev.tokenizer, config.max_spans):
        ev.model.resize_token_embeddings(len(ev.tokenizer))
    return ev


@larev_task("infiller", code=(infill, rora, formats, evaluator_mod, train_mod), task_run_name="infiller-{source}",
            gpu=True)
def train_infiller(store: ArtifactStore, source: str, examples: ArtifactRef, training_rationales: ArtifactRef,
                   spans: ArtifactRef, tokenizer: ArtifactRef | None, model: ModelConfig, config: InfillerConfig,
                   progress: bool = True) -> ArtifactRef | None:
    """The label-conditioned infiller (RORA 3.2); None when no training rationale has a leaky span."""
    from larev.models.train import train_evaluator

    df = spans_frame(store, examples, training_rationales, source, spans)
    tr, val = split_train_validation(df)
    pairs_tr = rora.infill_examples(tr, tr["spans"].to_list(), config.max_spans)
    if pairs_tr.is_empty():
        return None
    pairs_val = rora.infill_examples(val, val["spans"].to_list(), config.max_spans)
    ev = new_infiller(store, tokenizer, model, config, config.train.seed)
    with epoch_checkpoints(store, "infiller", config.train.epochs, f"infiller[{source}]") as checkpoints:
        train_evaluator(ev, pairs_tr["input"].to_list(), pairs_tr["target"].to_list(), pairs_val["input"].to_list(),
                        pairs_val["target"].to_list(), [[t] for t in pairs_val["target"]], config.train,
                        progress=progress, desc=f"infiller[{source}]", checkpointer=checkpoints)
        return put_evaluator(store, "infiller", ev, f"infiller-{source}")


@larev_task("counterfactuals", code=(infill, rora, formats), task_run_name="counterfactuals-{source}", gpu=True)
def make_counterfactuals(store: ArtifactStore, source: str, infiller_ref: ArtifactRef | None, examples: ArtifactRef,
                         training_rationales: ArtifactRef, spans: ArtifactRef, config: InfillerConfig,
                         device: str = "auto", progress: bool = True) -> ArtifactRef:
    """D^e for every label e: id, env, env_label, rationale (counterfactual), n_spans, n_missing."""
    from larev.infill import generate_fills
    from larev.models.evaluator import load_evaluator

    df = spans_frame(store, examples, training_rationales, source, spans)
    requests = rora.counterfactual_requests(df, df["spans"].to_list(), config.max_spans)
    if infiller_ref is None:
        fills = [[] for _ in range(requests.height)]
    else:
        ev = load_evaluator(store.get_dir(infiller_ref.key), device=device)
        fills = generate_fills(ev, requests["input"].to_list(), requests["n_spans"].to_list(), config,
                               progress=progress, desc=f"counterfactuals[{source}]")
    texts, missing = rora.rebuild_all(requests["masked"].to_list(), fills)
    ids = df["id"].to_list()
    out = requests.select("env", "env_label", "n_spans").with_columns(
        id=pl.Series([ids[i] for i in requests["row"]]), rationale=pl.Series(texts, dtype=pl.String),
        n_missing=pl.Series(missing, dtype=pl.Int64))
    return put_table(store, "counterfactuals.parquet", out.select("id", "env", "env_label", "rationale", "n_spans",
                                                                  "n_missing"))


@larev_task("train-rora", code=(rora, leakage_aware, irm, evaluator_mod, formats), task_run_name="train-rora-{source}",
            gpu=True)
def train_rora_phi(store: ArtifactStore, source: str, examples: ArtifactRef, training_rationales: ArtifactRef,
                   counterfactuals: ArtifactRef, tokenizer: ArtifactRef | None, model: ModelConfig,
                   train: TrainConfig, objective: LeakageAwareConfig, progress: bool = True) -> ArtifactRef:
    """Phi (RORA eq. 8): ERM over the environments D^e plus lambda * the per-environment IRMv1 penalty."""
    from larev.leakage_aware import train_leakage_aware
    from larev.models.evaluator import new_evaluator

    df = source_frame(store, examples, training_rationales, source)
    cf = store.read_parquet(counterfactuals.key).sort("env")
    by_id = cf.group_by("id", maintain_order=True).agg(pl.col("rationale"))
    df = df.join(by_id.rename({"rationale": "envs"}), on="id", how="inner")
    n_env = int(cf["env"].max()) + 1
    tr, val = split_train_validation(df)
    phi = new_evaluator(model, tokenizer=load_tokenizer(store, tokenizer), seed=train.seed)
    with epoch_checkpoints(store, "rora_phi", train.epochs, f"rora[{source}]") as checkpoints:
        train_leakage_aware(phi, None, rora.rora_instances(tr, tr["envs"].to_list(), n_env),
                            rora.rora_instances(val, val["envs"].to_list(), n_env), label_sets(val), train,
                            objective, task=df["task"][0], progress=progress,
                            env_names=rora.environment_names(n_env), desc=f"rora[{source}]",
                            checkpointer=checkpoints)
        return put_evaluator(store, "rora_phi", phi, f"rora-{source}")


@larev_task("train-input-model", code=(rora, evaluator_mod, train_mod, formats), task_run_name="train-{role}", gpu=True)
def train_input_model(store: ArtifactStore, role: str, examples: ArtifactRef, training_rationales: ArtifactRef | None,
                      source: str | None, tokenizer: ArtifactRef | None, model: ModelConfig, train: TrainConfig,
                      progress: bool = True) -> ArtifactRef:
    """theta (RORA eq. 9: y from x alone; training_rationales None) or the RQ / LAS proxy (y from (x, r) of the
    source's training rationales)."""
    from larev.formats import input_only, input_with_rationale, target_text
    from larev.models.evaluator import new_evaluator
    from larev.models.train import train_evaluator

    if training_rationales is None:
        df = train_val_examples(store, examples)
        inputs = [input_only(x) for x in rora.x_texts(df)]
    else:
        df = source_frame(store, examples, training_rationales, source)
        inputs = [input_with_rationale(x, r) for x, r in zip(rora.x_texts(df), df["rationale"])]
    df = df.with_columns(input=pl.Series(inputs, dtype=pl.String))
    tr, val = split_train_validation(df)
    ev = new_evaluator(model, tokenizer=load_tokenizer(store, tokenizer), seed=train.seed)
    with epoch_checkpoints(store, role, train.epochs) as checkpoints:
        train_evaluator(ev, tr["input"].to_list(), [target_text(y) for y in tr["label"]], val["input"].to_list(),
                        [target_text(y) for y in val["label"]], label_sets(val), train, progress=progress,
                        desc=role, checkpointer=checkpoints)
        return put_evaluator(store, role, ev, role)


def _by_model_source(rationales: pl.DataFrame, trained: list[str]):
    """Rationale rows grouped by the source whose models score them."""
    owner = {source: rora.model_source(source, trained) for source in rationales["source"].unique()}
    keyed = rationales.with_columns(model_source=pl.col("source").replace_strict(owner))
    for (model_source,), part in keyed.group_by("model_source", maintain_order=True):
        yield model_source, part.drop("model_source")


@larev_task("score-rora", code=(rora_metric, rora, evaluator_mod, formats))
def score_rora(store: ArtifactStore, phis: dict[str, ArtifactRef], theta: ArtifactRef, rationales: ArtifactRef,
               examples: ArtifactRef, score: ScoreConfig, device: str = "auto", progress: bool = True) -> ArtifactRef:
    """RORA eq. 10 for every rationale, each source scored by its own Phi (gold's for sources without one)."""
    from larev.metrics.rora import score_rora as score_fn
    from larev.models.evaluator import load_evaluator

    ex = store.read_parquet(examples.key)
    th = load_evaluator(store.get_dir(theta.key), device=device)
    frames = []
    for model_source, part in _by_model_source(store.read_parquet(rationales.key), list(phis)):
        phi = load_evaluator(store.get_dir(phis[model_source].key), device=device)
        frames.append(score_fn(phi, th, part, ex, score, progress=progress))
    return put_table(store, "scores.parquet", pl.concat(frames))


@larev_task("score-rq-las", code=(accuracy, rora_metric, rora, rationale_leakage, evaluator_mod, formats))
def score_rq_las(store: ArtifactStore, proxies: dict[str, ArtifactRef], rationale_models: dict[str, ArtifactRef],
                 theta: ArtifactRef, rationales: ArtifactRef, examples: ArtifactRef, score: ScoreConfig,
                 device: str = "auto", progress: bool = True) -> ArtifactRef:
    """RQ and LAS for every rationale, each source with its own proxy and leakage indicator (gold's otherwise)."""
    from larev.metrics.accuracy import score_rq_las as score_fn
    from larev.models.evaluator import load_evaluator
    from larev.rationale_leakage import load_rationale_model

    ex = store.read_parquet(examples.key)
    th = load_evaluator(store.get_dir(theta.key), device=device)
    frames = []
    for model_source, part in _by_model_source(store.read_parquet(rationales.key), list(proxies)):
        proxy = load_evaluator(store.get_dir(proxies[model_source].key), device=device)
        small = load_rationale_model(store.get_dir(rationale_models[model_source].key))
        frames.append(score_fn(proxy, th, small, part, ex, score, progress=progress))
    return put_table(store, "scores.parquet", pl.concat(frames))
