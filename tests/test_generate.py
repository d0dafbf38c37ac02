"""`larev generate` (larev/generate/, tasks/generate.py, flows/generate.py): the thesis's C.3 prompt filled in, the
known-defect generators on hand-written rows, the nested training budgets, the generator specs, Gemini against the
loopback fake (retries, a permanent error, a missing key), the Hugging Face clients on tiny local models, and the
flow under the harness: a file the rationale contract accepts, one source per generator, cached on a rerun."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import torch
import yaml

from larev.config import DemoDataConfig, ModelConfig, TrainConfig
from larev.data.demo import LEAK_TEMPLATES
from larev.data.sources import DataConfig
from larev.data.variants import LEAKY_TEMPLATE
from larev.errors import ConfigError
from larev.generate.clients import generate_prompted, prompted_client
from larev.generate.config import (DEFAULT_GENERATOR_SPECS, EmbeddedGeneratorConfig, GeminiGeneratorConfig,
                                   HFCausalGeneratorConfig, default_generators, generator_configs, parse_generator_spec)
from larev.generate.defects import LABEL_ONLY_TEMPLATE, deranged, hypothesis_copy, label_only
from larev.generate.prompt import clean_reply, rationale_prompt, rationale_prompts
from larev.generate.table import provenance_path, rationale_rows, write_rationale_file
from larev.generate.trained import budget_rows, generate_from_model, generator_input, training_pairs
from larev.llm import GenerationError, HFCausalGenerator
from larev.schema import validate_rationales
from tests.fake_gemini import KEY, gemini  # noqa: F401  (the loopback Gemini fixture)
from tests.helpers import tiny_evaluator

REPO = Path(__file__).resolve().parents[1]

# thesis appendix C.1's e-SNLI example; a CoS-E-like question
NLI_ROW = {"task": "nli", "premise": "A couple walk hand in hand down a street.",
           "hypothesis": "A couple is sitting on a bench.", "question": None, "label": "contradiction"}
QA_ROW = {"task": "qa", "premise": None, "hypothesis": None, "question": "Where would you find a refrigerator?",
          "label": "kitchen"}
ROW_SCHEMA = {"task": pl.String, "premise": pl.String, "hypothesis": pl.String, "question": pl.String,
              "choices": pl.List(pl.String), "label": pl.String, "rationale": pl.String}

C3_TAIL = ("Explain why the answer is correct in detail.\n\n"
           "Assume the given answer is correct. Do not challenge or change the answer.\n\n"
           "Please finish in one sentence.")


# ------------------------------------------------------------------------------------------------ the C.3 prompt


def test_the_c3_prompt_for_an_nli_example_has_premise_and_hypothesis_in_the_questions_place():
    assert rationale_prompt(**NLI_ROW) == (
        "Premise: A couple walk hand in hand down a street.\n\n"
        "Hypothesis: A couple is sitting on a bench.\n\n"
        "Answer: contradiction\n\n" + C3_TAIL)


def test_the_c3_prompt_for_a_qa_example_is_the_thesis_template_filled_in():
    assert rationale_prompt(**QA_ROW) == (
        "Question: Where would you find a refrigerator?\n\n"
        "Answer: kitchen\n\n" + C3_TAIL)
    frame = pl.DataFrame([QA_ROW, {**QA_ROW, "question": " Why? ", "label": " because "}],
                         schema={k: ROW_SCHEMA[k] for k in QA_ROW})
    assert rationale_prompts(frame)[1] == "Question: Why?\n\nAnswer: because\n\n" + C3_TAIL


def test_a_reply_is_cleaned_to_one_line_and_an_empty_one_is_none():
    reply = '  "The couple cannot\n be walking and sitting."  '
    assert clean_reply(reply) == "The couple cannot be walking and sitting."
    assert clean_reply(" \n ") is None and clean_reply(None) is None and clean_reply('""') is None


# ------------------------------------------------------------------------------------------------ known defects


def test_label_only_states_the_label_in_a_sentence_no_other_template_uses():
    assert label_only(["entailment", " neutral ", "kitchen"]) == ["Verdict: entailment.", "Verdict: neutral.",
                                                                 "Verdict: kitchen."]
    assert LABEL_ONLY_TEMPLATE not in (LEAKY_TEMPLATE, *LEAK_TEMPLATES)
    users = [p.relative_to(REPO) for root in ("larev", "tasks", "flows") for p in (REPO / root).rglob("*.py")
             if "Verdict: {label}" in p.read_text() or "Verdict: " in p.read_text()]
    assert users == [Path("larev/generate/defects.py")]


def test_hypothesis_copy_copies_the_hypothesis_or_the_question():
    assert hypothesis_copy(["nli", "qa", "nli"], [" A couple is sitting on a bench. ", None, None],
                           [None, "Where would you find a refrigerator?", None]) == [
        "A couple is sitting on a bench.", "Where would you find a refrigerator?", ""]


def test_shuffled_pairs_deal_every_rationale_to_another_input():
    assert deranged(["a", "b", "c", "d"], seed=0) == ["b", "d", "a", "c"]
    assert deranged(["a", "b", "c", "d"], seed=1) == ["c", "d", "b", "a"]
    assert deranged(["a", "b"], seed=5) == ["b", "a"]
    for n in range(2, 12):
        for seed in range(5):
            texts = [f"r{i}" for i in range(n)]
            out = deranged(texts, seed)
            assert sorted(out) == sorted(texts) and all(o != t for o, t in zip(out, texts))
    with pytest.raises(ConfigError, match="at least 2 rows"):
        deranged(["only"], 0)


def test_the_shuffled_generator_trains_on_each_input_with_another_rows_rationale():
    frame = pl.DataFrame([{**NLI_ROW, "rationale": "One."}, {**NLI_ROW, "label": "neutral", "rationale": "Two."},
                          {**NLI_ROW, "label": "entailment", "rationale": "Three."}], schema=ROW_SCHEMA)
    aligned = training_pairs(frame, EmbeddedGeneratorConfig())
    shuffled = training_pairs(frame, EmbeddedGeneratorConfig(pairs="shuffled"))
    x = "premise: A couple walk hand in hand down a street. hypothesis: A couple is sitting on a bench."
    assert aligned == ([f"label: contradiction input: {x}", f"label: neutral input: {x}",
                        f"label: entailment input: {x}"], ["One.", "Two.", "Three."])
    assert shuffled[0] == aligned[0] and shuffled[1] == deranged(["One.", "Two.", "Three."], 0)
    assert generator_input(" kitchen ", "question: Where?") == "label: kitchen input: question: Where?"


# ------------------------------------------------------------------------------------------------ budgets


def test_the_budget_rows_are_nested_subsets_of_the_training_rows():
    for n in (1, 7, 16, 100, 1001):
        for seed in (0, 3):
            eighth, half, whole = (budget_rows(n, f, seed) for f in (1 / 8, 1 / 2, 1.0))
            assert set(eighth) <= set(half) <= set(whole) == set(range(n))
            assert (len(eighth), len(half)) == (max(1, -(-n // 8)), max(1, -(-n // 2)))
            assert eighth == sorted(eighth) and len(set(half)) == len(half)
    assert budget_rows(16, 1 / 8, 0) != budget_rows(16, 1 / 8, 1)  # the seed draws which rows


# ------------------------------------------------------------------------------------------------ configs


def test_the_default_generators_are_the_offline_ones_in_their_expected_order():
    assert [c.name for c in default_generators()] == ["embedded-all", "embedded-1of2", "embedded-1of8",
                                                      "shuffled-pairs", "hypothesis-copy", "label-only"]
    assert [c.fraction for c in default_generators()[:4]] == [1.0, 0.5, 0.125, 1.0]
    assert len(DEFAULT_GENERATOR_SPECS) == 6


def test_generator_specs():
    assert parse_generator_spec("embedded:1/8") == {"kind": "embedded", "pairs": "aligned", "fraction": 0.125}
    configs = generator_configs(["gemini", "gemini:gemini-2.5-flash", "hf-seq2seq:google/flan-t5-large",
                                 "llama=hf-causal:/models/Llama-3.1-8B-Instruct/", "shuffled-pairs:0.5",
                                 {"kind": "label-only", "name": "states-it"}])
    assert [(c.kind, c.name) for c in configs] == [
        ("gemini", "gemini-2.5-pro"), ("gemini", "gemini-2.5-flash"), ("hf-seq2seq", "flan-t5-large"),
        ("hf-causal", "llama"), ("embedded", "shuffled-pairs-1of2"), ("label-only", "states-it")]
    assert configs[3].model == "/models/Llama-3.1-8B-Instruct/" and configs[4].pairs == "shuffled"


@pytest.mark.parametrize("items, message", [
    (["embedded:2"], "must lie in"), (["embedded:half"], "not a fraction"), (["gpt4"], "unknown kind"),
    (["hf-causal"], "needs a model"), (["label-only:x"], "takes no argument"), (["gold=label-only"], "own rationale"),
    (["label-only", "label-only"], "share the source name"), ([], "no generator"),
    ([{"kind": "embedded", "epochs": 3}], "Extra inputs"), ([{"kind": "embedded", "model": {"backbone": "minilm"}}],
                                                            "embedded backbone"),
    ([{"kind": "embedded", "train": {"select_by": "label_set"}}], "select_by")])
def test_bad_generators_are_refused_up_front(items, message):
    with pytest.raises(ConfigError, match=message):
        generator_configs(items)


def test_a_section_given_in_part_keeps_the_generators_own_defaults_for_the_rest():
    (config,) = generator_configs([{"kind": "embedded", "train": {"epochs": 30}, "model": {"d_model": 64}}])
    assert (config.train.epochs, config.train.select_by) == (30, "sum")
    assert (config.model.d_model, config.model.max_target_tokens) == (64, 48)


def test_a_generator_config_is_frozen():
    from pydantic import ValidationError

    config = EmbeddedGeneratorConfig()
    with pytest.raises(ValidationError, match="frozen"):
        config.fraction = 0.5


# ------------------------------------------------------------------------------------------------ tables


def test_generated_texts_become_rationale_rows_and_a_file_with_its_provenance(tmp_path):
    frame, missing = rationale_rows(["a", "b", "c"], ["neutral", "entailment", "neutral"],
                                    ["It says so.", None, "  "], "gen")
    assert frame.to_dicts() == [{"id": "a", "source": "gen", "rationale": "It says so.", "label": "neutral"}]
    assert missing == ["b", "c"]
    for suffix in (".jsonl", ".csv", ".parquet"):
        path, record = write_rationale_file(frame, tmp_path / f"out{suffix}", {"sources": ["gen"]})
        assert record == provenance_path(path) and record.name == f"out{suffix}.provenance.yaml"
        assert yaml.safe_load(record.read_text()) == {"sources": ["gen"]}
    assert pl.read_ndjson(tmp_path / "out.jsonl").to_dicts() == frame.to_dicts()
    with pytest.raises(ConfigError, match="unknown rationale file type"):
        write_rationale_file(frame, tmp_path / "out.txt", {})
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary left


# ------------------------------------------------------------------------------------------------ trained model


def test_the_embedded_generator_writes_a_nonempty_rationale_for_every_input():
    inputs = ["label: neutral input: premise: a dog runs hypothesis: a dog sleeps", "label: entailment input: x"]
    model = tiny_evaluator([*inputs, "the dog is running so it is not asleep ."])
    texts = generate_from_model(model, inputs, EmbeddedGeneratorConfig().decoding.model_copy(
        update={"max_new_tokens": 5}))
    assert len(texts) == 2 and all(t and len(t.split()) <= 5 for t in texts)
    assert generate_from_model(model, inputs, EmbeddedGeneratorConfig().decoding) == generate_from_model(
        model, inputs, EmbeddedGeneratorConfig().decoding)  # deterministic


# ------------------------------------------------------------------------------------------------ Gemini (fake)


@pytest.fixture
def gemini_env(gemini, monkeypatch):  # noqa: F811
    """The loopback Gemini as the endpoint of every google-genai client, with a key in the environment."""
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", gemini.url)
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    return gemini


def _gemini_client(**fields):
    return prompted_client(GeminiGeneratorConfig(model="gemini-test", backoff_s=0.0, **fields))


def test_gemini_generates_from_the_c3_prompt_and_retries_a_transient_429_and_503(gemini_env):
    gemini_env.replies += [(429, None, 0.0), (503, None, 0.0), (200, ' "They cannot walk and sit at once."\n', 0.0),
                           (200, "A refrigerator keeps food cold in a kitchen.", 0.0)]
    prompts = [rationale_prompt(**NLI_ROW), rationale_prompt(**QA_ROW)]
    out = generate_prompted(_gemini_client(), prompts, ["n1", "q1"], name="gem")
    assert out == ["They cannot walk and sit at once.", "A refrigerator keeps food cold in a kitchen."]
    assert len(gemini_env.requests) == 4 and {r["model"] for r in gemini_env.requests} == {"gemini-test"}
    assert [gemini_env.prompt(i) for i in (2, 3)] == prompts and {r["key"] for r in gemini_env.requests} == {KEY}
    assert gemini_env.requests[2]["body"]["generationConfig"]["temperature"] == 0.0


def test_gemini_answers_come_from_the_prompt_cache_on_a_rerun(gemini_env):
    cache: dict[str, str] = {}
    gemini_env.replies.append((200, "Once.", 0.0))
    prompt = [rationale_prompt(**QA_ROW)]
    config = GeminiGeneratorConfig(model="gemini-test")
    assert generate_prompted(prompted_client(config, cache=cache), prompt, ["q1"], name="g") == ["Once."]
    assert generate_prompted(prompted_client(config, cache=cache), prompt, ["q1"], name="g") == ["Once."]
    assert len(gemini_env.requests) == 1


def test_a_permanent_gemini_error_names_the_generator_the_example_the_model_and_the_cause(gemini_env):
    gemini_env.replies.append((400, None, 0.0))
    with pytest.raises(GenerationError) as err:
        generate_prompted(_gemini_client(), [rationale_prompt(**QA_ROW)], ["q7"], name="gem")
    message = str(err.value)
    assert "generator 'gem'" in message and "example 'q7'" in message and "Gemini model 'gemini-test'" in message
    assert "HTTP 400" in message and KEY not in message and len(gemini_env.requests) == 1


def test_gemini_gives_up_after_its_retries_with_the_last_cause(gemini_env):
    gemini_env.replies += [(503, None, 0.0)] * 3
    with pytest.raises(GenerationError, match="gave up after 3 attempts; last error: HTTP 503"):
        generate_prompted(_gemini_client(max_retries=2), [rationale_prompt(**QA_ROW)], ["q1"], name="gem")


def test_a_missing_gemini_key_is_a_clear_config_error(monkeypatch):
    for variable in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(ConfigError, match="no Gemini API key for model 'gemini-2.5-pro': set the GEMINI_API_KEY"):
        prompted_client(GeminiGeneratorConfig())


# ------------------------------------------------------------------------------------------------ Hugging Face


@pytest.fixture(scope="module")
def tiny_causal(tmp_path_factory) -> str:
    """A random one-layer GPT-2 and a word-level tokenizer saved locally: loadable by path, output gibberish."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from larev.models.tokenizer import train_word_tokenizer

    tokenizer = train_word_tokenizer([rationale_prompt(**NLI_ROW), rationale_prompt(**QA_ROW)])
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=16, n_layer=1, n_head=2, n_positions=256,
                                       bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id))
    path = tmp_path_factory.mktemp("tiny_causal")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def test_a_causal_model_by_path_replies_after_the_prompt_one_reply_per_prompt(tiny_causal):
    config = HFCausalGeneratorConfig(model=tiny_causal, max_new_tokens=4, batch_size=2)
    client = prompted_client(config, device="cpu")
    prompts = [rationale_prompt(**NLI_ROW), rationale_prompt(**QA_ROW), "Question: x"]
    out = generate_prompted(client, prompts, ["a", "b", "c"], name=config.name, batch_size=config.batch_size)
    assert len(out) == 3 and all(t is None or len(t.split()) <= 4 for t in out)
    assert client.generate_batch(prompts) == client.generate_batch(prompts)  # greedy: deterministic
    assert client.formatted("Question: x") == "Question: x"  # this tokenizer has no chat template
    assert client._load()[0].truncation_side == "left"  # a long prompt keeps its instructions, loses its start


def test_a_causal_models_chat_template_carries_the_prompt_as_a_user_turn(tiny_causal, tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_causal)
    tokenizer.chat_template = "{% for m in messages %}user : {{ m['content'] }} {% endfor %}assistant :"
    client = HFCausalGenerator(tiny_causal, device="cpu", max_new_tokens=2)
    client._load()
    client._loaded = (tokenizer, *client._loaded[1:])
    assert client.formatted("why ?") == "user : why ? assistant :"
    assert len(client.generate_batch(["why ?"])) == 1
    plain = HFCausalGenerator(tiny_causal, device="cpu", chat_template=False)
    plain._loaded = client._loaded
    assert plain.formatted("why ?") == "why ?"


def test_a_missing_local_model_is_a_config_error(tmp_path):
    client = HFCausalGenerator(str(tmp_path / "no-such-model"), device="cpu")
    with pytest.raises(ConfigError, match="no model directory"):
        client.generate("x")


# ------------------------------------------------------------------------------------------------ the flow

TINY = ModelConfig(d_model=16, d_ff=32, num_layers=1, num_heads=2, d_kv=8, max_target_tokens=12)
TINY_TRAIN = TrainConfig(epochs=1, batch_size=8, select_by="sum")
TINY_DATA = DataConfig(demo=DemoDataConfig(n_train=16, n_validation=5, n_test=6))


def _tiny(spec: str) -> dict:
    """The embedded generator of `spec` with a tiny network, one epoch, short decoding."""
    return {**parse_generator_spec(spec), "model": TINY.model_dump(), "train": TINY_TRAIN.model_dump(),
            "decoding": {"max_new_tokens": 6, "batch_size": 4}}


TINY_GENERATORS = [*(_tiny(s) for s in DEFAULT_GENERATOR_SPECS[:4]), "hypothesis-copy", "label-only",
                   {"kind": "gemini", "model": "gemini-test", "backoff_s": 0.0}]
NAMES = ["embedded-all", "embedded-1of2", "embedded-1of8", "shuffled-pairs", "hypothesis-copy", "label-only",
         "gemini-test"]


def _params(root: Path, out: Path, **changes):
    from flows.generate import GenerateParams

    base = {"data": TINY_DATA, "artifact_root": str(root / "store"), "generators": TINY_GENERATORS,
            "out": str(out), "device": "cpu", "progress": False}
    return GenerateParams(**{**base, **changes})


def _ran(result) -> list[str]:
    return [s.step for s in result["steps"] if not s.cached]


@pytest.fixture
def gemini_for_flows(gemini_env):
    gemini_env.replies.append((429, None, 0.0))  # one transient error on the way
    gemini_env.responder = lambda req: (200, "Because of what the premise says.", 0.0)
    return gemini_env


@pytest.mark.usefixtures("prefect_harness")
def test_the_flow_writes_one_source_per_generator_that_the_contract_accepts_and_reruns_from_cache(
        tmp_path, gemini_for_flows, tiny_causal):
    from flows.generate import generate_rationales
    from larev.data.sources import load_data

    out = tmp_path / "generated.jsonl"
    generators = [*TINY_GENERATORS, {"kind": "hf-causal", "name": "tiny-causal", "model": tiny_causal,
                                     "max_new_tokens": 3}]
    result = generate_rationales(_params(tmp_path, out, generators=generators))
    assert {f"generate-{n}" for n in NAMES} | {f"generator-{n}" for n in NAMES[:4]} <= set(_ran(result))
    test = load_data(TINY_DATA).filter(pl.col("split") == "test")
    written = pl.read_ndjson(out)
    table = validate_rationales(written, test, file=str(out))
    assert table.columns == ["id", "source", "rationale", "label"] and result["sources"] == [*NAMES, "tiny-causal"]
    # a random model may decode nothing for an example: left out of the file, counted in the provenance
    causal = table.filter(pl.col("source") == "tiny-causal")
    table = table.filter(pl.col("source") != "tiny-causal")
    assert table["source"].unique(maintain_order=True).to_list() == NAMES
    assert table.group_by("source", maintain_order=True).len()["len"].to_list() == [test.height] * len(NAMES)
    by_source = {s: table.filter(pl.col("source") == s) for s in NAMES}
    assert by_source["label-only"]["rationale"].to_list() == [f"Verdict: {y}." for y in test["label"]]
    assert by_source["hypothesis-copy"]["rationale"].to_list() == [h.strip() for h in test["hypothesis"]]
    assert set(by_source["gemini-test"]["rationale"]) == {"Because of what the premise says."}
    assert table["label"].to_list() == test["label"].to_list() * len(NAMES)
    assert len(gemini_for_flows.requests) == test.height + 1  # one retried 429
    assert gemini_for_flows.prompt(1) == rationale_prompt(**{k: test.row(0, named=True)[k] for k in NLI_ROW})

    provenance = yaml.safe_load(Path(result["provenance"]).read_text())
    sources = {s["source"]: s for s in provenance["sources"]}
    assert list(sources) == [*NAMES, "tiny-causal"] and provenance["data"]["source"] == "demo"
    n_train = load_data(TINY_DATA).filter(pl.col("split") == "train").height
    assert [sources[n]["training_rows"] for n in NAMES[:4]] == [n_train, -(-n_train // 2), -(-n_train // 8), n_train]
    assert sources["embedded-1of8"]["config"]["fraction"] == 0.125 and sources["label-only"]["template"] == \
        LABEL_ONLY_TEMPLATE
    assert "thesis appendix C.3" in sources["gemini-test"]["prompt"] and sources["gemini-test"]["without_text"] == 0
    assert all(len(s["model"]["digest"]) == 64 for s in (sources[n] for n in NAMES[:4]))
    assert causal.height + sources["tiny-causal"]["without_text"] == test.height
    assert len(sources["tiny-causal"]["model_digest"]) == 64 and "Premise: {premise}" in sources["tiny-causal"][
        "template"]

    again = generate_rationales(_params(tmp_path, out, generators=generators))
    assert _ran(again) == [] and pl.read_ndjson(out).equals(written)
    assert len(gemini_for_flows.requests) == test.height + 1  # nothing asked again

    # the same examples and tokenizer read from a finished run's record: every step served from the cache
    run_dir = tmp_path / "runs" / "tiny"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({
        "artifact_root": str(tmp_path / "store"), "params": {"model": {"backbone": "embedded"}},
        "artifacts": {k: result["refs"][k].model_dump() for k in ("examples", "tokenizer")}}))
    from_run = generate_rationales(_params(tmp_path, tmp_path / "from-run.parquet", data=None, run=str(run_dir),
                                           generators=generators))
    assert _ran(from_run) == [] and pl.read_parquet(tmp_path / "from-run.parquet").equals(written)
    assert yaml.safe_load(Path(from_run["provenance"]).read_text())["run"] == str(run_dir)

    # a run of another backbone has no embedded tokenizer: the tokenizer step makes the same one, from cache
    (run_dir / "run.json").write_text(json.dumps({
        "artifact_root": str(tmp_path / "store"), "params": {"model": {"backbone": "minilm-frozen"}},
        "artifacts": {k: result["refs"][k].model_dump() for k in ("examples", "baselines")}}))
    other = generate_rationales(_params(tmp_path, tmp_path / "other.csv", data=None, run=str(run_dir),
                                        generators=generators))
    assert _ran(other) == [] and "tokenizer" in [s.step for s in other["steps"]]
    assert validate_rationales(pl.read_csv(tmp_path / "other.csv"), test).equals(
        validate_rationales(written, test))


@pytest.mark.usefixtures("prefect_harness")
def test_a_gemini_generator_without_a_key_fails_before_any_step(tmp_path, monkeypatch):
    from flows.generate import generate_rationales

    for variable in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(ConfigError, match="generator 'gemini-2.5-pro' \\(Gemini model 'gemini-2.5-pro'\\) needs an "
                                          "API key: set GEMINI_API_KEY"):
        generate_rationales(_params(tmp_path, tmp_path / "g.jsonl", generators=["label-only", "gemini"]))
    assert not (tmp_path / "store").exists() and not (tmp_path / "g.jsonl").exists()


@pytest.mark.usefixtures("prefect_harness")
def test_the_cli_generates_for_a_run_and_refuses_bad_input(tmp_path, capsys):
    from flows.cli import main

    train = tmp_path / "train.jsonl"
    test = tmp_path / "test.jsonl"
    row = {"premise": "A dog runs.", "hypothesis": "A dog sleeps.", "label": "contradiction",
           "rationale": "Running is not sleeping."}
    train.write_text("\n".join(json.dumps({**row, "id": f"t{i}"}) for i in range(12)) + "\n")
    test.write_text("\n".join(json.dumps({**row, "id": f"x{i}"}) for i in range(3)) + "\n")
    out = tmp_path / "gen.csv"
    argv = ["generate", "--task", "nli", "--train", str(train), "--test", str(test), "--store",
            str(tmp_path / "store"), "--generators", "hypothesis-copy,copy=label-only", "--out", str(out),
            "--no-progress"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}: 6 rationales from 2 generators (hypothesis-copy, copy)" in printed
    assert pl.read_csv(out)["source"].to_list() == ["hypothesis-copy"] * 3 + ["copy"] * 3
    assert main(["generate", "--run", str(tmp_path / "nowhere"), "--out", str(out)]) == 2
    assert "not a finished larev run" in capsys.readouterr().err
    assert main(["generate", "--run", str(tmp_path), "--generators", "embedded:3", "--out", str(out)]) == 2
    assert "must lie in (0, 1]" in capsys.readouterr().err


def test_the_generation_steps_arguments_cross_to_a_gpu_pool_and_back(tmp_path):
    from storage import ArtifactStore
    from storage.ref import ArtifactRef
    from tasks.generate import generate_with_model, train_generator
    from tasks.runtime.remote import decode_arguments, encode_arguments

    ref = ArtifactRef(uri="file:///x", key="examples/k/examples.parquet", digest="0" * 64, kind="table")
    for config in generator_configs(["embedded:1/8", "hf-seq2seq:/models/flan", "hf-causal:/models/llama"]):
        arguments = {"store": ArtifactStore(str(tmp_path)), "examples": ref, "config": config, "generator": None,
                     "device": "cpu", "progress": False}
        sent = json.loads(json.dumps(encode_arguments(generate_with_model, arguments)))
        assert decode_arguments(generate_with_model, sent)["config"] == config
    trained = {"store": ArtifactStore(str(tmp_path)), "examples": ref, "tokenizer": ref,
               "config": generator_configs(["shuffled-pairs"])[0], "progress": True}
    sent = json.loads(json.dumps(encode_arguments(train_generator, trained)))
    assert decode_arguments(train_generator, sent)["config"].pairs == "shuffled"
