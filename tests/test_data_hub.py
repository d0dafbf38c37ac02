"""Hub datasets: the converters on hand-written records, and loading end to end from local stand-ins.

Nothing here reaches the network: `datasets.load_dataset` is replaced wherever the hub path is exercised.
"""

from __future__ import annotations

import json

import datasets
import pytest

from larev.data import hub
from larev.data.hub import (HUB_DATASETS, convert_cos_e, convert_ecqa, convert_esnli, convert_strategyqa,
                            hub_spec, load_hub_dataset)
from larev.errors import InputError
from larev.schema import EXAMPLE_SCHEMA

# Invented records in each dataset's layout.
ESNLI = {
    "premise": ["A girl rides a red bicycle.", "Two cooks chop onions.", "A cat naps.", "A man sings."],
    "hypothesis": ["A child is cycling.", "The cooks are asleep.", "The cat is old.", "Someone is singing."],
    "label": [0, 2, 1, -1],
    "explanation_1": ["Riding a bicycle is cycling.", "Chopping is not sleeping.", "Napping says nothing of age.",
                      "Singing is singing."],
    "explanation_2": ["", "", "", ""],
    "explanation_3": ["", "", "", ""],
}
ECQA = {
    "q_no": ["e1", "e2"], "q_concept": ["lamp", "bread"],
    "q_text": ["Where is a reading lamp often placed?", "What do you do with stale bread?"],
    "q_op1": ["desk", "frame it"], "q_op2": ["ocean", "feed ducks"], "q_op3": ["oven", "wear it"],
    "q_op4": ["roof", "paint it"], "q_op5": ["tunnel", "plant it"],
    "q_ans": ["desk", "feed ducks"],
    "taskA_pos": ["", ""], "taskA_neg": ["", ""],
    "taskB": ["People read at desks, so a lamp sits there.", "Ducks eat bread crumbs."],
}
COS_E = {
    "id": ["c1", "c2"],
    "question": ["What keeps rain off your head?", "Where do fish live?"],
    "choices": [["umbrella", "spoon", "book", "shoe", "cup"], ["tree", "pond", "desert", "attic", "car"]],
    "answer": ["umbrella", "pond"],
    "abstractive_explanation": ["an umbrella blocks rain", "fish need water"],
    "extractive_explanation": ["rain", "fish"],
}
STRATEGYQA = {
    "qid": ["s1", "s2"], "term": ["Snow", "Desert"], "description": ["frozen water", "dry land"],
    "question": ["Would snow melt in an oven?", "Do deserts get daily floods?"],
    "answer": [True, False],
    "facts": [["Ovens are hot.", "Snow melts above freezing."], ["Deserts receive little rain."]],
    "decomposition": [["Is an oven hot?"], ["How much rain falls in deserts?"]],
}


def _first(columns: dict) -> dict:
    return {k: v[0] for k, v in columns.items()}


# ---- converters ---------------------------------------------------------------------------------------------

def test_convert_esnli():
    assert convert_esnli(_first(ESNLI)) == {"premise": "A girl rides a red bicycle.",
                                            "hypothesis": "A child is cycling.", "label": "entailment",
                                            "rationale": "Riding a bicycle is cycling."}
    assert [convert_esnli({**_first(ESNLI), "label": i})["label"] for i in (0, 1, 2)] == \
        ["entailment", "neutral", "contradiction"]
    assert convert_esnli({**_first(ESNLI), "label": "neutral"})["label"] == "neutral"
    assert convert_esnli({**_first(ESNLI), "label": -1}) is None
    with pytest.raises(ValueError, match="unknown e-SNLI label 7"):
        convert_esnli({**_first(ESNLI), "label": 7})


def test_convert_ecqa():
    assert convert_ecqa(_first(ECQA)) == {
        "id": "e1", "question": "Where is a reading lamp often placed?",
        "choices": ["desk", "ocean", "oven", "roof", "tunnel"], "label": "desk",
        "rationale": "People read at desks, so a lamp sits there."}


def test_convert_cos_e():
    assert convert_cos_e(_first(COS_E)) == {
        "id": "c1", "question": "What keeps rain off your head?",
        "choices": ["umbrella", "spoon", "book", "shoe", "cup"], "label": "umbrella",
        "rationale": "an umbrella blocks rain"}


def test_convert_strategyqa():
    row = convert_strategyqa(_first(STRATEGYQA))
    assert row == {"id": "s1", "question": "Would snow melt in an oven?", "choices": ["yes", "no"],
                   "label": "yes", "rationale": "Ovens are hot. Snow melts above freezing."}
    assert convert_strategyqa({**_first(STRATEGYQA), "answer": False, "facts": " One fact. "})["rationale"] == \
        "One fact."
    assert convert_strategyqa({**_first(STRATEGYQA), "answer": False})["label"] == "no"
    with pytest.raises(ValueError, match="true or false"):
        convert_strategyqa({**_first(STRATEGYQA), "answer": "yes"})


def test_registry_names_and_aliases():
    assert hub_spec("esnli/esnli")[0] == "esnli"
    assert hub_spec("COS_E")[0] == "cos_e"
    assert hub_spec("wics/strategy-qa")[0] == "strategyqa"
    with pytest.raises(InputError, match=r"unknown dataset 'snli'; known: \['cos_e', 'ecqa', 'esnli', 'strategyqa'\]"):
        load_hub_dataset("snli", split="train")
    assert all(spec.task in ("nli", "qa") for spec in HUB_DATASETS.values())


# ---- end to end from disk -----------------------------------------------------------------------------------

def test_saved_dataset_directory(tmp_path):
    datasets.Dataset.from_dict(ESNLI).save_to_disk(tmp_path / "esnli_dev")
    df = load_hub_dataset("esnli", split="dev", path=tmp_path / "esnli_dev")
    assert list(df.columns) == list(EXAMPLE_SCHEMA)
    assert df["id"].to_list() == ["esnli-validation-0", "esnli-validation-1", "esnli-validation-2"]  # -1 skipped
    assert df["label"].to_list() == ["entailment", "contradiction", "neutral"]
    assert set(df["split"]) == {"validation"} and set(df["task"]) == {"nli"}


def test_saved_dataset_dict_picks_the_split_and_limits(tmp_path):
    data = datasets.DatasetDict({"train": datasets.Dataset.from_dict(ECQA),
                                 "test": datasets.Dataset.from_dict({k: v[1:] for k, v in ECQA.items()})})
    data.save_to_disk(tmp_path / "ecqa")
    df = load_hub_dataset("ecqa", split="test", path=tmp_path / "ecqa")
    assert df["id"].to_list() == ["e2"] and df["label"].to_list() == ["feed ducks"]
    assert load_hub_dataset("ecqa", split="train", path=tmp_path / "ecqa", limit=1)["id"].to_list() == ["e1"]
    with pytest.raises(InputError, match=r"has no split 'validation'; it has \['test', 'train'\]"):
        load_hub_dataset("ecqa", split="validation", path=tmp_path / "ecqa")


def test_raw_json_file_in_the_dataset_layout(tmp_path):
    records = [{k: v[i] for k, v in STRATEGYQA.items()} for i in range(2)]
    (tmp_path / "strategyqa_train.json").write_text(json.dumps(records))
    df = load_hub_dataset("strategyqa", split="train", path=tmp_path / "strategyqa_train.json")
    assert df["label"].to_list() == ["yes", "no"]
    assert df["choices"].to_list() == [["yes", "no"], ["yes", "no"]]


def test_record_with_the_wrong_layout_names_the_row(tmp_path):
    datasets.Dataset.from_dict({k: v for k, v in COS_E.items() if k != "abstractive_explanation"}).save_to_disk(
        tmp_path / "bad")
    with pytest.raises(InputError, match="expected layout: KeyError") as info:
        load_hub_dataset("cos_e", split="train", path=tmp_path / "bad")
    assert info.value.row == 0


def test_empty_rationales_fail_or_are_dropped(tmp_path):
    data = {**ESNLI, "explanation_1": ["", *ESNLI["explanation_1"][1:]]}
    datasets.Dataset.from_dict(data).save_to_disk(tmp_path / "d")
    with pytest.raises(InputError, match="empty rationale"):
        load_hub_dataset("esnli", split="train", path=tmp_path / "d")
    assert load_hub_dataset("esnli", split="train", path=tmp_path / "d", drop_empty_rationales=True).height == 2


def test_bad_paths_and_splits(tmp_path):
    with pytest.raises(InputError, match="neither a saved dataset directory nor a data file"):
        load_hub_dataset("esnli", split="train", path=tmp_path / "missing")
    (tmp_path / "empty_dir").mkdir()
    with pytest.raises(InputError, match="not a dataset saved with save_to_disk"):
        load_hub_dataset("esnli", split="train", path=tmp_path / "empty_dir")
    with pytest.raises(InputError, match=r"'cos_e' has no split 'test'; it has \['train', 'validation'\]"):
        load_hub_dataset("cos_e", split="test")
    with pytest.raises(InputError, match="limit must be at least 1"):
        load_hub_dataset("cos_e", split="train", limit=0)


# ---- the hub path, with load_dataset replaced ---------------------------------------------------------------

def test_hub_path_calls_load_dataset_lazily(monkeypatch, tmp_path):
    calls = []

    def fake_load_dataset(path, name=None, *, split=None, cache_dir=None, **kw):
        calls.append((path, name, split, cache_dir))
        return datasets.Dataset.from_dict(COS_E)

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    df = load_hub_dataset("cos_e", split="validation", cache_dir=str(tmp_path), limit=1)
    assert calls == [("Salesforce/cos_e", "v1.11", "validation", str(tmp_path))]
    assert df.rows(named=True) == [{
        "id": "c1", "task": "qa", "premise": None, "hypothesis": None, "question": "What keeps rain off your head?",
        "choices": ["umbrella", "spoon", "book", "shoe", "cup"], "label": "umbrella",
        "rationale": "an umbrella blocks rain", "split": "validation"}]


def test_unreachable_hub_is_an_input_error(monkeypatch):
    def offline(*args, **kw):
        raise ConnectionError("Couldn't reach 'esnli/esnli' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(InputError, match=r"could not load 'esnli/esnli' split 'train' from the Hugging Face hub "
                                         r"\(ConnectionError: .*pass path=DIR") as info:
        load_hub_dataset("esnli", split="train")
    assert info.value.file == "hub:esnli/esnli[train]"


def test_module_does_not_import_datasets_at_import_time():
    source = open(hub.__file__).read()
    top_level = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert not any("datasets" in line for line in top_level)
