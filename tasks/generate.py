"""`larev generate`'s steps (larev/generate/): train an offline generator, generate one source's rationales for the
test split, gather every source into one rationale table, and write it to the user's file.

A generate step's cache key covers its generator's config and the examples' digest (and a trained generator's
weights), so each source is generated once; Gemini's replies are also kept in the store's prompt cache, so a
step that failed half-way asks again only what it had not been answered."""

from __future__ import annotations

import logging

import polars as pl
from prefect import task
from prefect.cache_policies import NONE

from larev import __version__
from larev.errors import ConfigError
from larev.generate.clients import generate_prompted, prompted_client
from larev.generate.config import (EmbeddedGeneratorConfig, GeminiGeneratorConfig, HFCausalGeneratorConfig,
                                   HFSeq2SeqGeneratorConfig, HypothesisCopyConfig, LabelOnlyConfig)
from larev.generate.defects import LABEL_ONLY_TEMPLATE, hypothesis_copy, label_only
from larev.generate.prompt import NLI_PROMPT, QA_PROMPT, rationale_prompts
from larev.generate.table import rationale_rows, write_rationale_file
from larev.generate.trained import generate_from_model, generator_inputs, train_rationale_generator
from larev.models.evaluator import load_evaluator
from larev.schema import validate_rationales
from storage import ArtifactStore
from storage.ref import ArtifactRef
from tasks.data import examples_in_test_split
from tasks.runtime.cache import larev_task
from tasks.runtime.checkpoints import epoch_checkpoints
from tasks.runtime.outputs import put_json, put_table
from tasks.runtime.secrets import gemini_api_key, gemini_options
from tasks.training import new_run_evaluator, put_evaluator, split_train_validation, train_val_examples

log = logging.getLogger(__name__)

#: Where the C.3 prompt comes from, as the provenance of a prompted source states it.
PROMPT_SOURCE = "thesis appendix C.3 (NLI: premise and hypothesis in the question's place)"


@larev_task("generator", task_run_name="generator-{config.name}", gpu=True)
def train_generator(store: ArtifactStore, examples: ArtifactRef, tokenizer: ArtifactRef,
                    config: EmbeddedGeneratorConfig, progress: bool = True) -> ArtifactRef:
    """An embedded T5 trained on its budget of the training rows to write the gold rationale of (label, input)."""
    train, validation = split_train_validation(train_val_examples(store, examples))
    generator = new_run_evaluator(store, tokenizer, config.model, config.train.seed)
    with epoch_checkpoints(store, "generator", config.train.epochs, f"generator[{config.name}]") as checkpoints:
        train_rationale_generator(generator, train, validation, config, progress=progress, checkpointer=checkpoints)
        return put_evaluator(store, "generator", generator, f"generator-{config.name}")


@larev_task("generate", task_run_name="generate-{config.name}", gpu=True)
def generate_with_model(store: ArtifactStore, examples: ArtifactRef,
                        config: EmbeddedGeneratorConfig | HFSeq2SeqGeneratorConfig | HFCausalGeneratorConfig,
                        generator: ArtifactRef | None = None, device: str = "auto", model_digest: str | None = None,
                        progress: bool = True) -> dict[str, ArtifactRef]:
    """One source's rationales for the test split from a model run here: a trained generator (`generator`) on
    (label, input), or a Hugging Face model on the C.3 prompt (`model_digest`: a local model directory's content
    hash, tasks.stress.local_model_digest, so a model changed in place is generated with again)."""
    test = examples_in_test_split(store, examples)
    if isinstance(config, EmbeddedGeneratorConfig):
        model = load_evaluator(store.get_dir(generator.key), device=device)
        texts = generate_from_model(model, generator_inputs(test), config.decoding, progress=progress,
                                    desc=f"generate[{config.name}]")
        facts = {"model": {"key": generator.key, "digest": generator.digest},
                 "training_rows": model.meta.get("training_rows")}
    else:
        client = prompted_client(config, device=device)
        texts = generate_prompted(client, rationale_prompts(test), test["id"].to_list(), name=config.name,
                                  batch_size=config.batch_size, progress=progress)
        facts = {**prompt_facts(test), "model_digest": model_digest}
    return source_outputs(store, test, config, texts, facts)


@larev_task("generate-api", task_run_name="generate-{config.name}")
def generate_with_api(store: ArtifactStore, examples: ArtifactRef, config: GeminiGeneratorConfig,
                      progress: bool = True) -> dict[str, ArtifactRef]:
    """One source's rationales for the test split from Gemini on the C.3 prompt, through the store's prompt
    cache."""
    test = examples_in_test_split(store, examples)
    client = prompted_client(config, **gemini_options(store))
    texts = generate_prompted(client, rationale_prompts(test), test["id"].to_list(), name=config.name,
                              progress=progress)
    return source_outputs(store, test, config, texts, prompt_facts(test))


@larev_task("generate-rule", task_run_name="generate-{config.name}")
def generate_by_rule(store: ArtifactStore, examples: ArtifactRef,
                     config: LabelOnlyConfig | HypothesisCopyConfig) -> dict[str, ArtifactRef]:
    """One source's rationales for the test split from a known-defect rule: the label alone, or the hypothesis
    (QA: the question) copied."""
    test = examples_in_test_split(store, examples)
    if isinstance(config, LabelOnlyConfig):
        texts, facts = label_only(test["label"].to_list()), {"template": LABEL_ONLY_TEMPLATE}
    else:
        texts = hypothesis_copy(test["task"].to_list(), test["hypothesis"].to_list(), test["question"].to_list())
        facts = {}
    return source_outputs(store, test, config, texts, facts)


def prompt_facts(test: pl.DataFrame) -> dict:
    """A prompted source's provenance: where its prompt comes from and the template its task filled."""
    return {"prompt": PROMPT_SOURCE, "template": NLI_PROMPT if test["task"][0] == "nli" else QA_PROMPT}


def source_outputs(store: ArtifactStore, test: pl.DataFrame, config, texts: list[str | None],
                   facts: dict) -> dict[str, ArtifactRef]:
    """One source's rationale table and provenance (its config, its rows, the ids it wrote nothing for)."""
    frame, missing = rationale_rows(test["id"].to_list(), test["label"].to_list(), texts, config.name)
    if missing:
        log.warning("generator %s wrote nothing for %d of %d test examples (left out of the file), e.g. id %r",
                    config.name, len(missing), test.height, missing[0])
    record = {"source": config.name, "kind": config.kind, "config": config.model_dump(mode="json"),
              "rows": frame.height, "without_text": len(missing), "without_text_ids": missing[:20], **facts}
    return {"rationales": put_table(store, "rationales.parquet", frame),
            "provenance": put_json(store, "provenance.json", record)}


@larev_task("rationale-file")
def gather_sources(store: ArtifactStore, examples: ArtifactRef,
                   sources: list[dict[str, ArtifactRef]]) -> dict[str, ArtifactRef]:
    """Every source's rows in one rationale table, in the generators' order, validated against the test split
    (larev.schema.validate_rationales), with every source's provenance."""
    test = examples_in_test_split(store, examples)
    frame = pl.concat([store.read_parquet(s["rationales"].key) for s in sources])
    frame = validate_rationales(frame, test, file="generated rationales")
    provenance = {"larev_version": __version__, "examples_digest": examples.digest, "test_rows": test.height,
                  "sources": [store.read_json(s["provenance"].key) for s in sources]}
    return {"rationales": put_table(store, "generated.parquet", frame),
            "provenance": put_json(store, "provenance.json", provenance)}


@task(name="export-generated", task_run_name="export-generated", cache_policy=NONE, persist_result=False)
def export_generated(store: ArtifactStore, generated: dict[str, ArtifactRef], out: str, origin: dict) -> dict:
    """Write the gathered table to `out` (.jsonl, .csv or .parquet) with its provenance (and `origin`: the run or
    data it was generated for) beside it; the two paths."""
    frame = store.read_parquet(generated["rationales"].key)
    provenance = {**origin, **store.read_json(generated["provenance"].key)}
    path, record = write_rationale_file(frame, out, provenance)
    return {"out": str(path), "provenance": str(record), "rows": frame.height}


def check_gemini_key(configs: list) -> None:
    """A ConfigError before any step when a Gemini generator is asked for and no API key is found."""
    gemini = [c for c in configs if isinstance(c, GeminiGeneratorConfig)]
    if gemini and gemini_api_key() is None:
        raise ConfigError(f"generator {gemini[0].name!r} (Gemini model {gemini[0].model!r}) needs an API key: set "
                          "GEMINI_API_KEY (GOOGLE_API_KEY also works) or the Prefect Secret block 'gemini-api-key'")
