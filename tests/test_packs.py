"""Evaluator packs: `larev pack`, then `larev score --pack` elsewhere, with the run's own numbers; altered packs and
files for another task refused in one line."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import polars as pl
import pytest

from flows.cli import main
from tests.test_compare_flow import gold_copy


@pytest.fixture(scope="module")
def packed(tiny_trained_run, tmp_path_factory):
    _, result = tiny_trained_run
    out = tmp_path_factory.mktemp("pack") / "tiny.larev.tar"
    assert main(["pack", "--run", result["run_dir"], "--out", str(out)]) == 0
    return Path(result["run_dir"]), out


def test_a_pack_holds_safetensors_and_data_with_a_digest_of_every_file(packed):
    _, pack = packed
    with tarfile.open(pack) as tar:
        header = json.loads(tar.extractfile("pack.json").read())
        names = set(tar.getnames())
    assert header["format"] == "larev-pack/1" and header["task"] == "nli" and header["run_name"] == "tiny"
    assert names == set(header["files"]) | {"pack.json"} and "run.json" in names
    run = json.loads((packed[0] / "run.json").read_text())
    assert header["signatures"] == run["signatures"] and set(run["signatures"]) == {"rev", "larev", "rora", "rq",
                                                                                   "las"}
    assert any(n.endswith(".safetensors") for n in names)
    assert not any(n.endswith((".pt", ".bin", ".pkl", ".pth", ".ckpt")) for n in names)


def test_a_pack_scores_elsewhere_with_the_runs_own_numbers(packed, tmp_path, monkeypatch, capsys):
    run_dir, pack = packed
    rationales = gold_copy(run_dir, tmp_path / "mine.csv", source="mine")
    elsewhere = tmp_path / "another-checkout"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # another working directory: nothing of the run's store is reachable by path
    assert main(["score", "--pack", str(pack), "--rationales", str(rationales), "--name", "packed",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    # what the command prints when its flow ends: the verdict, one line on the steps, where the full tables are
    # no gold in the file, so no verdict: its sources' scores per metric, then where the rest is
    shown = [line for line in out[out.index("Scores per source"):].splitlines() if line.strip()]
    assert len(shown) <= 25 and any(line.startswith("Steps: ") for line in shown)
    assert shown[1].split()[0] == "source" and shown[2].split()[0] == "mine" and len(shown[2].split()) == 6
    assert any("larev show" in line for line in shown)
    unpacked = next((elsewhere / ".larev" / "packs").iterdir())
    from_pack = pl.read_parquet(unpacked / "packed" / "scores.parquet")
    own = pl.read_parquet(run_dir / "scores.parquet").filter(pl.col("source") == "gold")
    joined = from_pack.join(own, on=["metric", "id"], suffix="_run")
    assert joined.height == own.height == 5 * 12
    assert (joined["score"] - joined["score_run"]).abs().max() < 1e-6
    assert joined.filter(pl.col("signature") != pl.col("signature_run")).is_empty()  # signed as the run signed
    # a second scoring reuses the checked extraction
    assert main(["score", "--pack", str(pack), "--rationales", str(rationales), "--name", "again",
                 "--no-progress"]) == 0
    assert len(list((elsewhere / ".larev" / "packs").iterdir())) == 1


def altered_copy(pack: Path, out: Path, member_suffix: str) -> str:
    """A copy of the pack with one byte of its first member ending in `member_suffix` changed."""
    with tarfile.open(pack) as src, tarfile.open(out, "w") as dst:
        changed = None
        for member in src.getmembers():
            data = src.extractfile(member).read()
            if changed is None and member.name.endswith(member_suffix):
                data = bytes([data[0] ^ 1]) + data[1:]
                changed = member.name
            dst.addfile(member, io.BytesIO(data))
    return changed


def test_an_altered_pack_is_refused_in_one_line(packed, tmp_path, monkeypatch, capsys):
    run_dir, pack = packed
    bad = tmp_path / "bad.larev.tar"
    changed = altered_copy(pack, bad, ".safetensors")
    rationales = gold_copy(run_dir, tmp_path / "mine.csv")
    monkeypatch.chdir(tmp_path)
    assert main(["score", "--pack", str(bad), "--rationales", str(rationales)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert changed in err and "does not match its sha256" in err and "altered" in err
    assert not any((tmp_path / ".larev" / "packs").iterdir())  # nothing half-extracted left behind


def test_a_file_for_another_task_is_refused(packed, tmp_path, monkeypatch, capsys):
    _, pack = packed
    other = tmp_path / "qa.csv"
    pl.DataFrame({"id": ["cqa-1", "cqa-2"], "source": ["m", "m"], "rationale": ["a", "b"]}).write_csv(other)
    monkeypatch.chdir(tmp_path)
    assert main(["score", "--pack", str(pack), "--rationales", str(other)]) == 2
    err = capsys.readouterr().err
    assert "another task or data set" in err and "task nli" in err


def test_score_needs_a_run_or_a_pack_not_both(packed, capsys):
    run_dir, pack = packed
    assert main(["score", "--run", str(run_dir), "--pack", str(pack), "--rationales", "x.csv"]) == 2
    assert "exactly one of run" in capsys.readouterr().err


def rebuilt(pack: Path, out: Path, edit) -> None:
    """A copy of the pack re-made whole: `edit(files: {name: bytes})` changes members, pack.json is recomputed (what
    someone who re-packs by hand would do)."""
    from flows.packs import files_digest

    with tarfile.open(pack) as src:
        files = {m.name: src.extractfile(m).read() for m in src.getmembers() if m.isfile()}
    header = json.loads(files.pop("pack.json"))
    edit(files)
    import hashlib

    header["files"] = {k: hashlib.sha256(v).hexdigest() for k, v in files.items()}
    header["digest"] = files_digest(header["files"])
    files["pack.json"] = json.dumps(header).encode()
    with tarfile.open(out, "w") as dst:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            dst.addfile(info, io.BytesIO(data))


def test_a_repacked_pack_is_refused_by_its_pinned_digest_and_by_what_it_names(packed, tmp_path, monkeypatch,
                                                                               capsys):
    run_dir, pack = packed
    header = json.loads(tarfile.open(pack).extractfile("pack.json").read())
    rationales = gold_copy(run_dir, tmp_path / "mine.csv")
    monkeypatch.chdir(tmp_path)

    def flip_weights(files):
        name = next(k for k in files if k.endswith(".safetensors"))
        files[name] = bytes([files[name][0] ^ 1]) + files[name][1:]

    repacked = tmp_path / "repacked.larev.tar"
    rebuilt(pack, repacked, flip_weights)
    assert main(["score", "--pack", str(repacked), "--rationales", str(rationales), "--pack-digest",
                 header["digest"][:16]]) == 2
    assert "is not the expected" in capsys.readouterr().err

    def elsewhere(files):  # run.json pointed at another store
        run = json.loads(files["run.json"])
        files["run.json"] = json.dumps({**run, "artifact_root": "/somewhere/else"}).encode()

    rebuilt(pack, tmp_path / "elsewhere.larev.tar", elsewhere)
    assert main(["score", "--pack", str(tmp_path / "elsewhere.larev.tar"), "--rationales", str(rationales)]) == 2
    assert "names the store '/somewhere/else', not the pack's own" in capsys.readouterr().err

    def climbing(files):
        files["../outside.json"] = b"{}"

    rebuilt(pack, tmp_path / "climbing.larev.tar", climbing)
    assert main(["score", "--pack", str(tmp_path / "climbing.larev.tar"), "--rationales", str(rationales)]) == 2
    assert "'../outside.json', which a pack may not hold" in capsys.readouterr().err
    assert not (tmp_path / "outside.json").exists()


def test_a_score_output_may_not_take_a_variants_name(packed, tmp_path, capsys):
    run_dir, _ = packed
    rationales = gold_copy(run_dir, tmp_path / "mine.csv")
    assert main(["score", "--run", str(run_dir), "--rationales", str(rationales), "--name", "gold"]) == 2
    assert "one of the run's own variants" in capsys.readouterr().err
