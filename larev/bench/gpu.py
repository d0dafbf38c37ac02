"""The pure core on one device and precision, each step timed: the GPU check of larev's CUDA path.

`run_core` takes a slice of a task's examples and the settings a pipeline run resolves for them (the GPU check's
command, `larev bench gpu`, resolves them through the pipeline's own resolution step: flows/gpu_check.py), builds the
baselines and the rationale variants, the backbone's vocabularies, phi_base, phi, the IG leakage spans, the
environments, the probe and phi_LA, and scores REV and LAREV on the test variants, timing each step (CUDA
synchronised before each clock read). `fixed_weight_check` scores the same test variants and runs IG with another
run's saved models on this device (the GPU's models on the CPU): the same weights must give the same scores up to
floating-point error, a check of the CUDA path itself. Models trained on two devices differ (dropout draws and
summation order), so their scores are compared as means, at a looser tolerance (`compare`).

No Prefect, no artifact store: the steps are the core functions the pipeline's tasks call. bf16 is autocast for
training and scoring; IG runs in float32 in both precisions (larev/leakage/attribution.py does not autocast).
"""

from __future__ import annotations

import json
import platform
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import polars as pl
import torch

from larev.baselines.build import build_baselines
from larev.config import BaselineConfig, ModelConfig, ScoreConfig, TrainConfig
from larev.data.variants import THESIS_VARIANTS, make_variants
from larev.formats import baseline_input, target_text
from larev.leakage.attribution import AttributionConfig
from larev.methods.leakage_aware.config import LarevConfig, la_model_for
from larev.methods.leakage_aware.environments import MASKED, build_environments
from larev.methods.leakage_aware.instances import environment_frame
from larev.methods.leakage_aware.leakage_spans import find_baseline_spans
from larev.methods.leakage_aware.objective import probe_from
from larev.methods.leakage_aware.fit import fit_phi_la, phi_la_plan
from larev.methods.rev.inputs import evaluator_inputs
from larev.methods.vocabulary import run_vocabularies
from larev.metrics.rev import score_rev
from larev.models.evaluator import Evaluator, load_evaluator, mask_token_of, new_evaluator, save_evaluator
from larev.models.train import train_evaluator
from larev.schema import label_sets

#: The timed steps, in order.
STEPS = ("baselines", "tokenizer", "phi_base", "phi", "ig_spans", "environments", "probe", "phi_la", "score")
#: The models saved for another device's fixed-weight check.
SAVED = ("phi_base", "phi", "phi_la")


class StepClock:
    """Seconds per step, CUDA work finished before each clock read."""

    def __init__(self, device: torch.device) -> None:
        self.device, self.seconds = device, {}

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    @contextmanager
    def step(self, name: str):
        self._sync()
        started = time.perf_counter()
        yield
        self._sync()
        self.seconds[name] = round(time.perf_counter() - started, 3)
        print(f"[{self.device.type}] {name}: {self.seconds[name]:.1f} s", file=sys.stderr, flush=True)


def prepared(examples: pl.DataFrame, baseline: BaselineConfig) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(baselines, frame, variants): every example's gold-label baseline b (id, label, baseline, as the pipeline's
    baselines step stores it), the examples joined with it, and the test split's rationale variants."""
    baselines = build_baselines(examples, baseline).with_columns(label=examples["label"])
    frame = examples.join(baselines.select("id", "label", "baseline"), on=["id", "label"], how="left")
    test = examples.filter(pl.col("split") == "test")
    variants = make_variants(test, baselines.filter(pl.col("id").is_in(test["id"].implode())), THESIS_VARIANTS)
    return baselines, frame, variants


def train_and_validation(frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    return frame.filter(pl.col("split") == "train"), frame.filter(pl.col("split") == "validation")


def _train(ev: Evaluator, tr_inputs, tr: pl.DataFrame, val_inputs, val: pl.DataFrame, config: TrainConfig,
           desc: str, **kwargs) -> float:
    """Train in place; the kept epoch's validation accuracy."""
    result = train_evaluator(ev, tr_inputs, [target_text(y) for y in tr["label"]], val_inputs,
                             [target_text(y) for y in val["label"]], label_sets(val), config, progress=False,
                             desc=desc, **kwargs)
    kept = next(h for h in result.history if h.epoch == result.best_epoch)
    return round(float(kept.val_accuracy), 4)


def run_core(examples: pl.DataFrame, *, baseline: BaselineConfig, model: ModelConfig, train: TrainConfig,
             larev: LarevConfig) -> tuple[dict, pl.DataFrame, pl.DataFrame, dict[str, Evaluator]]:
    """The core pipeline for REV and LAREV on `examples` with a run's resolved settings (its `baselines`, `model`,
    `train` and `larev` sections; `train.device` and `train.bf16` say where and how): (report, scores, leakage
    terms, models). The report holds seconds per step, validation accuracies, IG's convergence and the
    residual-leakage summary."""
    device, bf16 = train.device, train.bf16
    dev = torch.device(device)
    clock = StepClock(dev)
    report: dict = {"accuracy": {}}
    task = str(examples["task"][0])

    with clock.step("baselines"):
        baselines, frame, variants = prepared(examples, baseline)
    tr, val = train_and_validation(frame)

    with clock.step("tokenizer"):
        tokenizer, output_ids = run_vocabularies(model, tr, examples)

    def fresh(config: ModelConfig, seed: int) -> Evaluator:
        return new_evaluator(config, tokenizer=tokenizer, seed=seed, output_vocabulary=output_ids)

    models: dict[str, Evaluator] = {}
    for role in ("phi_base", "phi"):
        with clock.step(role):
            models[role] = fresh(model, train.seed)
            report["accuracy"][role] = _train(models[role], evaluator_inputs(role, tr), tr,
                                              evaluator_inputs(role, val), val, train, role)

    with clock.step("ig_spans"):
        terms, _, summary = find_baseline_spans(models["phi_base"], pl.concat([tr, val]), tr.height,
                                                larev.attribution)
    report["ig"] = {"rows": terms.height, "mean_abs_delta": float(terms["delta"].abs().mean()),
                    "residual_after": summary.get("residual_after"), "converged": summary.get("converged")}

    with clock.step("environments"):
        rows = frame.filter(pl.col("split") != "test").join(terms.select("id", "term", "spans"), on="id", how="left")
        envs = build_environments(rows.select("id", "task", "question", "choices", "label", "baseline", "term",
                                              "spans"), mask_token_of(models["phi_base"].tokenizer),
                                  larev.antonyms)
        wide, env_names = environment_frame(frame.filter(pl.col("split") != "test"), envs)
        wtr, wval = train_and_validation(wide)

    with clock.step("probe"):
        probe_cfg = larev.probe_train.model_copy(update={"device": device, "bf16": bf16, "seed": train.seed})
        psi = probe_from(models["phi"])
        report["accuracy"]["probe"] = _train(psi, [baseline_input(b) for b in wtr[MASKED]], wtr,
                                             [baseline_input(b) for b in wval[MASKED]], wval, probe_cfg, "probe",
                                             keep_eval=[psi.model.get_encoder()], chance_is_expected=True)

    with clock.step("phi_la"):  # the pipeline's own phi_LA step (tasks/leakage_aware.py calls the same two)
        la_cfg = larev.la_train.model_copy(update={"device": device, "bf16": bf16, "seed": train.seed})
        objective = larev.objective_for(None, task)
        plan = phi_la_plan(wide, env_names, la_cfg, objective, min_steps=larev.la_min_steps,
                           label_edits=larev.label_edits, exclusive_terms="none",
                           mask_token=mask_token_of(psi.tokenizer))
        models["phi_la"] = fresh(la_model_for(model, larev.la_dropout), la_cfg.seed)
        result = fit_phi_la(models["phi_la"], psi, plan, objective, progress=False)
        report["accuracy"]["phi_la"] = _la_accuracy(result)

    with clock.step("score"):
        scores = score_variants(models, variants, examples, baselines, bf16=bf16)
    report["seconds"] = clock.seconds
    return report, scores, terms.select("id", "term"), models


def _la_accuracy(result) -> dict[str, float]:
    """phi_LA's validation accuracy per environment at the kept epoch."""
    kept = next(h for h in result.history if h.get("epoch") == result.best_epoch)
    return {k.removeprefix("val_accuracy_"): round(float(v), 4) for k, v in kept.items()
            if k.startswith("val_accuracy_")}


def score_variants(models: dict[str, Evaluator], variants: pl.DataFrame, examples: pl.DataFrame,
                   baselines: pl.DataFrame, *, bf16: bool) -> pl.DataFrame:
    """REV (phi) and LAREV (phi_LA) of every test variant, against phi_base: id, source, metric, score,
    logp_with, logp_base."""
    out = []
    for metric, phi in (("rev", models["phi"]), ("larev", models["phi_la"])):
        for ev in (phi, models["phi_base"]):
            ev.bf16 = bf16
        scored = score_rev(phi, models["phi_base"], variants, examples, baselines, ScoreConfig(), metric=metric)
        out.append(scored.select("id", "source", "metric", "score", "logp_with", "logp_base"))
    return pl.concat(out)


def variant_means(scores: pl.DataFrame) -> dict[str, dict[str, float]]:
    """metric -> variant -> mean score."""
    means = scores.group_by("metric", "source").agg(pl.col("score").mean()).sort("metric", "source")
    table: dict[str, dict[str, float]] = {}
    for metric, source, value in means.iter_rows():
        table.setdefault(metric, {})[source] = round(float(value), 4)
    return table


def fixed_weight_check(models_dir: Path, examples: pl.DataFrame, *, baseline: BaselineConfig,
                       attribution: AttributionConfig, device: str, bf16: bool
                       ) -> tuple[dict, pl.DataFrame, pl.DataFrame]:
    """With the saved models of another run (the same weights on this device; `baseline`: that run's settings,
    which chose its baselines' paraphrases): the test variants' scores and IG's leakage terms over the training and
    validation baselines. (report, scores, terms)."""
    models = {name: load_evaluator(models_dir / name, device=device, bf16=bf16) for name in SAVED}
    baselines, frame, variants = prepared(examples, baseline)
    clock = StepClock(torch.device(device))
    with clock.step("fixed_score"):
        scores = score_variants(models, variants, examples, baselines, bf16=bf16)
    tr, val = train_and_validation(frame)
    with clock.step("fixed_ig"):
        terms, _, _ = find_baseline_spans(models["phi_base"], pl.concat([tr, val]), tr.height, attribution)
    return {"seconds": clock.seconds}, scores, terms.select("id", "term")


def device_facts(device: str) -> dict:
    facts = {"device": device, "torch": torch.__version__, "python": platform.python_version(),
             "cpu_threads": torch.get_num_threads(), "machine": platform.machine()}
    try:
        import transformers

        facts["transformers"] = transformers.__version__
    except ImportError:
        pass
    if device.startswith("cuda"):
        facts["card"] = torch.cuda.get_device_name(torch.device(device))
        facts["bf16_supported"] = torch.cuda.is_bf16_supported()
    return facts


# --------------------------------------------------------------------------------------------- the comparison

#: Agreement asked of the same weights on another device (nats, per row): fp32 is floating-point summation order,
#: bf16 autocast rounds every matrix product to 8 bits of mantissa.
FIXED_TOLERANCE = {"fp32": 1e-3, "bf16": 0.1}
#: Agreement asked of models trained on each device (nats, per metric and variant mean): training on two devices
#: differs in dropout draws and summation order, so this is of the size of seed-to-seed variation.
TRAINED_TOLERANCE = 0.25


def fixed_agreement(scores: pl.DataFrame, other_scores: pl.DataFrame, terms: pl.DataFrame,
                    other_terms: pl.DataFrame, tolerance: float) -> dict:
    """Agreement of the same weights on two devices: per-row |score difference| (max, mean, 99th percentile, rows
    over `tolerance`), the largest difference of a (metric, variant) mean, and the share of baselines whose leakage
    term (IG's spans) is the same."""
    joined = scores.join(other_scores, on=["id", "source", "metric"], suffix="_other")
    diff = (joined["score"] - joined["score_other"]).abs()
    means = joined.group_by("metric", "source").agg((pl.col("score") - pl.col("score_other")).mean().abs())
    same = terms.join(other_terms, on="id", suffix="_other").select(
        (pl.col("term").fill_null("") == pl.col("term_other").fill_null("")).mean()).item()
    return {"rows": joined.height, "max_abs": round(float(diff.max()), 6), "mean_abs": round(float(diff.mean()), 6),
            "p99_abs": round(float(diff.quantile(0.99)), 6), "rows_over_tolerance": int((diff > tolerance).sum()),
            "max_mean_gap": round(float(means["score"].max()), 6), "same_term": round(float(same), 4),
            "agree": bool(diff.max() <= tolerance)}


def compare(cpu_dir: Path, gpu_dirs: list[Path], fixed_dirs: list[Path | None]) -> tuple[str, dict]:
    """A markdown table (steps: CPU seconds beside each GPU run's, the speed-up) and the agreement figures: each GPU
    run's variant means against the CPU run's (trained on each device), and, where `fixed_dirs` gives the GPU run's
    models scored on the CPU, per-row agreement of the same weights."""
    cpu = json.loads((cpu_dir / "run.json").read_text())
    runs = [(d, json.loads((d / "run.json").read_text()), f) for d, f in zip(gpu_dirs, fixed_dirs)]
    head = ["step", f"CPU s ({cpu.get('cpu_threads')} threads)"]
    for _, g, _ in runs:
        head += [f"{g.get('card', g['device'])} {g['precision']} s", "speed-up"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for step in (*(s for s in STEPS if s in cpu["seconds"]), "total"):
        c = cpu["total_seconds"] if step == "total" else cpu["seconds"][step]
        row = [step, f"{c:.1f}"]
        for _, g, _ in runs:
            t = g["total_seconds"] if step == "total" else g["seconds"].get(step)
            row += ["-", "-"] if t is None else [f"{t:.1f}", f"{c / t:.1f}x" if t else "-"]
        lines.append("| " + " | ".join(row) + " |")
    agreement: dict = {"trained_tolerance": TRAINED_TOLERANCE, "fixed_tolerance": FIXED_TOLERANCE,
                       "cpu": {"accuracy": cpu["accuracy"], "means": cpu["means"]}, "runs": []}
    for d, g, fixed_dir in runs:
        gaps = {f"{m}/{v}": round(abs(g["means"][m][v] - cpu["means"][m][v]), 4)
                for m in cpu["means"] for v in cpu["means"][m]}
        entry = {"run": str(d), "precision": g["precision"], "card": g.get("card"), "accuracy": g["accuracy"],
                 "means": g["means"], "trained_mean_gaps": gaps,
                 "trained_agree": max(gaps.values()) <= TRAINED_TOLERANCE}
        if fixed_dir is not None:  # the GPU's weights on the CPU
            figures = fixed_agreement(pl.read_parquet(d / "scores.parquet").select("id", "source", "metric", "score"),
                                      pl.read_parquet(fixed_dir / "fixed_scores.parquet")
                                      .select("id", "source", "metric", "score"),
                                      pl.read_parquet(d / "terms.parquet"),
                                      pl.read_parquet(fixed_dir / "fixed_terms.parquet"),
                                      FIXED_TOLERANCE[g["precision"]])
            entry["fixed"] = figures
        agreement["runs"].append(entry)
    return "\n".join(lines), agreement
