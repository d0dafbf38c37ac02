"""Training with IRM over environments: phi_LA (thesis eq. 4.10) and, with probe weight 0, RORA's Phi (eq. 8).

Each batch holds whole instances: the environments of an instance are always in the same optimizer step, and one
forward pass covers them all (rows environment-major). Model selection: the epoch with the best mean validation
log p(y | input_e) over the environments. The loss is larev/methods/leakage_aware/objective.py.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass, field

import torch

from larev.config import ScoreConfig, TrainConfig
from larev.device import autocast, resolve_device, seed_everything
from larev.methods.leakage_aware.config import LeakageAwareConfig
from larev.methods.leakage_aware.environments import ENVIRONMENT_NAMES
from larev.methods.leakage_aware.objective import (borrowed_consistency, bounded_probe_loss, freeze, la_objective,
                                                   label_set_nll, ramp)
from larev.models.checkpoint import Checkpointer
from larev.models.evaluator import (Evaluator, candidate_logprobs_from, labels_for_loss, pad_batch, score_labels,
                                    tokenize)
from larev.models.irm import irm_penalty
from larev.models.train import (BestEpoch, checkpoint_state, epoch_order, optimizer_and_schedule, resume_from,
                               trained_with, warn_if_at_chance)
from larev.progress import progress_bar

log = logging.getLogger(__name__)


@dataclass
class LAInstance:
    """One training instance: the rationale with each of its baseline environments, the masked baseline, label."""

    inputs: tuple[str | None, ...]  # one evaluator input per environment ([r, b_E1], ...); None: the row lacks it
    probe_input: str  # baseline_input(b~); unused when the probe weight is 0
    label: str
    candidates: tuple[str, ...]  # the label set (contains label)
    # LAREV's zero point (instances.la_instances): the environment z of the two inputs below, [empty, b_z] (trained
    # to the label like the others) and [r', b_z] (r' another instance's same-label rationale: pulled to the
    # no-rationale reading); None where the instance has none
    zero_env: int | None = None
    empty_input: str | None = None
    borrowed_input: str | None = None
    # the mismatched-rationale term (instances.la_instances): [r_j, b_m], r_j another training instance's rationale
    # of another label, in environment m, trained to this instance's label; None where the instance has none
    mismatch_env: int | None = None
    mismatched_input: str | None = None


def label_set_scores(model: torch.nn.Module, hidden: torch.Tensor, attention_mask: torch.Tensor,
                     rows: list[LAInstance], cand_tokens: dict[str, list[int]],
                     pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """s_k = log p(candidate k | input) for every row's label set, decoded from encoder states `hidden`
    (padded with -inf to the largest set), and each row's label index."""
    pairs = [(r, c) for r, x in enumerate(rows) for c in x.candidates]
    cand_ids, cand_mask = pad_batch([cand_tokens[c] for _, c in pairs], pad_id)
    cand_row = torch.tensor([r for r, _ in pairs], device=hidden.device)
    pair_logp = candidate_logprobs_from(model, hidden, attention_mask, cand_ids.to(hidden.device),
                                        cand_mask.to(hidden.device), cand_row)
    k_max = max(len(x.candidates) for x in rows)
    scores = torch.full((len(rows), k_max), -math.inf, device=hidden.device)
    counts = torch.tensor([len(x.candidates) for x in rows])
    cols = torch.cat([torch.arange(int(k)) for k in counts]).to(hidden.device)
    scores = scores.index_put((cand_row, cols), pair_logp)
    target = torch.tensor([x.candidates.index(x.label) for x in rows], device=hidden.device)
    return scores, target


@dataclass
class LAStepRecord:
    epoch: int
    erm: float
    irm: float
    probe: float
    w_irm: float
    w_probe: float
    borrowed: float | None = None  # the borrowed-rationale term (None when off: nan would break equality)
    w_borrowed: float = 0.0
    empty: float | None = None  # the no-rationale rows' ERM (None when there are none)
    w_empty: float = 0.0
    mismatched: float | None = None  # the mismatched-rationale term (None when off)
    w_mismatched: float = 0.0


@dataclass
class LAResult:
    history: list[dict] = field(default_factory=list)  # per epoch: losses, validation, seconds
    trace: list[LAStepRecord] = field(default_factory=list)  # per logging interval
    best_epoch: int = 0

    def as_dict(self) -> dict:
        return {"history": self.history, "trace": [asdict(t) for t in self.trace], "best_epoch": self.best_epoch}


def probe_label_set_nll(probe_model: torch.nn.Module, hidden: torch.Tensor, attention_mask: torch.Tensor,
                        rows: list[LAInstance], cand_tokens: dict[str, list[int]], pad_id: int) -> torch.Tensor:
    """(B,) the probe's NLL of each row's label over its label set, decoded from the encoder states `hidden`
    (phi_LA's encoding of the masked baseline): eq. 4.10's L_probe in label-set units."""
    scores, target = label_set_scores(probe_model, hidden, attention_mask, rows, cand_tokens, pad_id)
    return label_set_nll(scores, target)


@dataclass
class _Encoded:
    """The training instances tokenized once: per environment, per instance the input ids (None where the
    instance lacks the environment); the probe inputs (when the probe weight is above 0), the label ids, and the
    token ids of every candidate label."""

    env_ids: list[list[list[int] | None]]
    probe_ids: list[list[int]]
    label_ids: list[list[int]]
    candidate_ids: dict[str, list[int]]
    empty_ids: list[list[int] | None]  # per instance [empty, b_z]
    borrowed_ids: list[list[int] | None]  # per instance [r', b_z]
    mismatched_ids: list[list[int] | None]  # per instance [r_j, b_m]


def _tokenize_present(tok, texts: list[str | None], max_len: int, eos: int) -> list[list[int] | None]:
    present = [t for t in texts if t is not None]
    ids = iter(tokenize(tok, present, max_len, eos)[0] if present else [])
    return [None if t is None else next(ids) for t in texts]


def _candidate_ids(phi_la: Evaluator, train: list[LAInstance]) -> dict[str, list[int]]:
    """The target ids of every candidate label (tokenized together: one warning for the lot, see target_ids)."""
    texts = sorted({c for x in train for c in x.candidates})
    return dict(zip(texts, phi_la.target_ids(texts))) if texts else {}


def _encode(phi_la: Evaluator, train: list[LAInstance], n_env: int, with_probe: bool) -> _Encoded:
    tok, eos = phi_la.tokenizer, phi_la.eos_id
    max_in = phi_la.config.max_input_tokens
    return _Encoded(
        env_ids=[_tokenize_present(tok, [x.inputs[e] for x in train], max_in, eos) for e in range(n_env)],
        probe_ids=tokenize(tok, [x.probe_input for x in train], max_in, eos)[0] if with_probe else [],
        label_ids=phi_la.target_ids([x.label for x in train]),
        candidate_ids=_candidate_ids(phi_la, train),
        empty_ids=_tokenize_present(tok, [x.empty_input for x in train], max_in, eos),
        borrowed_ids=_tokenize_present(tok, [x.borrowed_input for x in train], max_in, eos),
        mismatched_ids=_tokenize_present(tok, [x.mismatched_input for x in train], max_in, eos))


OWN, EMPTY, BORROWED, MISMATCHED = "own", "empty", "borrowed", "mismatched"  # the kinds of a training row: which
# rationale it reads


def _batch_rows(enc: _Encoded, train: list[LAInstance], idx: list[int],
                n_env: int, zero_rows: bool = True, mismatched: bool = False) -> list[tuple[int, int, str, list[int]]]:
    """The rows of one forward pass, (environment, position in the batch, kind, input ids), environment-major
    for the instance's own rationale, then (when `zero_rows`) its no-rationale and borrowed rows (in its zero
    environment), then (when `mismatched`) its mismatched row."""
    rows = [(e, k, OWN, enc.env_ids[e][j]) for e in range(n_env) for k, j in enumerate(idx)
            if enc.env_ids[e][j] is not None]
    if zero_rows:
        for kind, ids in ((EMPTY, enc.empty_ids), (BORROWED, enc.borrowed_ids)):
            rows += [(train[j].zero_env, k, kind, ids[j]) for k, j in enumerate(idx) if ids[j] is not None]
    if mismatched:
        rows += [(train[j].mismatch_env, k, MISMATCHED, enc.mismatched_ids[j]) for k, j in enumerate(idx)
                 if enc.mismatched_ids[j] is not None]
    return rows


def _batch_loss(phi_la: Evaluator, probe: Evaluator | None, train: list[LAInstance], enc: _Encoded, idx: list[int],
                n_env: int, objective: LeakageAwareConfig, w_irm: float, w_probe: float, with_probe: bool,
                device: torch.device, bf16: bool, w_borrowed: float = 0.0, w_empty: float = 0.0,
                w_mismatched: float = 0.0) -> tuple[torch.Tensor, tuple[float, float, float, float, float, float]]:
    """Eq. 4.10 on the instances `idx`: the loss to minimise and its logged parts (mean ERM over environments,
    summed IRM penalty, the probe's loss, the borrowed-rationale term, the no-rationale rows' ERM, the
    mismatched-rationale term; nan where not computed)."""
    model, pad = phi_la.model, phi_la.pad_id
    lab, lab_mask = pad_batch([enc.label_ids[j] for j in idx], pad)
    labels = labels_for_loss(lab, lab_mask).to(device)
    # One forward pass over every row the batch has (_batch_rows). An instance that lacks an environment adds no
    # row to it, so each environment's ERM and IRM terms cover the rows it has.
    # the zero rows wait for their weights (objective.zero_terms_start): before, they would only be logged
    pairs = _batch_rows(enc, train, idx, n_env, zero_rows=w_empty > 0 or w_borrowed > 0
                        or objective.zero_terms_start == 0, mismatched=objective.lambda_mismatched > 0)
    ids, mask = pad_batch([p[3] for p in pairs], pad)
    row_of = torch.tensor([p[1] for p in pairs], device=device)
    # per environment its rows with the instance's own r (its ERM and IRM terms); the no-rationale rows have an ERM
    # term of their own (objective.py: ERM_empty), the borrowed rows the borrowed-rationale term
    groups = [[i for i, p in enumerate(pairs) if p[0] == e and p[2] == OWN] for e in range(n_env)]
    groups = [g for g in groups if g]
    empty_row = {p[1]: i for i, p in enumerate(pairs) if p[2] == EMPTY}  # batch position -> its no-rationale row
    empty_rows = list(empty_row.values())
    borrowed_rows = [i for i, p in enumerate(pairs) if p[2] == BORROWED]
    mismatched_rows = [i for i, p in enumerate(pairs) if p[2] == MISMATCHED]
    with autocast(device, bf16):
        pair_labels = labels[row_of]
        # decoder inputs without `labels`: the per-environment losses below are the only ones computed
        decoder_ids = model.prepare_decoder_input_ids_from_labels(labels=pair_labels)
        out = model(input_ids=ids.to(device), attention_mask=mask.to(device), decoder_input_ids=decoder_ids)
        logits = out.logits.float()
        env_logits = [logits[g] for g in groups]
        env_labels = [pair_labels[g] for g in groups]
        erm = [torch.nn.functional.cross_entropy(z.reshape(-1, z.shape[-1]), y.reshape(-1), ignore_index=-100)
               for z, y in zip(env_logits, env_labels)]
        hidden, mask_d = out.encoder_last_hidden_state, mask.to(device)
        scores = None  # every row's label-set scores, where the IRM penalty needs them
        if objective.irm_on == "tokens":
            irm = [irm_penalty(z, y) for z, y in zip(env_logits, env_labels)]
        else:
            scores, target = label_set_scores(model, hidden, mask_d, [train[idx[p[1]]] for p in pairs],
                                              enc.candidate_ids, pad)
            irm = [irm_penalty(scores[g], target[g]) for g in groups]
        empty_loss = None
        if empty_rows:
            z, y = logits[empty_rows], pair_labels[empty_rows]
            empty_loss = torch.nn.functional.cross_entropy(z.reshape(-1, z.shape[-1]), y.reshape(-1),
                                                           ignore_index=-100)
        mismatched_loss = None
        if mismatched_rows:  # the mismatched-rationale term: y from [r_j, b_m] (objective.py)
            z, y = logits[mismatched_rows], pair_labels[mismatched_rows]
            mismatched_loss = torch.nn.functional.cross_entropy(z.reshape(-1, z.shape[-1]), y.reshape(-1),
                                                                ignore_index=-100)
        borrowed_loss = None
        if borrowed_rows and w_borrowed > 0:
            # KL(sg p(. | empty, b_z) || p(. | r', b_z)) per instance: both rows' label-set scores
            sel = borrowed_rows + [empty_row[pairs[i][1]] for i in borrowed_rows]
            sel_t = torch.tensor(sel, device=device)
            if scores is not None:  # already decoded for the IRM penalty
                sel_scores = scores[sel_t]
            else:
                sel_scores, _ = label_set_scores(model, hidden[sel_t], mask_d[sel_t],
                                                 [train[idx[pairs[i][1]]] for i in sel], enc.candidate_ids, pad)
            n_b = len(borrowed_rows)
            borrowed_loss = borrowed_consistency(sel_scores[:n_b], sel_scores[n_b:])
        if with_probe:
            p_ids, p_mask = pad_batch([enc.probe_ids[j] for j in idx], pad)
            p_mask = p_mask.to(device)
            hidden = model.get_encoder()(input_ids=p_ids.to(device), attention_mask=p_mask).last_hidden_state
            rows = [train[j] for j in idx]
            nll = probe_label_set_nll(probe.model, hidden, p_mask, rows, enc.candidate_ids, pad)
            probe_loss = nll.mean()
            probe_term = bounded_probe_loss(nll, torch.tensor([len(x.candidates) for x in rows], device=device),
                                            objective.probe_bound)
        else:
            probe_loss = probe_term = torch.zeros((), device=device)
        loss = la_objective(erm, irm, probe_term, w_irm, w_probe, borrowed_loss, w_borrowed, empty_loss, w_empty,
                            mismatched_loss, w_mismatched)
    # a term not computed (its weight is 0, or no row has a borrowed rationale) is logged as nan, not as 0
    return loss, (torch.stack(erm).mean().item(), torch.stack(irm).sum().item(),
                  probe_loss.item() if with_probe else math.nan,
                  math.nan if borrowed_loss is None else borrowed_loss.item(),
                  math.nan if empty_loss is None else empty_loss.item(),
                  math.nan if mismatched_loss is None else mismatched_loss.item())


def _zero_terms_start(objective: LeakageAwareConfig) -> float:
    if objective.zero_terms_start is None:
        raise ValueError("objective.zero_terms_start is unset: resolve the objective for the backbone first "
                         "(LeakageAwareConfig.resolved)")
    return objective.zero_terms_start


def zero_terms_ramp(step: int, total: int, objective: LeakageAwareConfig) -> float:
    """The ramp of the zero terms (no-rationale rows, borrowed term): 0 for the first `zero_terms_start` share of
    the steps, then linear up to 1 over `warmup_fraction` of the steps left. `objective` must be resolved."""
    begin = _zero_terms_start(objective) * total
    if step < begin:
        return 0.0
    return ramp(step - round(begin), total - round(begin), objective.warmup_fraction)


def zero_terms_full_step(total: int, objective: LeakageAwareConfig) -> int:
    """The first step at which the zero terms are at full weight (`objective` resolved)."""
    begin = round(_zero_terms_start(objective) * total)
    return begin + math.ceil(objective.warmup_fraction * (total - begin))


def step_weights(max_weights: tuple[float, float, float, float, float], step: int, total: int,
                 objective: LeakageAwareConfig) -> tuple[float, float, float, float, float]:
    """(w_irm, w_probe, w_borrowed, w_empty, w_mismatched) at `step`: the penalties and the mismatched-rationale
    term on the thesis's warm-up, the zero terms on their own (zero_terms_ramp)."""
    r, r_zero = ramp(step, total, objective.warmup_fraction), zero_terms_ramp(step, total, objective)
    return (max_weights[0] * r, max_weights[1] * r, max_weights[2] * r_zero, max_weights[3] * r_zero,
            max_weights[4] * r)


def _run_epoch(phi_la: Evaluator, probe: Evaluator | None, train: list[LAInstance], enc: _Encoded, order: list[int],
               epoch: int, step: int, total: int, optimizer, scheduler, result: LAResult, config: TrainConfig,
               objective: LeakageAwareConfig, max_weights: tuple[float, float, float, float, float], n_env: int,
               device: torch.device, progress: bool, log_every: int, desc: str) -> tuple[dict[str, float], int]:
    """One pass over the instances in `order`, every weight ramped up per step (eq. 4.10's warm-up); appends the
    logged means to `result.trace`. Returns the epoch's mean of each logged term (over the steps that computed
    it) and the global step count after the epoch."""
    model = phi_la.model
    steps_per_epoch = math.ceil(len(order) / config.batch_size)
    parts: dict[str, list[float]] = {"erm": [], "irm": [], "probe": [], "borrowed": [], "empty": [],
                                     "mismatched": []}
    window: list[tuple[float, float, float, float, float, float]] = []
    bar = progress_bar(range(steps_per_epoch), desc=f"{desc} epoch {epoch}/{config.epochs}", enabled=progress,
                       unit="step")
    for i in bar:
        idx = order[i * config.batch_size: (i + 1) * config.batch_size]
        w_irm, w_probe, w_borrowed, w_empty, w_mismatched = step_weights(max_weights, step, total, objective)
        loss, values = _batch_loss(phi_la, probe, train, enc, idx, n_env, objective, w_irm, w_probe,
                                   max_weights[1] > 0, device, config.bf16, w_borrowed=w_borrowed, w_empty=w_empty,
                                   w_mismatched=w_mismatched)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
        optimizer.step()
        scheduler.step()
        step += 1
        window.append(values)
        for k, v in zip(parts, values):
            parts[k].append(v)
        if len(window) == log_every or i == steps_per_epoch - 1:
            mean = [_mean(col) for col in zip(*window)]
            borrowed, empty, mismatched = (None if math.isnan(v) else v for v in mean[3:])
            result.trace.append(LAStepRecord(epoch, *mean[:3], w_irm=w_irm, w_probe=w_probe, borrowed=borrowed,
                                             w_borrowed=w_borrowed, empty=empty, w_empty=w_empty,
                                             mismatched=mismatched, w_mismatched=w_mismatched))
            bar.set_postfix(erm=f"{mean[0]:.3f}", irm=f"{mean[1]:.3f}", probe=f"{mean[2]:.3f}")
            window = []
    return {k: _mean(v) for k, v in parts.items()}, step


def _mean(values) -> float:
    """The mean of the logged values a term has (nan: logged where it was not computed); nan for none."""
    present = [v for v in values if not math.isnan(v)]
    return sum(present) / len(present) if present else math.nan


def _validate(phi_la: Evaluator, val: list[LAInstance], val_candidates: list[list[str]], config: TrainConfig,
              env_names: tuple[str, ...]) -> tuple[dict[str, float], float]:
    """Per environment the mean validation log p(y | input_e) and accuracy, and their mean over the environments
    (the model-selection score); where the instances have them, the same figures of the no-rationale and borrowed
    inputs (`val_logp_empty`, `val_logp_borrowed`, ...: diagnostics, not used for selection)."""
    record, per_env = {}, []
    score_config = ScoreConfig(normalisation=config.select_by, batch_size=config.eval_batch_size)

    def figures(name: str, texts: list[str | None]) -> float | None:
        rows = [i for i, t in enumerate(texts) if t is not None]
        if not rows:
            return None
        s = score_labels(phi_la, [texts[i] for i in rows], [val[i].label for i in rows],
                         [val_candidates[i] for i in rows], score_config)
        record[f"val_logp_{name}"] = float(s.logp.mean())
        record[f"val_accuracy_{name}"] = float(s.correct.mean())
        return record[f"val_logp_{name}"]

    for e, name in enumerate(env_names):
        logp = figures(name, [x.inputs[e] for x in val])
        if logp is not None:
            per_env.append(logp)
    figures("empty", [x.empty_input for x in val])
    figures("borrowed", [x.borrowed_input for x in val])
    figures("mismatched", [x.mismatched_input for x in val])
    return record, sum(per_env) / len(per_env)


def epochs_for_min_steps(config: TrainConfig, n_instances: int, min_steps: int, desc: str = "phi_LA") -> TrainConfig:
    """`config` with enough epochs for at least `min_steps` optimizer steps over `n_instances` (batches of
    `config.batch_size`), never fewer than `config.epochs`; logs when the epochs grow."""
    per_epoch = max(1, math.ceil(n_instances / config.batch_size))
    needed = math.ceil(min_steps / per_epoch)
    if needed <= config.epochs:
        return config
    log.info("%s: %d training instances at batch %d give %d steps in %d epochs; training %d epochs to reach "
             "larev.la_min_steps=%d", desc, n_instances, config.batch_size, per_epoch * config.epochs, config.epochs,
             needed, min_steps)
    return config.model_copy(update={"epochs": needed})


def train_leakage_aware(
    phi_la: Evaluator,
    probe: Evaluator | None,
    train: list[LAInstance],
    val: list[LAInstance],
    val_candidates: list[list[str]],
    config: TrainConfig,
    objective: LeakageAwareConfig,
    task: str,
    *,
    progress: bool = True,
    log_every: int = 10,
    env_names: tuple[str, ...] = ENVIRONMENT_NAMES,
    desc: str = "phi_LA",
    checkpointer: Checkpointer | None = None,
    settings: str = "larev.la_train",
    irm_option: str = "--lambda-irm",
) -> LAResult:
    """Train phi_LA in place with eq. 4.10. `config.batch_size` counts instances (each brings its environments).

    Model selection: the epoch with the best mean validation log p(y | input_e) over the environments.
    The same loop trains RORA's evaluator (eq. 8): environments D^e, probe weight 0 and `probe` None.
    checkpointer: saves the full training state after every epoch; training resumes from its latest state.
    settings, irm_option: the parameter path of `config` and the option of the IRM weight, named in the warning
    when the kept model is at chance.
    """
    if not train:
        raise ValueError("no training instances")
    n_env = len(env_names)
    if any(len(x.inputs) != n_env or x.inputs[0] is None for x in train + val):
        raise ValueError(f"every instance needs one input per environment {env_names} (None where it lacks one; "
                         "never the first)")
    objective = objective.resolved(phi_la.config.backbone)  # unset zero-term settings: the backbone's
    w_irm_max, w_probe_max = objective.weights(task, phi_la.config.backbone)
    w_borrowed_max = objective.lambda_borrowed if any(x.borrowed_input is not None for x in train) else 0.0
    # the no-rationale rows' ERM ramps in like the penalties: phi_LA first learns to read [r, b] as the thesis's
    # does; at full weight from the first step the rows hold back its reading of [r, b]
    # (docs/defaults.md#larev_vs_empty)
    w_empty_max = 1.0 if any(x.empty_input is not None for x in train) else 0.0
    w_mismatched_max = objective.lambda_mismatched if any(x.mismatched_input is not None for x in train) else 0.0
    objective = objective.model_copy(update={"irm_on": objective.irm_target(task, phi_la.config.backbone)})
    with_probe = w_probe_max > 0
    if with_probe and probe is None:
        raise ValueError("a probe weight above 0 needs the probe model")
    generator = seed_everything(config.seed)
    device = resolve_device(config.device)
    phi_la.to(device)
    phi_la.bf16 = config.bf16
    if probe is not None:
        probe.to(device)
        freeze([probe.model])
    enc = _encode(phi_la, train, n_env, with_probe)
    n = len(train)
    # an instance's length for batching: its longest environment input
    lengths = [max((len(ids[j]) for ids in enc.env_ids if ids[j] is not None), default=0) for j in range(n)]
    steps_per_epoch = math.ceil(n / config.batch_size)
    total = steps_per_epoch * config.epochs
    model = phi_la.model
    optimizer, scheduler = optimizer_and_schedule(model, config, total, phi_la.config.backbone)
    result = LAResult()
    best = BestEpoch()
    done, state = resume_from(checkpointer, model, optimizer, scheduler, best, generator, epochs=config.epochs,
                              desc=desc)
    result.history = state.get("history", [])
    result.trace = [LAStepRecord(**t) for t in state.get("trace", [])]
    step = state.get("step", 0)
    zero_terms_on = w_borrowed_max > 0 or w_empty_max > 0
    eligible_from = zero_terms_full_step(total, objective) if zero_terms_on else 0  # first step model selection keeps
    for epoch in range(done + 1, config.epochs + 1):
        started = time.perf_counter()
        model.train()
        order = epoch_order(lengths, config.batch_size, generator, config.group_by_length)
        means, step = _run_epoch(phi_la, probe, train, enc, order, epoch, step, total, optimizer, scheduler, result,
                                config, objective, (w_irm_max, w_probe_max, w_borrowed_max, w_empty_max,
                                                    w_mismatched_max), n_env, device, progress, log_every, desc)
        record = {"epoch": epoch, **{k: v for k, v in means.items()
                                     if not (k in ("borrowed", "empty", "mismatched") and math.isnan(v))}}
        if val:
            validation, score = _validate(phi_la, val, val_candidates, config, env_names)
            record |= validation
        else:
            score = float(epoch)
        record["seconds"] = time.perf_counter() - started
        result.history.append(record)
        log.info("%s epoch %d: %s", desc, epoch, ", ".join(f"{k} {v:.4f}" for k, v in record.items()
                                                       if k != "epoch"))
        # an epoch before the zero terms are at full weight reads no rationale untrained: not a candidate
        if step >= eligible_from or epoch == config.epochs:
            best.offer(score, epoch, model)
        if checkpointer is not None:
            checkpointer.save(checkpoint_state(epoch, model, optimizer, scheduler, best, generator,
                                               {"history": result.history, "step": step,
                                                "trace": [asdict(t) for t in result.trace]}))
    best.restore(model)
    result.best_epoch = best.epoch
    kept = next((h for h in result.history if h["epoch"] == best.epoch), {})
    accuracies = [v for k, v in kept.items() if k.startswith("val_accuracy_")]
    if accuracies:
        warn_if_at_chance(desc, sum(accuracies) / len(accuracies), len(result.history), val_candidates,
                          phi_la.config.backbone, settings=settings, irm_option=irm_option)
    phi_la.meta["training"] = result.as_dict()
    phi_la.meta["train_config"] = trained_with(config, phi_la.config.backbone)
    phi_la.meta["objective"] = {**objective.model_dump(mode="json"),
                                "effective_weights": {"lambda_irm": w_irm_max, "lambda_probe": w_probe_max,
                                                      "lambda_borrowed": w_borrowed_max,
                                                      "lambda_mismatched": w_mismatched_max}}
    return result

