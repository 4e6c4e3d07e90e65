"""A preregistered grid: its frozen block must say what the grid runs, the file must be committed unchanged before
its runs, runs are shuffled within a seed by the frozen seed, records name the file, and only its runs count."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from actorq.config import ConfigError
from actorq.experiments import grid, prereg
from actorq.experiments.orchestration import plan_runs
from actorq.report import preregistration
from actorq.report.replication import outcome

ROOT = Path(__file__).resolve().parents[3]
REPLICATION = ROOT / "configs" / "experiments" / "replication-acrobot-int8.yaml"


def test_the_committed_replication_freezes_the_claims_setting():
    g = grid.load_grid(REPLICATION)
    block = g.preregistration
    assert (
        block is not None and (block.base, block.other) == ("fp32", "int8") and g.seeds == block.seeds == 10
    )
    assert (
        block.statistic == "rmst_ratio" and block.criterion == "lower_bound_above_1" and block.level == 0.95
    )
    (exp,) = g.experiments
    assert (
        exp.sweep == ("actor.envs_per_actor=1",)
        and exp.actors == 1
        and exp.max_minutes == block.budget_minutes
    )
    assert {"affinity.actor=[1]", "affinity.learner=[0]", "replay.samples_per_insert=0.25"} <= set(
        exp.overrides
    )
    argv = grid.experiment_argv(g, exp, Path("o"), Path("r"))
    assert argv[argv.index("--order-seed") + 1] == str(block.order_seed) and "--frozen" in argv


def _block(**changes):
    data = yaml.safe_load(REPLICATION.read_text())
    data["preregistration"].update(changes)
    return data


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"threshold": -90}, "target_return ['-95'], preregistered -90"),
        ({"budget_minutes": 60}, "max_minutes 110, preregistered 60"),
        ({"seeds": 5}, "the grid runs 10 seeds, the preregistration says 5"),
        ({"other": "fp16"}, "are not base fp32 and other fp16"),
        ({"statistic": "mean"}, "statistic 'mean'"),
    ],
)
def test_a_block_that_says_other_than_the_grid_runs_is_refused(tmp_path, change, message):
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(_block(**change)))
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        grid.load_grid(path)


def test_a_missing_field_is_refused():
    data = _block()
    del data["preregistration"]["order_seed"]
    with pytest.raises(ConfigError, match="missing order_seed"):
        preregistration.parse(data["preregistration"], "x")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_the_file_must_be_committed_and_unchanged_and_its_records_name_it(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@t")
    _git(repo, "config", "user.name", "t")
    path = repo / "g.yaml"
    path.write_text("a: 1\n")
    with pytest.raises(ConfigError, match="not committed"):
        prereg.identity(path)
    _git(repo, "add", "g.yaml")
    _git(repo, "commit", "-qm", "freeze")
    found = prereg.identity(path)
    assert found["grid_file"] == "g.yaml" and len(found["grid_commit"]) == 40
    assert found["grid_sha256"] == preregistration.sha256(path)
    path.write_text("a: 2\n")
    with pytest.raises(ConfigError, match="changed since its last commit"):
        prereg.identity(path)
    records = tmp_path / "records"
    records.mkdir()
    (records / "ok.json").write_text(json.dumps({"experiment": {"grid_sha256": found["grid_sha256"]}}))
    prereg.check_records(records, found["grid_sha256"])
    (records / "other.json").write_text(json.dumps({"experiment": {"name": "x"}}))
    with pytest.raises(ConfigError, match="other.json was not made from this preregistered grid file"):
        prereg.check_records(records, found["grid_sha256"])


def test_a_preregistered_grid_runs_whole(tmp_path):
    args = grid.add_parser(__import__("argparse").ArgumentParser().add_subparsers()).parse_args(
        [str(REPLICATION), "--out", str(tmp_path), "--budget-scale", "0.1"]
    )
    with pytest.raises(ConfigError, match="is preregistered: --experiments and --budget-scale"):
        grid.cmd_grid(args)


def test_the_order_within_a_seed_is_drawn_from_the_frozen_seed():
    cells = [(("actor.envs_per_actor", "1"),)]
    first = [r.name for r in plan_runs(["fp32", "int8"], list(range(10)), cells, 7)]
    assert first == [r.name for r in plan_runs(["fp32", "int8"], list(range(10)), cells, 7)]
    leaders = [first[2 * s].split("-")[0] for s in range(10)]
    assert set(leaders) == {"fp32", "int8"}  # shuffled, not one precision always first
    rotated = [r.name for r in plan_runs(["fp32", "int8"], list(range(10)), cells)]
    assert [n.split("-")[0] for n in rotated[::2]] == ["fp32", "int8"] * 5  # the default rotation
    assert first != [r.name for r in plan_runs(["fp32", "int8"], list(range(10)), cells, 8)]


def test_no_outcome_until_every_planned_run_counts():
    block, _ = preregistration.load(REPLICATION)
    verdict, why, _ = outcome(block, [])
    assert verdict == "no outcome yet" and why == "0 of the 20 planned runs counted"


def test_a_preregistered_grid_records_its_frozen_file_and_refuses_records_of_another(tmp_path, monkeypatch):
    from tests.unit.experiments.test_grid import _fake_runs, _grid, _grid_file

    started = _fake_runs(monkeypatch)
    block = dict(yaml.safe_load(REPLICATION.read_text())["preregistration"], seeds=2, budget_minutes=1.0,
                 threshold=300.0)  # fmt: skip
    overrides = ["target_return=300", *preregistration.EVALUATOR_RULES["each_version_once"]]
    path = _grid_file(
        tmp_path, subsets={}, preregistration=block, expected_hours=round(2 * 2 * 2 / 60, 3),
        experiments={"env1": {"task": "t", "config": str(tmp_path / "tiny.yaml"), "overrides": overrides,
                              "sweep": ["actor.envs_per_actor=1"], "actors": 1, "max_minutes": 1}},
    )  # fmt: skip
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "user.email", "t@t")
    _git(tmp_path, "config", "user.name", "t")
    _git(tmp_path, "add", "grid.yaml")
    _git(tmp_path, "commit", "-qm", "freeze")
    out, records = tmp_path / "out", tmp_path / "records"
    assert _grid(path, out, records) == 0 and len(started) == 4
    expected = [
        r.name
        for r in plan_runs(["fp32", "int8"], [0, 1], [(("actor.envs_per_actor", "1"),)], block["order_seed"])
    ]
    assert started == expected
    files = sorted((records / "t" / "records").glob("*.json"))
    names = {json.loads(f.read_text())["experiment"]["grid_sha256"] for f in files}
    assert names == {preregistration.sha256(path)} and len(files) == 4
    assert json.loads(files[0].read_text())["experiment"]["name"] == "env1"
    path.write_text(
        path.read_text().replace("order_seed: ", "order_seed: 1")
    )  # changed, not committed: refused
    with pytest.raises(ConfigError, match="changed since its last commit"):
        _grid(path, out, records)
    _git(tmp_path, "commit", "-qam", "another design")
    with pytest.raises(ConfigError, match="was not made from this preregistered grid file"):
        _grid(path, out, records)
