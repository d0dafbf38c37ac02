"""Can an embedded evaluator compare r with the instance? A diagnostic on the demo generator's data.

The demo's entailment and contradiction rows differ only in whether r's category is the hypothesis's, so an
evaluator trained by plain ERM on [r, b with its relation phrase masked] (what phi_LA must read once b's leak is
gone) reads their validation rows above 2/3 only by that comparison. This trains one such evaluator per call and
reports its validation accuracy after every epoch; run by dropout and seed, it is the figure behind phi_LA's
dropout on the embedded backbone's demo data (docs/defaults.md#larev, `la_dropout`):

    python benchmarks/comparison.py --dropout 0 --epochs 12 [--twins] [--seed 0] [--data-seed 7] [--n-train 1600]

Data seed 7 is the demo generator's tuning data (the demo itself is 13). A one-off diagnostic behind a default: it
lives in benchmarks/, outside the installed packages, and uses only the core (larev).
"""

from __future__ import annotations

import argparse
import random

from larev.config import DemoDataConfig, ModelConfig, TrainConfig
from larev.schema import NLI_LABELS


def comparison_accuracy(dropout: float = 0.1, epochs: int = 12, twins: bool = False, seed: int = 0,
                        data: DemoDataConfig = DemoDataConfig(seed=7), progress: bool = False) -> list[float]:
    """Validation accuracy after each epoch of an embedded evaluator (dropout `dropout`, initialised from `seed`)
    trained by ERM on [r, masked b] of the demo NLI data `data`; with `twins`, also on each training row's
    counterfactual twin (counterfactuals.py, the demo's categories)."""
    from larev.data.demo import generate_demo
    from larev.formats import rationale_input
    from larev.methods.leakage_aware.counterfactuals import EXCLUSIVE_TERMS, counterfactual_rationale
    from larev.models.evaluator import new_evaluator
    from larev.models.tokenizer import MASK, train_word_tokenizer
    from larev.models.train import train_evaluator

    df = generate_demo(data.model_copy(update={"task": "nli"}))
    train, val = (df.filter(df["split"] == s) for s in ("train", "validation"))

    def masked_input(r: str, premise: str, hypothesis: str) -> str:
        return rationale_input(r, f"{premise} {MASK} {hypothesis}")

    rows = list(zip(train["rationale"], train["premise"], train["hypothesis"], train["label"]))
    inputs, labels = [masked_input(r, p, h) for r, p, h, _ in rows], train["label"].to_list()
    if twins:
        rng = random.Random(seed)
        for r, p, h, y in rows:
            twin = counterfactual_rationale(r, h, y, EXCLUSIVE_TERMS["demo"], rng)
            if twin is not None:
                inputs.append(masked_input(twin[0], p, h))
                labels.append(twin[1])
    tokenizer = train_word_tokenizer([*inputs, *NLI_LABELS])
    evaluator = new_evaluator(ModelConfig(dropout=dropout), tokenizer=tokenizer, seed=seed)
    val_inputs = [masked_input(r, p, h) for r, p, h in zip(val["rationale"], val["premise"], val["hypothesis"])]
    accuracy: list[float] = []
    train_evaluator(evaluator, inputs, labels, val_inputs, val["label"].to_list(), [list(NLI_LABELS)] * val.height,
                    TrainConfig(epochs=epochs, batch_size=16, seed=seed), progress=progress, desc="comparison",
                    on_epoch_end=lambda _epoch, _ev, record: accuracy.append(record.val_accuracy),
                    chance_is_expected=True)
    return accuracy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/comparison.py", description=__doc__.splitlines()[0])
    parser.add_argument("--dropout", type=float, default=0.1, help="the evaluator's dropout (default 0.1)")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--twins", action="store_true", help="also train on the counterfactual twins")
    parser.add_argument("--seed", type=int, default=0, help="initialisation and data order")
    parser.add_argument("--data-seed", type=int, default=7, help="the demo generator's seed (7: the tuning data)")
    parser.add_argument("--n-train", type=int, default=DemoDataConfig().n_train, help="training rows (default 1600)")
    args = parser.parse_args(argv)
    accuracy = comparison_accuracy(args.dropout, args.epochs, args.twins, args.seed,
                                   DemoDataConfig(seed=args.data_seed, n_train=args.n_train))
    print(f"dropout {args.dropout} twins {args.twins} seed {args.seed}: validation accuracy by epoch "
          + " ".join(f"{a:.3f}" for a in accuracy))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
