"""`larev bench speed`: speed ratios measured side by side in one process, on the same model and rows.

Each measurement times both sides of a ratio in the same run (no stored reference numbers), after one warm-up
call each. The models are the embedded default backbone (ModelConfig()) over a tokenizer trained on demo data;
weights are freshly initialised (speed does not depend on what the weights learned).

  score_batched_vs_naive  rows/s of `score_labels` (128 rows per forward pass, every candidate label decoded in the
                          same pass) over rows/s of the reference codes' pattern: one example at a time, one
                          forward pass per candidate label.                                      target >= 10
  ig_batched_vs_naive     rows/s of `attribute` (16 examples per captum call) over one captum call per example.
                                                                                                  target >= 4
  irm_step_vs_erm_step    seconds per training instance of a phi_LA step (3 environments in one pass, the IRM
                          penalty, the frozen probe's term) over an ERM step of the same batch size.  target <= 1.5
                          Also reported per input row (each phi_LA instance carries 3 inputs).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from larev.leakage.attribution import AttributionConfig, attribute
from larev.baselines.nli import nli_template
from larev.config import DemoDataConfig, ModelConfig, ScoreConfig, TrainConfig
from larev.formats import baseline_input, rationale_input
from larev.methods.leakage_aware.config import LeakageAwareConfig
from larev.methods.leakage_aware.objective import probe_from
from larev.methods.leakage_aware.training import LAInstance, train_leakage_aware
from larev.models.evaluator import Evaluator, new_evaluator, pad_batch, score_labels, tokenize
from larev.models.tokenizer import train_word_tokenizer
from larev.models.train import train_evaluator
from larev.schema import NLI_LABELS


def best_of(fn: Callable[[], object], repeats: int = 2) -> float:
    """Seconds of the fastest of `repeats` calls, after one untimed warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def demo_inputs(n: int, seed: int = 13) -> tuple[list[str], list[str], list[str]]:
    """n (REV phi input, baseline input, label) triples from the demo generator with the NLI template baselines."""
    from larev.data.demo import generate_demo

    df = generate_demo(DemoDataConfig(n_train=max(n, 10), n_validation=5, n_test=5, seed=seed)).head(n)
    b = [nli_template(p, h, y) for p, h, y in zip(df["premise"], df["hypothesis"], df["label"])]
    return ([rationale_input(r, bb) for r, bb in zip(df["rationale"], b)], [baseline_input(bb) for bb in b],
            df["label"].to_list())


def embedded_model(texts: list[str], seed: int = 0) -> Evaluator:
    return new_evaluator(ModelConfig(), tokenizer=train_word_tokenizer(texts + list(NLI_LABELS)), seed=seed)


@torch.no_grad()
def naive_scores(ev: Evaluator, inputs: list[str], labels: list[str]) -> list[float]:
    """The reference pattern: per example, one forward pass per candidate label (sum of label-token log-probs),
    then the label-set normalisation."""
    ev.model.eval()
    out = []
    for text, y in zip(inputs, labels):
        ids, _ = tokenize(ev.tokenizer, [text], ev.config.max_input_tokens, ev.eos_id)
        x, mask = pad_batch(ids, ev.pad_id)
        seq = []
        for cand in NLI_LABELS:
            lab, _ = tokenize(ev.tokenizer, [cand], ev.config.max_target_tokens, ev.eos_id)
            lab_t = torch.tensor(lab)
            logits = ev.model(input_ids=x, attention_mask=mask, labels=lab_t).logits
            seq.append(torch.log_softmax(logits.float(), -1).gather(2, lab_t[:, :, None]).sum())
        out.append(float(torch.log_softmax(torch.stack(seq), 0)[NLI_LABELS.index(y)]))
    return out


def measure_scoring(n_rows: int = 256) -> dict:
    inputs, _, labels = demo_inputs(n_rows)
    ev = embedded_model(inputs)
    cands = [list(NLI_LABELS)] * n_rows
    naive_rows = max(16, n_rows // 8)
    batched = best_of(lambda: score_labels(ev, inputs, labels, cands, ScoreConfig(batch_size=128)))
    naive = best_of(lambda: naive_scores(ev, inputs[:naive_rows], labels[:naive_rows]), repeats=1)
    # both compute the same quantity (checked here, so the ratio compares like with like)
    same = score_labels(ev, inputs[:8], labels[:8], cands[:8]).logp
    torch.testing.assert_close(torch.tensor(same), torch.tensor(naive_scores(ev, inputs[:8], labels[:8]),
                                                                dtype=torch.float64), atol=1e-4, rtol=1e-4)
    batched_rate, naive_rate = n_rows / batched, naive_rows / naive
    return {"score_batched_rows_per_s": batched_rate, "score_naive_rows_per_s": naive_rate,
            "score_batched_vs_naive": batched_rate / naive_rate}


def measure_ig(n_rows: int = 48, n_steps: int = 32) -> dict:
    _, baselines, labels = demo_inputs(n_rows)
    texts = [b.removeprefix("baseline: ") for b in baselines]
    ev = embedded_model(baselines)
    batched_cfg = AttributionConfig(n_steps=n_steps, batch_size=16)
    naive_cfg = AttributionConfig(n_steps=n_steps, batch_size=1)
    inputs = [baseline_input(t) for t in texts]
    batched = best_of(lambda: attribute(ev, inputs, labels, batched_cfg), repeats=1)
    naive = best_of(lambda: attribute(ev, inputs, labels, naive_cfg), repeats=1)
    return {"ig_batched_rows_per_s": n_rows / batched, "ig_naive_rows_per_s": n_rows / naive,
            "ig_batched_vs_naive": naive / batched}


def measure_irm_step(n_instances: int = 256, batch_size: int = 16) -> dict:
    inputs, baselines, labels = demo_inputs(n_instances)
    probe = probe_from(embedded_model(inputs, seed=1))
    instances = [LAInstance(inputs=(x, x.replace(" implies ", " <mask> "), x), probe_input=b, label=y,
                            candidates=tuple(NLI_LABELS)) for x, b, y in zip(inputs, baselines, labels)]
    cfg = TrainConfig(epochs=1, batch_size=batch_size)

    def la_epoch():
        model = embedded_model(inputs, seed=2)
        train_leakage_aware(model, probe, instances, [], [], cfg, LeakageAwareConfig(lambda_irm=1.0,
                            lambda_probe=0.005), task="nli", progress=False)

    def erm_epoch():
        model = embedded_model(inputs, seed=2)
        train_evaluator(model, inputs, labels, [], [], [], cfg, progress=False)

    la, erm = best_of(la_epoch, repeats=1), best_of(erm_epoch, repeats=1)
    return {"irm_step_seconds_per_instance": la / n_instances, "erm_step_seconds_per_instance": erm / n_instances,
            "irm_step_vs_erm_step": la / erm, "irm_step_vs_erm_step_per_input_row": la / (3 * erm)}


# name -> (target, "min" when the figure must be at least the target, "max" when at most)
TARGETS = {
    "score_batched_vs_naive": (10.0, "min"),
    "ig_batched_vs_naive": (4.0, "min"),
    "irm_step_vs_erm_step": (1.5, "max"),
    "cached_rerun_vs_cold": (0.10, "max"),
    "demo_peak_rss_gib": (3.0, "max"),
    "esnli_full_minutes": (60.0, "max"),
}


def verdicts(figures: dict) -> dict:
    """{name: {"value", "target", "meets"}} for every target (meets None when the figure was not measured)."""
    out = {}
    for name, (target, kind) in TARGETS.items():
        value = figures.get(name)
        meets = None if value is None else (value >= target if kind == "min" else value <= target)
        out[name] = {"value": value, "target": f"{'>=' if kind == 'min' else '<='} {target}", "meets": meets}
    return out


PROFILED = {  # cProfile entries -> the phase they stand for
    "label_set_scores": "IRM on label-set scores (candidate decoding)",
    "probe_label_set_nll": "probe term",
    "backward": "backward pass",
    "step": "optimizer step (AdamW)",
    "score_labels": "validation scoring",
}


def profile_phi_training(n_instances: int = 256, irm_on: str = "label_set", lambda_probe: float = 0.0,
                         with_validation: bool = True) -> dict:
    """Where one epoch of the IRM training loop spends its time (RORA's Phi by default: 3 environments,
    label-set IRM, no probe), from cProfile's cumulative times: {"total_seconds", "phases": {name: seconds}}.
    The model's forward pass is the remainder after the listed phases."""
    import cProfile
    import pstats

    inputs, baselines, labels = demo_inputs(n_instances)
    probe = probe_from(embedded_model(inputs, seed=1)) if lambda_probe > 0 else None
    instances = [LAInstance(inputs=(x, x, x), probe_input=b, label=y, candidates=tuple(NLI_LABELS))
                 for x, b, y in zip(inputs, baselines, labels)]
    val = instances[: n_instances // 4] if with_validation else []
    model = embedded_model(inputs, seed=2)
    objective = LeakageAwareConfig(lambda_irm=1.0, lambda_probe=lambda_probe, irm_on=irm_on)
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    train_leakage_aware(model, probe, instances, val, [list(NLI_LABELS)] * len(val),
                        TrainConfig(epochs=1, batch_size=16), objective, task="nli", progress=False)
    profiler.disable()
    total = time.perf_counter() - started
    stats = pstats.Stats(profiler).stats  # (file, line, name) -> (cc, nc, tt, ct, callers)
    phases = {}
    for (filename, _, name), (_, _, _, cumulative, _) in stats.items():
        if name in PROFILED and ("larev" in filename or "torch" in filename):
            if name == "step" and "optim" not in filename:
                continue
            if name == "backward" and "_tensor" not in filename:
                continue
            phases[PROFILED[name]] = phases.get(PROFILED[name], 0.0) + cumulative
    phases["forward pass (remainder)"] = max(0.0, total - sum(phases.values()))
    return {"total_seconds": total, "n_instances": n_instances, "phases": phases}
