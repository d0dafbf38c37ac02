"""The task model f that FTC queries on (premise, counterfactual hypothesis) pairs (section 2.1: f(u, x_cf)).

`NliTaskModel` is anything with `predict_proba(premises, hypotheses) -> [n, 3]` probabilities whose columns are
in the order of `larev.schema.NLI_LABELS`. Two implementations:

  HFSequenceClassifier  a Hugging Face sequence classifier (e.g. an MNLI/SNLI fine-tune), the pair encoded as
                        two segments; its config.id2label names are mapped onto NLI_LABELS case-insensitively
  EvaluatorTaskModel    the project's own seq2seq evaluator (`larev.models.evaluator`), scoring the three label
                        texts as decoder targets for the project's NLI input text; p = softmax over the three
                        summed label log-probabilities (the label-set normalisation of RORA eq. 8)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from larev.errors import ConfigError
from larev.llm import load_local_first
from larev.schema import NLI_LABELS


@runtime_checkable
class NliTaskModel(Protocol):
    """f: (premises, hypotheses) -> [n, 3] probabilities, columns in NLI_LABELS order, rows summing to 1."""

    def predict_proba(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray: ...


def _check_pairs(premises: Sequence[str], hypotheses: Sequence[str]) -> None:
    if len(premises) != len(hypotheses):
        raise ValueError(f"{len(premises)} premises but {len(hypotheses)} hypotheses")


def _softmax(scores: np.ndarray) -> np.ndarray:
    z = scores - scores.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def label_columns(id2label: Mapping[Any, str], *, model: str = "the model") -> list[int]:
    """For each label of NLI_LABELS, the classifier output index whose id2label name it is (case-insensitive,
    surrounding whitespace ignored). ConfigError when the names are not exactly the three NLI labels."""
    by_name: dict[str, int] = {}
    for idx, name in id2label.items():
        key = str(name).strip().lower()
        if key in by_name:
            raise ConfigError(f"{model}: id2label names {key!r} twice ({dict(id2label)})")
        by_name[key] = int(idx)
    missing = [label for label in NLI_LABELS if label not in by_name]
    if missing or len(by_name) != len(NLI_LABELS):
        raise ConfigError(
            f"{model}: its config.id2label {dict(id2label)} does not name the NLI labels {list(NLI_LABELS)} "
            f"(missing {missing}); FTC needs a 3-way NLI classifier whose labels are named entailment, "
            "contradiction and neutral (any case): fix id2label in the model's config.json")
    return [by_name[label] for label in NLI_LABELS]


class HFSequenceClassifier:
    """A local Hugging Face sequence-classification model as FTC's task model.

    `name_or_path` is a directory saved with `save_pretrained` or a hub name found in the local HF cache
    (hub names not cached are fetched only when the hub is reachable and HF_HUB_OFFLINE is unset); weights
    are read from safetensors only. Loading happens on first use.
    """

    def __init__(self, name_or_path: str, device: str = "auto", *, batch_size: int = 32, max_length: int = 256):
        if batch_size < 1 or max_length < 8:
            raise ConfigError("batch_size must be >= 1 and max_length >= 8")
        self.model = name_or_path
        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length
        self._loaded: tuple[Any, Any, Any, list[int]] | None = None

    def _from_pretrained(self, local_only: bool) -> tuple[Any, Any]:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        return (AutoTokenizer.from_pretrained(self.model, local_files_only=local_only),
                # safetensors weights only: a pickled pytorch_model.bin is refused, never unpickled
                AutoModelForSequenceClassification.from_pretrained(self.model, local_files_only=local_only,
                                                                   use_safetensors=True))

    def _load_error(self, exc: Exception) -> ConfigError:
        return ConfigError(
            f"cannot load the Hugging Face sequence classifier {self.model!r} ({type(exc).__name__}: {exc}). "
            "The Hugging Face hub is not reachable offline: give a local directory holding the model (saved "
            "with save_pretrained, safetensors weights) or a name already in the local HF cache")

    def _load(self) -> tuple[Any, Any, Any, list[int]]:
        if self._loaded is None:
            from larev.device import resolve_device

            tokenizer, model = load_local_first(self.model, self._from_pretrained, self._load_error)
            columns = label_columns(model.config.id2label, model=self.model)
            device = resolve_device(self.device)
            model.to(device).eval()
            self._loaded = (tokenizer, model, device, columns)
        return self._loaded

    def predict_proba(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        import torch

        _check_pairs(premises, hypotheses)
        if not premises:
            return np.zeros((0, len(NLI_LABELS)))
        tokenizer, model, device, columns = self._load()
        out = []
        for start in range(0, len(premises), self.batch_size):
            enc = tokenizer(list(premises[start:start + self.batch_size]),
                            list(hypotheses[start:start + self.batch_size]), return_tensors="pt", padding=True,
                            truncation=True, max_length=self.max_length).to(device)
            with torch.no_grad():
                logits = model(**enc).logits.float()
            out.append(torch.softmax(logits[:, columns], dim=-1).cpu().numpy().astype(np.float64))
        return np.concatenate(out, axis=0)


def nli_input_text(premise: str, hypothesis: str) -> str:
    """The project's input text for an evaluator that predicts the NLI label from x alone (RORA's theta, eq. 9):
    `input_only(task_input('nli', premise, hypothesis))`."""
    from larev.formats import input_only, task_input

    return input_only(task_input("nli", premise, hypothesis, None, None))


class EvaluatorTaskModel:
    """The project's seq2seq evaluator as FTC's task model.

    Each of the three NLI label texts is scored as the decoder target with `score_labels` under the 'sum'
    normalisation (s_k = summed label-token log-probs), and p = softmax_k(s_k): the label-set distribution of
    the module docstring of `larev.models.evaluator` (one `score_labels` pass per label, so three encoder
    passes per batch). `input_text` builds the evaluator's input from a pair;
    the default is the input RORA's no-rationale evaluator theta is trained on (`nli_input_text`).
    """

    def __init__(self, evaluator: Any, *, score_config: Any = None,
                 input_text: Callable[[str, str], str] = nli_input_text):
        from larev.config import ScoreConfig

        base = score_config or ScoreConfig()
        self.evaluator = evaluator
        self.score_config = base.model_copy(update={"normalisation": "sum"})
        self.input_text = input_text

    def predict_proba(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        from larev.models.evaluator import score_labels

        _check_pairs(premises, hypotheses)
        if not premises:
            return np.zeros((0, len(NLI_LABELS)))
        inputs = [self.input_text(p, h) for p, h in zip(premises, hypotheses)]
        candidates = [list(NLI_LABELS)] * len(inputs)
        scores = np.stack([score_labels(self.evaluator, inputs, [label] * len(inputs), candidates,
                                        self.score_config).logp for label in NLI_LABELS], axis=1)
        return _softmax(scores)
