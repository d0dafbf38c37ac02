"""Which learning rate the minilm-reader backbone trains at: a diagnostic on e-SNLI's training rows.

Trains the rationale-only evaluator (role `r_only`: it reads r alone, so its validation fit is about reading the
rationale, not the label b states) on e-SNLI dev :6000 (the validation split carved from them as every run carves
it), 3 epochs, once per learning rate, and writes each epoch's validation accuracy and mean log p(label) and the
seconds it took:

    python benchmarks/reader_learning_rate.py --data ../shared/data/esnli/dev.parquet --rates 1e-4,3e-4,1e-3 \\
        --out docs/readers/learning-rate.json

The figure behind minilm-reader's rate (docs/defaults.md#backbones). A one-off diagnostic behind a default: it lives
in benchmarks/, outside the installed packages, and uses only the core (larev).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def sweep(data: str, rates: list[float], trained_layers: int = 2, role: str = "r_only", epochs: int = 3) -> dict:
    import polars as pl

    from larev.baselines.build import build_baselines
    from larev.config import BaselineConfig, ModelConfig, TrainConfig
    from larev.data.sources import DataConfig, load_data
    from larev.formats import target_text
    from larev.methods.rev.inputs import evaluator_inputs
    from larev.methods.vocabulary import run_vocabularies
    from larev.models.evaluator import new_evaluator
    from larev.models.train import train_evaluator
    from larev.schema import label_sets

    examples = load_data(DataConfig(source="files", task="nli", train=data, test=data, train_rows=":6000",
                                    test_rows="6000:6010"))
    baselines = build_baselines(examples, BaselineConfig()).with_columns(label=examples["label"])
    frame = examples.join(baselines.select("id", "label", "baseline"), on=["id", "label"], how="left")
    train, val = frame.filter(pl.col("split") == "train"), frame.filter(pl.col("split") == "validation")
    model = ModelConfig(backbone="minilm-reader", trained_layers=trained_layers)
    _, output_ids = run_vocabularies(model, None, examples)
    out = {"data": "e-SNLI dev :6000 (validation carved from it)", "role": role, "epochs": epochs,
           "trained_layers": trained_layers, "train_rows": train.height, "validation_rows": val.height, "rates": {}}
    for rate in rates:
        evaluator = new_evaluator(model, seed=42, output_vocabulary=output_ids)
        started = time.perf_counter()
        result = train_evaluator(evaluator, evaluator_inputs(role, train), [target_text(y) for y in train["label"]],
                                 evaluator_inputs(role, val), [target_text(y) for y in val["label"]],
                                 label_sets(val), TrainConfig(epochs=epochs, learning_rate=rate, seed=42,
                                                              device="cpu"), progress=False, desc=role)
        out["rates"][f"{rate:g}"] = {
            "epochs": [{"epoch": h.epoch, "val_accuracy": round(h.val_accuracy, 4), "val_logp": round(h.val_logp, 4)}
                       for h in result.history],
            "best_epoch": result.best_epoch, "seconds": round(time.perf_counter() - started)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--rates", default="1e-4,3e-4,1e-3")
    parser.add_argument("--trained-layers", type=int, default=2)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    result = sweep(args.data, [float(r) for r in args.rates.split(",")], args.trained_layers)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
