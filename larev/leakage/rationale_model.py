"""The rationale-only model (RORA 3.1's Phi_small: R -> P(Y)) and Integrated Gradients over it.

A deliberately weak model predicts the label from the rationale alone. Two kinds: `ngrams`, a bag of word n-grams
(mean of n-gram embeddings, fastText style), and `encoder`, one small Transformer layer over word embeddings.
Either scores candidate k as <h(r), u(label_k)>, where u is a mean of label-word embeddings, so one model covers
NLI's fixed relations and QA's per-question choices. IG (captum) of log p(gold label | r) with respect to the
rationale's token embeddings, a zero (= padding) reference, in eval mode; a bigram's attribution is split equally
between its two words. The same model gives LAS's leakage indicator (REV paper 3.3): a rationale leaks when the
rationale-only model recovers its label from it.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from pydantic import Field

from larev.config import _Config
from larev.device import seed_everything
from larev.errors import ConfigError
from larev.models.evaluator import pad_batch
from larev.progress import progress_bar

WORD = re.compile(r"\w+|[^\w\s]")
PAD, UNK = "<pad>", "<unk>"
MODEL_FILE, VOCAB_FILE, CONFIG_FILE = "model.safetensors", "vocab.json", "rationale_model.json"


def words_with_offsets(text: str) -> list[tuple[str, int, int]]:
    """Lower-cased words and punctuation marks of `text` with their character spans."""
    return [(m.group().lower(), m.start(), m.end()) for m in WORD.finditer(text or "")]


class RationaleModelConfig(_Config):
    """The rationale-only model Phi_small (RORA 3.1: small, weakly contextual, lightly trained)."""

    kind: Literal["ngrams", "encoder"] = Field(
        "ngrams", description="ngrams: bag of word n-grams (fastText style); encoder: one small Transformer layer")
    ngram: int = Field(2, ge=1, le=3, description="ngrams: use word n-grams up to this order")
    dim: int = Field(64, ge=4, description="embedding size")
    min_count: int = Field(2, ge=1, description="n-grams seen fewer times in training map to the unknown token")
    max_words: int = Field(96, ge=4, description="rationales are cut to this many words")
    epochs: int = Field(5, ge=1)
    batch_size: int = Field(64, ge=1)
    learning_rate: float = Field(2e-2, gt=0, description="Adam")
    seed: int = Field(0)
    copy_term: Literal["auto", "on", "off"] = Field(
        "auto", description="on: candidate k also scores <h(r), v_k>, v_k the mean of its words in r's own embedding "
                            "table times a learned weight, so a candidate restated in r is read even for answers "
                            "never seen as labels; auto: on when the rows have their own candidate sets (QA's "
                            "choices), off for one fixed label set (NLI)")


def per_row_label_sets(candidates: list[list[str]]) -> bool:
    """Whether the rows have their own candidate sets (QA's choices) rather than one fixed label set (NLI)."""
    return len({tuple(c) for c in candidates}) > 1


def resolve_copy(config: RationaleModelConfig, candidates: list[list[str]]) -> RationaleModelConfig:
    """copy_term "auto" made concrete for a training set: "on" when its rows' candidate sets differ (QA), else "off"."""
    if config.copy_term != "auto":
        return config
    return config.model_copy(update={"copy_term": "on" if per_row_label_sets(candidates) else "off"})


class RationaleClassifier(torch.nn.Module):
    """h(r) from token embeddings, candidate label k scored as <h(r), u_k> (u_k = mean label-word embedding), plus
    copy_weight * <h(r), v_k> with copy on (v_k = mean of k's words in h's own table: a word of k that occurs in r
    adds copy_weight * |e_w|^2 / n_tokens(r), whatever k is)."""

    def __init__(self, vocab_size: int, config: RationaleModelConfig):
        super().__init__()
        if config.copy_term == "auto":
            raise ValueError("RationaleClassifier needs copy_term 'on' or 'off': resolve 'auto' (resolve_copy) first")
        self.kind = config.kind
        self.embed = torch.nn.Embedding(vocab_size, config.dim, padding_idx=0)
        self.label_embed = torch.nn.Embedding(vocab_size, config.dim, padding_idx=0)
        self.copy_weight = torch.nn.Parameter(torch.tensor(1.0)) if config.copy_term == "on" else None
        if config.kind == "encoder":
            self.position = torch.nn.Embedding(config.max_words * config.ngram + 1, config.dim)
            self.layer = torch.nn.TransformerEncoderLayer(config.dim, nhead=4 if config.dim % 4 == 0 else 1,
                                                          dim_feedforward=2 * config.dim, dropout=0.1,
                                                          batch_first=True)

    def logits_from_embeddings(self, embeds: torch.Tensor, mask: torch.Tensor, label_vecs: torch.Tensor,
                               label_mask: torch.Tensor) -> torch.Tensor:
        """embeds [B, L, d] (the IG input), mask [B, L]; label_vecs [B, K, d]; label_mask [B, K] -> logits [B, K]
        (-inf where a row has fewer candidates)."""
        m = mask.to(embeds.dtype)[:, :, None]
        if self.kind == "encoder":
            pos = self.position(torch.arange(embeds.shape[1], device=embeds.device))[None]
            embeds = self.layer(embeds + pos, src_key_padding_mask=mask == 0)
        h = (embeds * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)
        logits = torch.einsum("bd,bkd->bk", h, label_vecs)
        return logits.masked_fill(label_mask == 0, -math.inf)

    def label_vectors(self, label_ids: torch.Tensor, label_tok_mask: torch.Tensor) -> torch.Tensor:
        """label_ids [B, K, T] word ids of each candidate -> [B, K, d]: u_k, plus copy_weight * v_k with copy on."""
        e = self.label_embed(label_ids) * label_tok_mask[..., None]
        vectors = e.sum(dim=2) / label_tok_mask.sum(dim=2, keepdim=True).clamp(min=1.0)
        if self.copy_weight is not None:
            known = label_tok_mask * (label_ids > 1)  # <pad> and <unk> never match a word of r
            v = (self.embed(label_ids) * known[..., None]).sum(dim=2) / known.sum(dim=2, keepdim=True).clamp(min=1.0)
            vectors = vectors + self.copy_weight * v
        return vectors


@dataclass
class RationaleModel:
    """The trained rationale-only model with its n-gram vocabulary and config."""

    net: RationaleClassifier
    vocab: dict[str, int]
    config: RationaleModelConfig
    meta: dict

    def encode(self, text: str) -> tuple[list[int], list[tuple[int, ...]], list[tuple[str, int, int]]]:
        """Token ids (unigrams, then higher n-grams), the word indices each token covers, and the words."""
        words = words_with_offsets(text)[: self.config.max_words]
        ids, covers = [], []
        for n in range(1, self.config.ngram + 1):
            for i in range(len(words) - n + 1):
                gram = " ".join(w for w, _, _ in words[i:i + n])
                ids.append(self.vocab.get(gram, 1))
                covers.append(tuple(range(i, i + n)))
        return ids, covers, words

    def label_word_ids(self, label: str) -> list[int]:
        return [self.vocab.get(w, 1) for w, _, _ in words_with_offsets(label)] or [1]


def build_vocab(texts: list[str], labels: list[str], config: RationaleModelConfig) -> dict[str, int]:
    """n-grams seen at least `min_count` times, and every label word (ids 0/1 are <pad>/<unk>)."""
    counts: dict[str, int] = {}
    for text in texts:
        words = [w for w, _, _ in words_with_offsets(text)[: config.max_words]]
        for n in range(1, config.ngram + 1):
            for i in range(len(words) - n + 1):
                gram = " ".join(words[i:i + n])
                counts[gram] = counts.get(gram, 0) + 1
    vocab = {PAD: 0, UNK: 1}
    for gram in sorted(g for g, c in counts.items() if c >= config.min_count):
        vocab[gram] = len(vocab)
    for label in labels:
        for w, _, _ in words_with_offsets(label):
            vocab.setdefault(w, len(vocab))
    return vocab


def _batch(model: RationaleModel, texts: list[str], candidates: list[list[str]], labels: list[str] | None,
           encoded: list[list[int]] | None = None):
    """Padded tensors of one batch; `encoded` (each text's `encode` ids, computed once by the caller) skips
    re-encoding texts seen every epoch."""
    if encoded is None:
        encoded = [model.encode(t)[0] or [1] for t in texts]
    ids, mask = pad_batch(encoded, pad_id=0)
    k_max = max(len(c) for c in candidates)
    label_words = [[model.label_word_ids(c) for c in cands] for cands in candidates]
    t_max = max(len(w) for row in label_words for w in row)
    padded = [[w + [0] * (t_max - len(w)) for w in row] + [[0] * t_max] * (k_max - len(row)) for row in label_words]
    lab_ids = torch.tensor(padded, dtype=torch.long)
    lab_tok_mask = torch.tensor([[[1.0] * len(w) + [0.0] * (t_max - len(w)) for w in row]
                                 + [[0.0] * t_max] * (k_max - len(row)) for row in label_words])
    lab_mask = torch.tensor([[1] * len(row) + [0] * (k_max - len(row)) for row in label_words], dtype=torch.long)
    target = None
    if labels is not None:
        target = torch.tensor([cands.index(y) for cands, y in zip(candidates, labels)])
    return ids, mask, lab_ids, lab_tok_mask, lab_mask, target


def train_rationale_model(texts: list[str], labels: list[str], candidates: list[list[str]],
                          config: RationaleModelConfig, *, progress: bool = False) -> RationaleModel:
    """Fit Phi_small on (rationale, label) pairs with cross-entropy over each row's label set."""
    if not texts or len(texts) != len(labels) or len(texts) != len(candidates):
        raise ValueError("texts, labels and candidates must be non-empty and of the same length")
    for i, (y, cands) in enumerate(zip(labels, candidates)):
        if y not in cands:
            raise ValueError(f"row {i}: label {y!r} is not among its candidates {cands}")
    config = resolve_copy(config, candidates)
    generator = seed_everything(config.seed)
    vocab = build_vocab(texts, sorted({c for cands in candidates for c in cands}), config)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        net = RationaleClassifier(len(vocab), config)
    model = RationaleModel(net, vocab, config, meta={})
    optimizer = torch.optim.Adam(net.parameters(), lr=config.learning_rate)
    history = []
    encoded = [model.encode(t)[0] or [1] for t in texts]  # once, not once per epoch
    for epoch in range(1, config.epochs + 1):
        net.train()
        order = torch.randperm(len(texts), generator=generator).tolist()
        total, correct = 0.0, 0
        starts = range(0, len(order), config.batch_size)
        for start in progress_bar(starts, desc=f"rationale-only model epoch {epoch}/{config.epochs}",
                                  enabled=progress, unit="batch"):
            idx = order[start:start + config.batch_size]
            ids, mask, lab_ids, lab_tok_mask, lab_mask, target = _batch(
                model, [texts[i] for i in idx], [candidates[i] for i in idx], [labels[i] for i in idx],
                [encoded[i] for i in idx])
            logits = net.logits_from_embeddings(net.embed(ids), mask, net.label_vectors(lab_ids, lab_tok_mask),
                                                lab_mask)
            loss = torch.nn.functional.cross_entropy(logits, target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(idx)
            correct += int((logits.argmax(dim=1) == target).sum())
        history.append({"epoch": epoch, "train_loss": total / len(texts), "train_accuracy": correct / len(texts)})
    net.eval()
    model.meta = {"history": history, "vocab_size": len(vocab)}
    return model


@torch.no_grad()
def predict(model: RationaleModel, texts: list[str], candidates: list[list[str]],
            batch_size: int = 256) -> list[str]:
    """The rationale-only model's predicted label for each rationale."""
    model.net.eval()
    out: list[str] = []
    for start in range(0, len(texts), batch_size):
        t, c = texts[start:start + batch_size], candidates[start:start + batch_size]
        ids, mask, lab_ids, lab_tok_mask, lab_mask, _ = _batch(model, t, c, None)
        net = model.net
        logits = net.logits_from_embeddings(net.embed(ids), mask, net.label_vectors(lab_ids, lab_tok_mask), lab_mask)
        out.extend(cands[k] for cands, k in zip(c, logits.argmax(dim=1).tolist()))
    return out


def save_rationale_model(model: RationaleModel, out_dir: str | Path) -> Path:
    """Weights as safetensors, the vocabulary and the config as JSON (no pickles)."""
    from safetensors.torch import save_file

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in model.net.state_dict().items()}, str(out / MODEL_FILE))
    (out / VOCAB_FILE).write_text(json.dumps(model.vocab))
    (out / CONFIG_FILE).write_text(json.dumps({"config": model.config.model_dump(mode="json"), "meta": model.meta},
                                              indent=2, sort_keys=True))
    return out


def load_rationale_model(path: str | Path) -> RationaleModel:
    from safetensors.torch import load_file

    path = Path(path)
    if not (path / CONFIG_FILE).exists():
        raise ConfigError(f"{path} is not a rationale-only model directory (no {CONFIG_FILE})")
    payload = json.loads((path / CONFIG_FILE).read_text())
    # a model saved before `copy_term` existed had no copy term
    config = RationaleModelConfig(**{"copy_term": "off", **payload["config"]})
    vocab = json.loads((path / VOCAB_FILE).read_text())
    net = RationaleClassifier(len(vocab), config)
    net.load_state_dict(load_file(str(path / MODEL_FILE)))
    net.eval()
    return RationaleModel(net, vocab, config, payload.get("meta", {}))


def word_attributions(model: RationaleModel, texts: list[str], labels: list[str], candidates: list[list[str]],
                      config, *, progress: bool = False) -> list[list[float]]:
    """IG attribution of log p(label | r) to each word of each rationale (the words of `words_with_offsets`,
    cut to max_words), n-gram attributions split equally over their words."""
    from captum.attr import IntegratedGradients

    net = model.net
    net.eval()

    def forward(embeds, mask, label_vecs, label_mask, target):
        logits = net.logits_from_embeddings(embeds, mask, label_vecs, label_mask)
        return torch.log_softmax(logits, dim=1).gather(1, target[:, None]).squeeze(1)

    ig = IntegratedGradients(forward)
    out: list[list[float]] = []
    starts = range(0, len(texts), config.batch_size)
    for start in progress_bar(starts, desc="integrated gradients (rationales)", enabled=progress, unit="batch"):
        t, y, c = texts[start:start + config.batch_size], labels[start:start + config.batch_size], \
            candidates[start:start + config.batch_size]
        ids, mask, lab_ids, lab_tok_mask, lab_mask, target = _batch(model, t, c, y)
        with torch.no_grad():
            embeds = net.embed(ids)
            label_vecs = net.label_vectors(lab_ids, lab_tok_mask)
        with torch.enable_grad():
            attr = ig.attribute(embeds, baselines=torch.zeros_like(embeds),
                                additional_forward_args=(mask, label_vecs, lab_mask, target), n_steps=config.n_steps)
        per_token = attr.detach().sum(dim=-1)
        for b, text in enumerate(t):
            _, covers, words = model.encode(text)
            scores = [0.0] * len(words)
            for p, cover in enumerate(covers):
                share = float(per_token[b, p]) / len(cover)
                for w in cover:
                    scores[w] += share
            out.append(scores)
    return out


def accuracy_of(model: RationaleModel, texts: list[str], labels: list[str], candidates: list[list[str]]) -> float:
    if not texts:
        return float("nan")
    return sum(p == y for p, y in zip(predict(model, texts, candidates), labels)) / len(texts)
