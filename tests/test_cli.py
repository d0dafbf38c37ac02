"""The CLI made from the configs: generated options, --params files, --set and --print-params (no flow runs)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from flows.cli import main
from flows.cli.parser import build_parser, commands
from larev.methods.leakage_aware.config import ThesisObjective


def printed_params(capsys, *argv: str) -> dict:
    assert main([*argv, "--print-params"]) == 0
    return json.loads(capsys.readouterr().out)


def test_set_reaches_any_parameter_and_print_params_shows_it(capsys):
    params = printed_params(capsys, "run", "--set", "larev.objective.lambda_irm=2.5")
    assert params["larev"]["objective"]["lambda_irm"] == 2.5
    assert params["run_name"] == "demo-nli"
    default = printed_params(capsys, "run")
    assert default["larev"]["objective"]["lambda_irm"] is None


def test_what_print_params_prints_reads_back_as_a_params_file(capsys, tmp_path):
    """--print-params writes nulls for unset settings (the data's task among them); read back with --params they
    stay unset and the demo keeps its task."""
    printed = printed_params(capsys, "run", "--task", "qa", "--set", "larev.objective.lambda_irm=2.5")
    assert printed["data"]["task"] is None and printed["data"]["demo"]["task"] == "qa"
    path = tmp_path / "run.yaml"
    path.write_text(json.dumps(printed))
    assert printed_params(capsys, "run", "--params", str(path)) == printed


def test_params_file_gives_the_same_parameters_as_the_same_flags(capsys, tmp_path):
    from flows.pipeline import PipelineParams

    params_file = tmp_path / "run.yaml"
    params_file.write_text(yaml.safe_dump({
        "data": {"demo": {"n_train": 200, "rationale_leakage": 0.3}},
        "train": {"epochs": 1},
        "larev": {"la_train": {"epochs": 5}, "objective": {"lambda_irm": 2.5}, "ablations": ["no_irm"]},
        "rora": {"enabled": False},
    }))
    from_file = printed_params(capsys, "run", "--params", str(params_file))
    from_flags = printed_params(capsys, "run", "--n-train", "200", "--rationale-leakage", "0.3", "--epochs", "1",
                                "--la-epochs", "5", "--lambda-irm", "2.5", "--ablations", "no_irm", "--no-rora")
    assert from_file == from_flags
    # a section given in part keeps its other defaults: LAREV's la_train batch size 16, not TrainConfig's 32
    assert from_file["larev"]["la_train"] == {**PipelineParams().larev.la_train.model_dump(mode="json"), "epochs": 5}
    assert from_file["data"]["demo"]["n_test"] == PipelineParams().data.demo.n_test


def test_precedence_is_file_then_options_then_set(capsys, tmp_path):
    params_file = tmp_path / "run.json"
    params_file.write_text(json.dumps({"train": {"epochs": 7, "batch_size": 8}, "run_name": "from-file"}))
    params = printed_params(capsys, "run", "--params", str(params_file), "--epochs", "2",
                            "--set", "train.batch_size=4", "--set", "train.epochs=3")
    assert params["train"]["epochs"] == 3 and params["train"]["batch_size"] == 4
    assert params["run_name"] == "from-file"


def test_files_mode_and_the_derived_run_name(capsys):
    params = printed_params(capsys, "run", "--train", "a.parquet", "--test", "b.parquet", "--task", "qa")
    assert params["data"]["source"] == "files" and params["data"]["task"] == "qa"
    assert params["data"]["demo"]["task"] == "nli" and params["run_name"] == "files"
    demo = printed_params(capsys, "run", "--task", "qa")
    assert demo["data"]["demo"]["task"] == "qa" and demo["data"]["task"] is None and demo["run_name"] == "demo-qa"


def test_stress_commands_have_their_presets(capsys):
    ftc = printed_params(capsys, "ftc", "--run", "runs/x", "--alpha", "0.5")
    assert ftc["name"] == "ftc" and ftc["addtext"] is None and ftc["ftc"]["alpha"] == 0.5
    addtext = printed_params(capsys, "addtext", "--run", "runs/x", "--kinds", "rand,wiki")
    assert addtext["name"] == "addtext" and addtext["ftc"] is None and addtext["addtext"]["kinds"] == ["rand", "wiki"]
    score = printed_params(capsys, "score", "--run", "r", "--rationales", "f.csv", "--ftc", "--shard-rows", "0")
    assert score["ftc"] is not None and score["addtext"] is None


def test_text_values_stay_text_and_yaml_values_are_typed(capsys):
    params = printed_params(capsys, "run", "--set", "model.backbone=no", "--set", "larev.ablations=[no_irm, thesis]",
                            "--set", "data.demo.n_train=300", "--set", "gpu_deployment=null")
    assert params["model"]["backbone"] == "no"
    assert params["larev"]["ablations"] == ["no_irm", "thesis"]
    assert params["data"]["demo"]["n_train"] == 300 and params["gpu_deployment"] is None


@pytest.mark.parametrize("argv, message", [
    (["run", "--set", "larev.objectve.lambda_irm=1"], "larev has no field 'objectve'"),
    (["run", "--set", "train.epochs.x=1"], "'train.epochs' is a value, not a section"),
    (["run", "--set", "train.epochs"], "expected PATH=VALUE"),
    (["run", "--set", "train.epochs=0"], "train.epochs"),
    (["run", "--params", "missing.yaml"], "--params missing.yaml: cannot read it"),
    (["run", "--train", "a.parquet"], "needs both train and test"),
])
def test_bad_parameters_name_what_is_wrong(capsys, argv, message):
    assert main([*argv, "--print-params"]) == 2
    assert message in capsys.readouterr().err


def test_params_file_that_is_not_a_mapping(capsys, tmp_path):
    bad = tmp_path / "list.yaml"
    bad.write_text("- 1\n- 2\n")
    assert main(["run", "--params", str(bad), "--print-params"]) == 2
    assert f"--params {bad}: expected a mapping of parameters, found a list" in capsys.readouterr().err
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("larev:\n  objective:\n    lamda_irm: 3\n")
    assert main(["run", "--params", str(unknown), "--print-params"]) == 2
    assert "objective has no field 'lamda_irm'" in capsys.readouterr().err


def test_help_is_read_from_the_configs(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    description = " ".join(ThesisObjective.model_fields["lambda_irm"].description.split())
    assert f"{description} (larev.objective.lambda_irm; default none)" in text
    assert "(larev.la_train.epochs; default 2)" in text  # LAREV's own default, not TrainConfig's 3
    for option in commands()["run"].options:  # every option, the metrics' own included, names its parameter
        assert option.path in text
    # the metrics' switches sit between the model / training options and where to run
    assert text.index("--normalisation") < text.index("--no-larev") < text.index("--rora-threshold") < text.index(
        "--gpu-deployment")


def test_every_option_table_matches_its_model():
    build_parser()  # builds every generated option: an option over a missing field would raise here
    for name, command in commands().items():
        paths = [option.path for option in command.options]
        assert len(paths) == len(set(paths)), f"{name}: two options set the same parameter"


def test_bench_quality_seeds_option_and_its_check(capsys, tmp_path):
    args = build_parser().parse_args(["bench", "quality", "--out", str(tmp_path), "--seeds", "3"])
    assert args.seeds == 3
    assert build_parser().parse_args(["bench", "quality", "--out", str(tmp_path)]).seeds == 1
    # a bad count fails while parsing, before any server or flow starts, with the one message
    with pytest.raises(SystemExit) as exc:
        main(["bench", "quality", "--out", str(tmp_path), "--seeds", "0", "--server", "local"])
    assert exc.value.code == 2 and "--seeds: must be at least 1, got 0" in capsys.readouterr().err
    assert build_parser().parse_args(["bench", "quality", "--out", "o", "--first-seed", "2"]).first_seed == 2


def test_bench_quality_metrics_switch_the_steps_on_and_off(capsys):
    from flows.metrics import with_metrics
    from flows.pipeline import PipelineParams

    args = build_parser().parse_args(["bench", "quality", "--out", "o", "--metrics", "rev, LAREV"])
    assert args.metrics == ["rev", "larev"]
    only = with_metrics(PipelineParams(), args.metrics)
    assert only.larev.enabled and not only.rora.enabled
    las = with_metrics(PipelineParams(), ["las"])
    assert las.rora.enabled and not las.larev.enabled
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", "quality", "--out", "o", "--metrics", "rev,bleu"])
    assert ("unknown metric(s) ['bleu']; choose from rev, larev, larev_vs_empty, r_only, rora, rq, las"
            in capsys.readouterr().err)


# Run in a fresh interpreter: in this one, a session's Prefect test harness (the flow tests) holds its own settings
# context, which would hide what a real `larev` process sees.
API_CHOICE_CHECK = """
import json, logging, os
import flows.cli.commands as commands
import flows.server as server
import flows.service
from flows.cli import main

def chosen(_server):
    os.environ["PREFECT_API_URL"] = "http://127.0.0.1:4999/api"  # what start_local_server does
    return "a server", None

seen = {}

def record(args):
    from prefect.settings import get_current_settings
    settings = get_current_settings()
    seen.update(api=settings.api.url, extra=settings.logging.extra_loggers)
    return 0

server.choose_api = chosen
commands.run = record
flows.service.heartbeat_environment = lambda: None
seen["rc"] = main(["run", "--server", "local", "--no-progress"])
from prefect.logging.handlers import APILogHandler
seen["api_handler"] = any(isinstance(h, APILogHandler) for h in logging.getLogger("larev").handlers)
print(json.dumps(seen))
"""


def test_the_api_a_command_chooses_is_the_one_prefect_uses(tmp_path):
    """Prefect reads its settings when first imported (resolving the parameters imports it): the API URL and the
    extra loggers larev sets afterwards must still reach it, or runs go to a temporary server and larev's log
    lines never reach the UI."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")} | {"PREFECT_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", API_CHOICE_CHECK], env=env, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"rc": 0, "api": "http://127.0.0.1:4999/api", "extra": ["larev"], "api_handler": True}


@pytest.mark.parametrize("backbone, message", [
    ("MiniLM", "backbone 'MiniLM': did you mean 'minilm'? (names are case-sensitive)"),
    ("./no-such-model", "backbone './no-such-model': no such directory"),
])
def test_a_backbone_that_cannot_load_fails_before_any_server_starts(capsys, monkeypatch, backbone, message):
    import flows.server as server

    def no_server(_server):
        raise AssertionError("a server was started before the backbone was checked")

    monkeypatch.setattr(server, "choose_api", no_server)
    assert main(["run", "--backbone", backbone, "--server", "local", "--no-progress"]) == 2
    assert message in capsys.readouterr().err


def test_the_parsers_snapshot_is_kept_per_source_and_is_what_the_models_give(tmp_path, monkeypatch):
    """The parser's snapshot is made from the models and the registry the first time a source is seen, then read
    back; another source (a changed module) is another snapshot."""
    from flows.cli import parser

    monkeypatch.setenv(parser.CACHE_ENV, str(tmp_path))
    parser.snapshot.cache_clear()
    made = parser.snapshot()
    assert made == json.loads(json.dumps(parser.live_snapshot()))
    (kept,) = tmp_path.glob("cli-options-*.json")
    assert kept.name == f"cli-options-{parser.source_digest()[:16]}.json"
    kept.write_text(json.dumps({**made, "metric_names": ["planted"]}))
    parser.snapshot.cache_clear()
    assert parser.snapshot()["metric_names"] == ["planted"]  # read back, not made again
    monkeypatch.setattr(parser, "source_digest", lambda: "f" * 64)
    parser.snapshot.cache_clear()
    assert parser.snapshot()["metric_names"] == made["metric_names"]  # a new source: made anew
    parser.snapshot.cache_clear()


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["run", "--bogus"], ["bench", "quality", "--seeds"]])
def test_help_and_a_bad_option_answer_before_torch_or_prefect_is_imported(argv):
    """The parser is built from its snapshot: once the source's snapshot is kept, help and an argument error end
    the command before any heavy import (what made them take several seconds)."""
    import subprocess
    import sys

    from flows.cli.parser import snapshot

    snapshot()  # kept for this source (the first call after a change makes it)
    code = ("import sys\nfrom flows.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as exc:\n"
            "    print('exit', exc.code)\nprint('heavy', sorted(m for m in ('torch', 'prefect', 'transformers') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[1])
    assert "heavy []" in done.stdout, done.stdout[-500:] + done.stderr[-500:]
    assert ("exit 0" if argv[-1] == "--help" else "exit 2") in done.stdout
