"""`larev bench speed`: speed ratios measured side by side in one process, on the same model and rows.

Each measurement times both sides of a ratio in the same run (no stored reference numbers), after one warm-up
call each. The models are the embedded default backbone (ModelConfig()) over a tokenizer trained on demo data;
weights are freshly initialised (speed does not depend on what the weights learned).

  score_batched_vs_naive  rows/s of `score_labels` (128 rows per forward pass, every candidate label decoded in the
                          same pass) over rows/s of the reference codes' pattern: one example at a time, one
                          forward pass per candidate label.                                      target >= 10
  irm_step_vs_erm_step_per_row
                          one phi_LA epoch (each step: 16 instances x 3 environments in one pass, the IRM penalty,
                          the frozen probe's term) over ERM on the same 3 x n environment rows, 16 rows a step,
                          i.e. one phi_LA step against 3 ERM steps.                             target <= 1.2
  ig_vs_fwdbwd_bound      the time of steps x rows forward + input-gradient backward passes on plain batches (the
                          floor of any IG implementation) over `attribute`'s time on the same rows.  target >= 0.7
  minilm_step_vs_embedded seconds per training step (batch of 32, AdamW) of the pretrained minilm evaluator over
                          the embedded model's, one epoch of each on the same rows (when minilm is installed).
  frozen_step_vs_embedded_step
                          the same for minilm-frozen with its encoder cache warm (every epoch after a run's first,
                          every later run), fastest of 3 epochs each, its decoder over the demo's output vocabulary
                          (what a run builds: the labels' tokens); beside it the same step with an output vocabulary
                          of CoS-E's size and with the full one, and the one-time cost of filling the cache per
                          input.                                                                 target <= 2
  reader_step_vs_embedded_step
                          the same for minilm-reader (its top `trained_layers` encoder layers trained over the cached
                          lower ones), 1 and 2 trained layers, on the same rows with a warm cache; beside it the
                          share of its step the decoder and adapter take (minilm-frozen's step, every encoder layer
                          frozen, over the reader's): what an encoder-only label head could save at most.

The demo figures (demo_cold_seconds, demo_rerun_seconds, cached_rerun_vs_cold, demo_peak_rss_gib) and the e-SNLI
seed minutes come from `larev bench speed` itself (flows/cli/commands.py): `larev run` in child processes, and the
wall time per seed of given `larev bench quality` results.
"""

from __future__ import annotations

import contextlib
import logging
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

log = logging.getLogger(__name__)


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
            lab = ev.target_ids([cand])
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
    # the fastest of several calls each: one call takes a fraction of a second, so a background process (a
    # Prefect server flushing a finished run's events) can halve a single timing
    batched = best_of(lambda: score_labels(ev, inputs, labels, cands, ScoreConfig(batch_size=128)), repeats=5)
    naive = best_of(lambda: naive_scores(ev, inputs[:naive_rows], labels[:naive_rows]), repeats=3)
    # both compute the same quantity (checked here, so the ratio compares like with like)
    same = score_labels(ev, inputs[:8], labels[:8], cands[:8]).logp
    torch.testing.assert_close(torch.tensor(same), torch.tensor(naive_scores(ev, inputs[:8], labels[:8]),
                                                                dtype=torch.float64), atol=1e-4, rtol=1e-4)
    batched_rate, naive_rate = n_rows / batched, naive_rows / naive
    return {"score_batched_rows_per_s": batched_rate, "score_naive_rows_per_s": naive_rate,
            "score_batched_vs_naive": batched_rate / naive_rate}


def fwdbwd_bound_seconds(ev: Evaluator, inputs: list[str], labels: list[str], n_steps: int, batch_size: int) -> float:
    """Seconds of IG's unavoidable work on these rows without IG: for each batch of `batch_size` rows (grouped by
    length as `attribute` groups them), one forward and one input-gradient backward pass of the same forward
    function over n_steps copies of the batch's input embeddings, parameter gradients off as in `attribute`."""
    from larev.leakage.attribution import encoder_input_embeddings, label_logprob_forward

    ids_all, _ = tokenize(ev.tokenizer, inputs, ev.config.max_input_tokens, ev.eos_id)
    lab_all = ev.target_ids(labels)
    order = sorted(range(len(inputs)), key=lambda i: len(ids_all[i]))
    batches = []
    for start in range(0, len(order), batch_size):
        rows = order[start: start + batch_size]
        ids, mask = pad_batch([ids_all[i] for i in rows], ev.pad_id)
        lab, lab_mask = pad_batch([lab_all[i] for i in rows], ev.pad_id)
        batches.append((ids, mask, lab, lab_mask))
    model = ev.model
    model.eval()
    flags = [p.requires_grad for p in model.parameters()]
    model.requires_grad_(False)
    try:
        def passes():
            for ids, mask, lab, lab_mask in batches:
                with torch.no_grad():
                    embeds = encoder_input_embeddings(model, ids).repeat(n_steps, 1, 1)
                embeds.requires_grad_(True)
                out = label_logprob_forward(model, embeds, mask.repeat(n_steps, 1), lab.repeat(n_steps, 1),
                                            lab_mask.repeat(n_steps, 1))
                torch.autograd.grad(out.sum(), embeds)

        return best_of(passes, repeats=1)
    finally:
        for p, flag in zip(model.parameters(), flags):
            p.requires_grad_(flag)


def measure_ig_bound(n_rows: int = 48, n_steps: int = 32, batch_size: int = 16) -> dict:
    """ig_vs_fwdbwd_bound: the time of n_steps x n_rows forward+backward passes on plain batches (the floor any IG
    implementation pays) over `attribute`'s time for the same rows; 1.0 means IG adds no overhead."""
    _, baselines, labels = demo_inputs(n_rows)
    ev = embedded_model(baselines)
    ig = best_of(lambda: attribute(ev, baselines, labels, AttributionConfig(n_steps=n_steps, batch_size=batch_size)),
                 repeats=1)
    bound = fwdbwd_bound_seconds(ev, baselines, labels, n_steps, batch_size)
    return {"ig_seconds": ig, "fwdbwd_bound_seconds": bound, "ig_vs_fwdbwd_bound": bound / ig}


def measure_irm_step(n_instances: int = 256, batch_size: int = 16, n_envs: int = 3) -> dict:
    """One phi_LA epoch (each step: batch_size instances x n_envs environments in one pass, the IRM penalty, the
    frozen probe's term) against ERM on the same input rows: batch_size rows per step over all n_envs x n_instances
    environment texts, i.e. n_envs ERM steps per phi_LA step."""
    inputs, baselines, labels = demo_inputs(n_instances)
    probe = probe_from(embedded_model(inputs, seed=1))
    envs = [(x, x.replace(" implies ", " <mask> "), x.replace(" implies ", " contradicts "))[:n_envs]
            for x in inputs]
    instances = [LAInstance(inputs=e, probe_input=b, label=y, candidates=tuple(NLI_LABELS))
                 for e, b, y in zip(envs, baselines, labels)]
    erm_inputs = [text for e in envs for text in e]
    erm_labels = [y for y in labels for _ in range(n_envs)]
    cfg = TrainConfig(epochs=1, batch_size=batch_size)

    def la_epoch():
        model = embedded_model(inputs, seed=2)
        train_leakage_aware(model, probe, instances, [], [], cfg, LeakageAwareConfig(lambda_irm=1.0,
                            lambda_probe=0.005), task="nli", progress=False)

    def erm_epochs():
        model = embedded_model(inputs, seed=2)
        train_evaluator(model, erm_inputs, erm_labels, [], [], [], cfg, progress=False)

    la, erm = best_of(la_epoch, repeats=1), best_of(erm_epochs, repeats=1)
    return {"irm_epoch_seconds": la, "erm_epochs_seconds": erm, "n_envs": n_envs,
            "irm_step_vs_erm_step_per_row": la / erm}


def erm_step_seconds(model: Evaluator, inputs: list[str], labels: list[str], batch_size: int,
                     repeats: int) -> float:
    """Seconds per AdamW step of one ERM epoch over the rows (no validation), the fastest of `repeats` after a
    warm-up epoch; the model is built before the clock starts."""
    cfg = TrainConfig(epochs=1, batch_size=batch_size)
    steps = -(-len(inputs) // batch_size)
    return best_of(lambda: train_evaluator(model, inputs, labels, [], [], [], cfg, progress=False),
                   repeats=repeats) / steps


def measure_backbone_step(backbone: str = "minilm", n_rows: int = 256, batch_size: int = 32) -> dict:
    """What a training step costs on a pretrained backbone against the embedded model: one epoch of ERM training
    (n_rows / batch_size AdamW steps, no validation) of each on the same demo rows, seconds per step and the ratio.
    Empty when the backbone's package is not installed (`make install-minilm`)."""
    from larev.errors import ConfigError
    from larev.models.pretrained import checkpoint_dir

    try:
        checkpoint_dir(backbone)
    except ConfigError as exc:
        log.warning("backbone step cost not measured: %s", exc)
        return {}
    inputs, _, labels = demo_inputs(n_rows)
    embedded = erm_step_seconds(embedded_model(inputs, seed=2), inputs, labels, batch_size, repeats=1)
    pretrained = erm_step_seconds(new_evaluator(ModelConfig(backbone=backbone), seed=2), inputs, labels, batch_size,
                                  repeats=1)
    return {"embedded_step_seconds": embedded, f"{backbone}_step_seconds": pretrained,
            f"{backbone}_step_vs_embedded": pretrained / embedded}


#: CoS-E's output vocabulary on minilm-frozen: the specials (ids 0..103) and the 4,735 tokens of its answer choices
COSE_OUTPUT_VOCABULARY = 104 + 4735


def _installed(backbone: str) -> bool:
    """Whether `backbone`'s pretrained weights are installed; a warning naming what is missing when not."""
    from larev.errors import ConfigError
    from larev.models.pretrained import checkpoint_dir

    try:
        checkpoint_dir(backbone)
    except ConfigError as exc:
        log.warning("%s step cost not measured: %s", backbone, exc)
        return False
    return True


@contextlib.contextmanager
def _empty_encoder_cache():
    """The frozen-encoder cache (larev/models/frozen.py) in a new, empty folder while the block runs, removed after."""
    import os
    import tempfile
    from unittest import mock

    from larev.models import frozen

    with tempfile.TemporaryDirectory() as tmp, mock.patch.dict(os.environ, {frozen.CACHE_ENV: tmp}):
        yield


def measure_frozen_step(n_rows: int = 256, batch_size: int = 32) -> dict:
    """minilm-frozen's training step against the embedded model's (issue 35): one epoch of ERM on the same demo rows,
    each the fastest of 3 after a warm-up epoch (so minilm-frozen's encoder cache is warm, as in every epoch after
    a run's first and every later run). minilm-frozen is measured with the demo's output vocabulary (its labels'
    tokens: what a run builds), with one of CoS-E's size (COSE_OUTPUT_VOCABULARY tokens) and with the full
    vocabulary. Beside them, the one-time cost of filling the cache: the frozen encoder over every input with an
    empty cache against a second pass that reads them all back, in ms per input. Empty when the minilm package is
    not installed."""
    import random

    from larev.models import frozen

    if not _installed("minilm-frozen"):
        return {}
    inputs, _, labels = demo_inputs(n_rows)
    config = ModelConfig(backbone="minilm-frozen")
    with _empty_encoder_cache():
        full = new_evaluator(config, seed=2)
        demo_vocabulary = frozen.output_vocabulary(full.tokenizer, sorted(set(labels)))
        others = sorted(set(range(len(full.tokenizer))) - set(demo_vocabulary))
        cose_size = sorted(demo_vocabulary + random.Random(0).sample(others,
                                                                     COSE_OUTPUT_VOCABULARY - len(demo_vocabulary)))
        encoder = full.model.get_encoder().eval()
        ids, _ = tokenize(full.tokenizer, inputs, full.config.max_input_tokens, full.eos_id)

        def encode_all() -> float:
            started = time.perf_counter()
            with torch.no_grad():
                for i in range(0, len(ids), batch_size):
                    encoder(*pad_batch(ids[i:i + batch_size], full.pad_id))
            return time.perf_counter() - started

        filling, reading = encode_all(), encode_all()
        steps = {name: erm_step_seconds(new_evaluator(config, seed=2, output_vocabulary=vocabulary), inputs, labels,
                                        batch_size, repeats=3)
                 for name, vocabulary in (("frozen", demo_vocabulary), ("frozen_cose_vocab", cose_size),
                                          ("frozen_full_vocab", None))}
        embedded = erm_step_seconds(embedded_model(inputs, seed=2), inputs, labels, batch_size, repeats=3)
    return {"frozen_step_seconds": steps["frozen"], "embedded_step_seconds": embedded,
            "frozen_step_vs_embedded_step": steps["frozen"] / embedded,
            "frozen_output_vocabulary": len(demo_vocabulary),
            "frozen_cose_vocab_step_vs_embedded_step": steps["frozen_cose_vocab"] / embedded,
            "frozen_full_vocab_step_vs_embedded_step": steps["frozen_full_vocab"] / embedded,
            "frozen_encode_ms_per_input": 1000 * filling / len(ids),
            "frozen_cached_read_ms_per_input": 1000 * reading / len(ids)}


def measure_reader_step(n_rows: int = 256, batch_size: int = 32) -> dict:
    """minilm-reader's training step against the embedded model's, with 1 and 2 trained layers, and the share of
    its step above the encoder (minilm-frozen's step over the reader's: the decoder and the adapter), each the
    fastest of 3 epochs after a warm-up epoch (the encoder cache warm). Empty when the minilm package is not
    installed."""
    from larev.models import frozen

    if not _installed("minilm-reader"):
        return {}
    inputs, _, labels = demo_inputs(n_rows)
    with _empty_encoder_cache():
        vocabulary = frozen.output_vocabulary(new_evaluator(ModelConfig(backbone="minilm-frozen"), seed=2).tokenizer,
                                              sorted(set(labels)))

        def step(config: ModelConfig) -> float:
            return erm_step_seconds(new_evaluator(config, seed=2, output_vocabulary=vocabulary), inputs, labels,
                                    batch_size, repeats=3)

        reader = {k: step(ModelConfig(backbone="minilm-reader", trained_layers=k)) for k in (1, 2)}
        frozen_step = step(ModelConfig(backbone="minilm-frozen"))
        embedded = erm_step_seconds(embedded_model(inputs, seed=2), inputs, labels, batch_size, repeats=3)
    return {"reader_step_seconds": reader[2], "reader_step_vs_embedded_step": reader[2] / embedded,
            "reader1_step_vs_embedded_step": reader[1] / embedded,
            "reader_decoder_share": frozen_step / reader[2]}


# name -> (target, "min" when the figure must be at least the target, "max" when at most)
TARGETS = {
    "demo_cold_seconds": (240.0, "max"),
    "cached_rerun_vs_cold": (0.05, "max"),
    "demo_peak_rss_gib": (2.0, "max"),
    "score_batched_vs_naive": (10.0, "min"),
    "irm_step_vs_erm_step_per_row": (1.2, "max"),
    "ig_vs_fwdbwd_bound": (0.7, "min"),
    "esnli_seed_minutes": (30.0, "max"),
    "esnli_rev_larev_seed_minutes": (10.0, "max"),
    "frozen_step_vs_embedded_step": (2.0, "max"),
    "cose_rev_larev_seed_minutes": (45.0, "max"),
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
