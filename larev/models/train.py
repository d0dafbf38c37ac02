"""The training loop shared by every evaluator: maximise log p(label | input) (REV eq. 3/4), keep the best epoch.

Seeded (initialisation, data order, dropout), device-agnostic (CUDA + bf16 autocast when present), with a
progress bar per epoch, validation after each epoch and the best checkpoint (highest mean validation
log-probability, i.e. lowest validation V-entropy) restored at the end. The reference REV code only saved a
checkpoint every 1,000 steps when validation improved, so short runs saved nothing: here every epoch is a
candidate.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import torch
from larev.progress import progress_bar

from larev.models.checkpoint import Checkpointer, TrainingState, capture_rng, detached_state, restore_rng
from larev.config import ScoreConfig, TrainConfig
from larev.device import autocast, resolve_device, seed_everything
from larev.models.evaluator import Evaluator, labels_for_loss, pad_batch, score_labels, tokenize

log = logging.getLogger(__name__)


@dataclass
class EpochRecord:
    epoch: int
    train_loss: float
    val_logp: float  # mean log p(y | input) on the validation split (nan when there is none)
    val_accuracy: float
    seconds: float


@dataclass
class TrainResult:
    history: list[EpochRecord] = field(default_factory=list)
    best_epoch: int = 0
    n_truncated: int = 0

    def as_dict(self) -> dict:
        return {"history": [asdict(h) for h in self.history], "best_epoch": self.best_epoch,
                "n_truncated": self.n_truncated}


# batches per length-sorted chunk (Hugging Face's LengthGroupedSampler caps its mega-batches at 50 too)
LENGTH_GROUP_BATCHES = 50


def epoch_order(lengths: Sequence[int], batch_size: int, generator: torch.Generator,
                group_by_length: bool) -> list[int]:
    """One epoch's row order, read in consecutive slices of `batch_size` (each slice one batch).

    Random: a permutation of the rows. Length-grouped: the permutation is cut into chunks of
    LENGTH_GROUP_BATCHES batches, each chunk is sorted by length (longest first, ties in shuffled order) and cut
    into batches, and the full batches are shuffled across chunks; a short batch, if any, goes last so every slice
    stays one batch. Every row appears once either way; grouped batches carry less padding.
    """
    order = torch.randperm(len(lengths), generator=generator).tolist()
    if not group_by_length or len(order) <= batch_size:
        return order
    chunk = batch_size * LENGTH_GROUP_BATCHES
    batches: list[list[int]] = []
    for start in range(0, len(order), chunk):
        rows = sorted(order[start: start + chunk], key=lambda i: -lengths[i])
        batches += [rows[k: k + batch_size] for k in range(0, len(rows), batch_size)]
    full = [b for b in batches if len(b) == batch_size]
    short = [b for b in batches if len(b) < batch_size]
    shuffled = [full[i] for i in torch.randperm(len(full), generator=generator).tolist()]
    return [i for batch in shuffled + short for i in batch]


def linear_warmup_decay(step: int, total: int, warmup: int) -> float:
    """Learning-rate multiplier: linear warm-up over `warmup` steps, then linear decay to 0 at `total`."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


def optimizer_and_schedule(model: torch.nn.Module, config: TrainConfig, total_steps: int, backbone: str):
    """AdamW and the linear warm-up / decay schedule over `total_steps` (every larev training loop); the peak
    learning rate is the config's, else the backbone's default."""
    warmup = int(config.warmup_ratio * total_steps)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate_for(backbone),
                                  weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer,
                                                  lambda s: linear_warmup_decay(s, total_steps, warmup))
    return optimizer, scheduler


class BestEpoch:
    """Keeps a CPU copy of the weights of the best-scoring epoch and restores them at the end."""

    def __init__(self) -> None:
        self.score, self.epoch, self._state = -math.inf, 0, None

    def offer(self, score: float, epoch: int, model: torch.nn.Module) -> None:
        if score > self.score:
            self.score, self.epoch = score, epoch
            self._state = detached_state(model)

    def restore(self, model: torch.nn.Module) -> None:
        if self._state is not None:
            model.load_state_dict(self._state)
        model.eval()


def checkpoint_state(epoch: int, model: torch.nn.Module, optimizer, scheduler, best: BestEpoch,
                     generator: torch.Generator, progress: dict) -> TrainingState:
    """The loop's full state after `epoch` epochs (see larev/models/checkpoint.py)."""
    return TrainingState(epoch=epoch, model=detached_state(model), optimizer=optimizer.state_dict(),
                         scheduler=scheduler.state_dict(), rng=capture_rng(generator), best_score=best.score,
                         best_epoch=best.epoch, best_model=best._state, progress=progress)


def resume_from(checkpointer: Checkpointer | None, model: torch.nn.Module, optimizer, scheduler, best: BestEpoch,
                generator: torch.Generator, *, epochs: int, desc: str) -> tuple[int, dict]:
    """Load the latest checkpoint into the loop's objects; returns (epochs already done, the loop's bookkeeping).

    (0, {}) when there is nothing to resume. A checkpoint from a run with more epochs than this one is not used.
    """
    state = checkpointer.latest() if checkpointer is not None else None
    if state is None:
        return 0, {}
    if state.epoch > epochs:
        log.warning("%s: ignoring a checkpoint at epoch %d, past this run's %d epochs", desc, state.epoch, epochs)
        return 0, {}
    model.load_state_dict(state.model)
    optimizer.load_state_dict(state.optimizer)
    scheduler.load_state_dict(state.scheduler)
    best.score, best.epoch, best._state = state.best_score, state.best_epoch, state.best_model
    restore_rng(generator, state.rng)
    log.info("%s: resuming from the checkpoint after epoch %d of %d", desc, state.epoch, epochs)
    return state.epoch, state.progress


def warn_if_at_chance(desc: str, accuracy: float, epochs: int, val_candidates: Sequence[Sequence[str]],
                      backbone: str = "embedded", *, settings: str = "train", irm_option: str | None = None) -> None:
    """Log a warning when a kept model's validation accuracy is within 2 standard errors of a uniform guess over
    each row's label set (nothing to say when every row has one candidate); the advice names what to change.

    settings: the parameter path of the TrainConfig the model trained with ('train': the --epochs and
    --learning-rate options; else e.g. 'larev.la_train', set with --set); irm_option: the option of the IRM
    weight of an IRM-trained model, whose constant prediction (at chance) is IRM's trivial solution.
    """
    from larev.stats import binomial_margin, chance_level

    chance = chance_level(val_candidates)
    if chance >= 1 or not val_candidates or math.isnan(accuracy):
        return
    margin = binomial_margin(chance, len(val_candidates), z=2.0)
    if accuracy <= chance + margin:
        log.warning("%s: validation accuracy %.3f after %d epochs is within chance (%.3f + %.3f): it has not learned "
                    "to read its input, and the scores it takes part in are noise. %s", desc, accuracy, epochs,
                    chance, margin, chance_remedies(settings, backbone, irm_option))


def chance_remedies(settings: str, backbone: str, irm_option: str | None) -> str:
    """What to change when a model stays at chance, naming the options that set it (see `warn_if_at_chance`)."""
    if settings == "train":
        longer, rate = "--epochs", "--learning-rate"
    else:
        longer, rate = f"--set {settings}.epochs=N", f"--set {settings}.learning_rate=X"
    remedies = [f"train longer ({longer})"]
    if irm_option:
        remedies.append(f"lower the IRM weight ({irm_option})")
    remedies.append("start from a pretrained backbone (--backbone minilm)" if backbone == "embedded"
                    else f"change the learning rate ({rate})")
    return "Try: " + "; ".join(remedies) + "."


def trained_with(config: TrainConfig, backbone: str) -> dict:
    """The training config as a model artifact records it: its values, the learning rate it left to the backbone
    filled in."""
    return {**config.model_dump(mode="json"), "learning_rate": config.learning_rate_for(backbone)}


def train_evaluator(
    evaluator: Evaluator,
    train_inputs: list[str],
    train_labels: list[str],
    val_inputs: list[str],
    val_labels: list[str],
    val_candidates: list[list[str]],
    config: TrainConfig,
    *,
    progress: bool = True,
    desc: str = "train",
    on_epoch_end: Callable[[int, Evaluator, EpochRecord], None] | None = None,
    keep_eval: Sequence[torch.nn.Module] = (),
    checkpointer: Checkpointer | None = None,
    chance_is_expected: bool = False,
) -> TrainResult:
    """Fine-tune `evaluator` in place on (input, label) pairs; returns the per-epoch history.

    keep_eval: frozen sub-modules that stay in eval mode (no dropout) while the rest trains, e.g. the leakage
    probe's encoder.
    checkpointer: saves the full training state after every epoch; training resumes from its latest state.
    chance_is_expected: the model may rightly end at chance (an input-only model, a probe on masked text); else
    a kept epoch whose validation accuracy is within two standard errors of chance is warned about: the model
    has not learned to read its input, and every score it takes part in is noise.
    """
    if len(train_inputs) != len(train_labels) or not train_inputs:
        raise ValueError("train_inputs and train_labels must be non-empty and of the same length")
    generator = seed_everything(config.seed)
    device = resolve_device(config.device)
    evaluator.to(device)
    evaluator.bf16 = config.bf16
    model = evaluator.model
    x_ids, n_cut = tokenize(evaluator.tokenizer, train_inputs, evaluator.config.max_input_tokens, evaluator.eos_id)
    y_ids = evaluator.target_ids(train_labels)
    if n_cut:
        log.warning("%s: %d of %d training inputs were truncated to %d tokens", desc, n_cut, len(x_ids),
                    evaluator.config.max_input_tokens)
    n = len(x_ids)
    steps_per_epoch = math.ceil(n / config.batch_size)
    optimizer, scheduler = optimizer_and_schedule(model, config, steps_per_epoch * config.epochs,
                                                  evaluator.config.backbone)
    result = TrainResult(n_truncated=n_cut)
    best = BestEpoch()
    done, progress_state = resume_from(checkpointer, model, optimizer, scheduler, best, generator,
                                       epochs=config.epochs, desc=desc)
    result.history = [EpochRecord(**h) for h in progress_state.get("history", [])]
    for epoch in range(done + 1, config.epochs + 1):
        started = time.perf_counter()
        model.train()
        for module in keep_eval:
            module.eval()
        order = epoch_order([len(x) for x in x_ids], config.batch_size, generator, config.group_by_length)
        losses = []
        bar = progress_bar(range(steps_per_epoch), desc=f"{desc} epoch {epoch}/{config.epochs}",
                           enabled=progress, unit="step")
        for step in bar:
            idx = order[step * config.batch_size: (step + 1) * config.batch_size]
            ids, mask = pad_batch([x_ids[i] for i in idx], evaluator.pad_id)
            lab, lab_mask = pad_batch([y_ids[i] for i in idx], evaluator.pad_id)
            with autocast(device, config.bf16):
                out = model(input_ids=ids.to(device), attention_mask=mask.to(device),
                            labels=labels_for_loss(lab, lab_mask).to(device))
            optimizer.zero_grad(set_to_none=True)
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
            optimizer.step()
            scheduler.step()
            losses.append(out.loss.item())
            if step % 10 == 0:
                bar.set_postfix(loss=f"{sum(losses[-10:]) / len(losses[-10:]):.3f}")
        record = EpochRecord(epoch=epoch, train_loss=sum(losses) / len(losses), val_logp=float("nan"),
                             val_accuracy=float("nan"), seconds=0.0)
        if val_inputs:
            scores = score_labels(evaluator, val_inputs, val_labels, val_candidates,
                                  ScoreConfig(normalisation=config.select_by, batch_size=config.eval_batch_size))
            record.val_logp = float(scores.logp.mean())
            record.val_accuracy = float(scores.correct.mean())
        record.seconds = time.perf_counter() - started
        result.history.append(record)
        log.info("%s epoch %d: train loss %.4f, val log p %.4f, val acc %.3f (%.1fs)", desc, epoch,
                 record.train_loss, record.val_logp, record.val_accuracy, record.seconds)
        # No validation split: the last epoch is the one kept.
        best.offer(record.val_logp if val_inputs else float(epoch), epoch, model)
        if checkpointer is not None:
            checkpointer.save(checkpoint_state(epoch, model, optimizer, scheduler, best, generator,
                                               {"history": [asdict(h) for h in result.history]}))
        if on_epoch_end is not None:
            on_epoch_end(epoch, evaluator, record)
    best.restore(model)
    result.best_epoch = best.epoch
    kept = next((h for h in result.history if h.epoch == result.best_epoch), None)
    if val_inputs and kept is not None and not chance_is_expected:
        warn_if_at_chance(desc, kept.val_accuracy, len(result.history), val_candidates, evaluator.config.backbone)
    evaluator.meta["training"] = result.as_dict()
    evaluator.meta["train_config"] = trained_with(config, evaluator.config.backbone)
    return result
