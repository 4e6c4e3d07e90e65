"""``actorq grid``: the committed actor-bound Table 2 definition, its checks, and a rerun that skips finished runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from actorq.config import ConfigError, save_config
from actorq.experiments import experiment, grid
from actorq.experiments.orchestration import RunProcess
from actorq.hardware import cpu_info
from actorq.report.records import SCHEMA
from tests.conftest import tiny_config

ROOT = Path(__file__).resolve().parents[3]
TABLE2 = ROOT / "configs" / "experiments" / "table2-actorbound.yaml"
ACTOR_BOUND = {
    "replay.samples_per_insert=0.25",
    "affinity.learner=[0]",
    "affinity.replay=[0]",
    "affinity.quantizer=[0]",
    "affinity.evaluator=[0]",
    "affinity.actor=[1]",
}


def test_the_committed_grid_is_issue_34s_actor_bound_table2():
    g = grid.load_grid(TABLE2)  # also checks its expected_hours and its subsets' against the budgets
    assert g.precisions == ("fp32", "fp16", "int8") and g.seeds >= 10
    cells = {(e.task, e.sweep) for e in g.experiments}
    for task in ("dqn_cartpole", "dqn_acrobot"):  # the same setting, and fp32's own best (8 envs per actor)
        assert {(task, ("actor.envs_per_actor=1",)), (task, ("actor.envs_per_actor=8",))} <= cells
    for e in g.experiments:
        assert set(e.overrides) >= ACTOR_BOUND and e.actors == 1, e.name
    subset = grid.load_grid(TABLE2, "subset")
    assert subset.hours() <= 1.5 and set(subset.precisions) == {"fp32", "int8"}
    # Runs cut off by a session's end count, censored (not run again: that would keep only the short draws).
    assert g.interruptions == subset.interruptions == "censor"


def _grid_file(tmp_path: Path, **changes) -> Path:
    config = tmp_path / "tiny.yaml"
    save_config(tiny_config("dqn", launcher="inprocess"), config)
    data = {
        "name": "tiny",
        "precisions": ["fp32", "int8"],
        "seeds": 2,
        "expected_hours": round(
            2 * 2 * 2 * (1 + 1) / 60, 3
        ),  # 2 cells x 2 precisions x 2 seeds x (1 + 1) min
        "experiments": {
            "env1": {
                "task": "t",
                "config": str(config),
                "sweep": ["actor.envs_per_actor=1,2"],
                "actors": 1,
                "max_minutes": 1,
            },  # fmt: skip
        },
        "subsets": {"one": {"experiments": ["env1"], "seeds": 1, "expected_hours": round(4 * 2 / 60, 3)}},
    }
    data.update(changes)
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_hours_that_are_not_what_the_budgets_add_up_to_are_refused(tmp_path):
    assert grid.load_grid(_grid_file(tmp_path)).runs() == 8
    with pytest.raises(ConfigError, match=r"expected_hours 9, but its 8 runs take 0\.3 h"):
        grid.load_grid(_grid_file(tmp_path, expected_hours=9))
    with pytest.raises(ConfigError, match="subset two"):
        grid.load_grid(_grid_file(tmp_path, subsets={"two": {"experiments": ["env1"], "expected_hours": 5}}))
    with pytest.raises(
        ConfigError, match=r"subset four: no experiment env9 in grid tiny \(experiments: env1\)"
    ):
        grid.load_grid(_grid_file(tmp_path, subsets={"four": {"experiments": ["env9"], "expected_hours": 1}}))
    with pytest.raises(ConfigError, match="no subset 'three'"):
        grid.load_grid(_grid_file(tmp_path), "three")


def _fake_runs(monkeypatch, cut: dict[str, int] | None = None) -> list[str]:
    """Runs that finish at once: a summary in the run directory and a record in the records folder. A run named in
    ``cut`` is stopped part-way instead (``exit: interrupted``) after that many evaluations, at learner steps 0, 50,
    100, ... (the first is the untrained policy's)."""
    started: list[str] = []
    cut = {} if cut is None else cut

    def run(self, cmd, log_path):
        run_dir = Path(cmd[cmd.index("--run-dir") + 1])
        run_dir.mkdir(parents=True)
        summary = {"exit": "max_minutes", "task": "gym:CartPole-v1", "hardware": cpu_info(), "evaluations": 9}
        if run_dir.name in cut:
            summary.update(exit="interrupted", evaluations=cut[run_dir.name])
            (run_dir / "evaluator").mkdir()
            rows = [f"{50 * i},{i * 10.0},{i * 500},{20.0 + i}" for i in range(cut[run_dir.name])]
            (run_dir / "evaluator" / "metrics.csv").write_text(
                "\n".join(["step,elapsed,actor_steps,eval_return", *rows])
            )
        (run_dir / "summary.json").write_text(json.dumps(summary))
        started.append(run_dir.name)
        return 130 if run_dir.name in cut else 0

    def write_record(run_dir, records_dir, sweep, interruption=None, experiment=None):
        records_dir.mkdir(parents=True, exist_ok=True)
        summary = json.loads((run_dir / "summary.json").read_text())
        record = {"schema": SCHEMA, "name": run_dir.name, "sweep": sweep, "summary": summary, "config": {}}
        record.update({"interruption": interruption} if interruption else {})
        record.update({"experiment": experiment} if experiment else {})
        (records_dir / f"{run_dir.name}.json").write_text(json.dumps(record))

    monkeypatch.setattr(RunProcess, "run", run)
    monkeypatch.setattr(experiment, "write_record", write_record)
    return started


def _grid(path: Path, out: Path, records: Path, *extra: str) -> int:
    import argparse

    parser = argparse.ArgumentParser()
    grid.add_parser(parser.add_subparsers())
    args = parser.parse_args(["grid", str(path), "--out", str(out), "--records", str(records), *extra])
    return args.func(args)


def test_a_rerun_skips_finished_runs_even_from_records_alone(tmp_path, monkeypatch):
    started = _fake_runs(monkeypatch)
    path, out, records = _grid_file(tmp_path), tmp_path / "out", tmp_path / "records"
    assert _grid(path, out, records) == 0
    assert len(started) == 8 and len(list((records / "t" / "records").glob("*.json"))) == 8
    assert _grid(path, out, records) == 0
    assert len(started) == 8  # nothing ran again
    shutil.rmtree(out)  # a fresh checkout: only the committed records are left
    assert _grid(path, out, records) == 0
    assert len(started) == 8
    # A subset runs apart from the full grid (its own folders), so it starts its runs.
    assert _grid(path, out, records, "--subset", "one") == 0
    assert len(started) == 12 and (records / "one" / "t" / "records").is_dir()


def test_a_grid_continued_on_another_machine_is_refused_unless_allowed(tmp_path, monkeypatch):
    started = _fake_runs(monkeypatch)
    path, out, records = _grid_file(tmp_path), tmp_path / "out", tmp_path / "records"
    assert _grid(path, out, records) == 0
    shutil.rmtree(out)  # the next session: another CPU, the committed records
    task = records / "t" / "records"
    for record in task.glob("*.json"):
        data = json.loads(record.read_text())
        data["summary"]["hardware"] = {**cpu_info(), "cores": cpu_info()["cores"] + 1}
        record.write_text(json.dumps(data))
    assert _grid(path, out, records) == 0 and len(started) == 8  # every run finished: re-rendering is fine
    (task / "int8-actor.envs_per_actor=2-s1.json").unlink()
    with pytest.raises(
        ConfigError, match=r"experiment env1: records folder .*cores: \d+ vs \d+.*allow-other-machine"
    ):
        _grid(path, out, records, "--dry-run")  # validation refuses before the first run
    assert len(started) == 8
    assert _grid(path, out, records, "--allow-other-machine") == 0
    assert started[8:] == ["int8-actor.envs_per_actor=2-s1"]


def test_experiments_and_budget_scale_narrow_the_grid_and_reach_each_run(tmp_path, monkeypatch):
    started, budgets = _fake_runs(monkeypatch), []
    run = RunProcess.run

    def budget(self, cmd, log_path):
        budgets.append(float(cmd[cmd.index("--max-minutes") + 1]))
        return run(self, cmd, log_path)

    monkeypatch.setattr(RunProcess, "run", budget)
    two = {
        name: {
            "task": "t",
            "config": str(tmp_path / "tiny.yaml"),
            "sweep": ["actor.envs_per_actor=1"],
            "actors": 1,
            "max_minutes": minutes,
        }  # fmt: skip
        for name, minutes in (("a", 1), ("b", 2))
    }
    path = _grid_file(tmp_path, experiments=two, subsets={}, expected_hours=round(8 * 2.5 / 60, 3))
    g = grid.narrowed(grid.load_grid(path), "b", 1.5)
    assert [e.name for e in g.experiments] == ["b"] and g.experiments[0].max_minutes == 3.0
    assert g.hours() == pytest.approx(4 * 4 / 60) and g.expected_hours == g.hours()
    out, records = tmp_path / "out", tmp_path / "records"
    assert _grid(path, out, records, "--experiments", "b", "--budget-scale", "1.5") == 0
    assert budgets == [3.0] * 4 and not (out / "a").exists() and len(started) == 4
    with pytest.raises(ConfigError, match=r"no experiment c in grid tiny \(experiments: a, b\)"):
        _grid(path, out, records, "--experiments", "b,c")
    with pytest.raises(ConfigError, match="positive factor"):
        _grid(path, out, records, "--budget-scale", "0")


def test_a_run_cut_off_part_way_counts_censored_when_the_grid_says_so(tmp_path, monkeypatch):
    # A session's end cuts a run off with a probability that grows with its length: running it again keeps only the
    # short draws. `interruptions: censor` counts it instead (censored at its last evaluation), except a run cut
    # before it evaluated a trained policy (none, or only the untrained one at learner step 0), which selects
    # nothing and runs again.
    late, early, untrained = (
        "fp32-actor.envs_per_actor=1-s1",
        "int8-actor.envs_per_actor=2-s0",
        "fp32-actor.envs_per_actor=2-s1",
    )
    cut = {late: 3, early: 0, untrained: 1}
    started = _fake_runs(monkeypatch, cut)
    path, out, records = _grid_file(tmp_path, interruptions="censor"), tmp_path / "out", tmp_path / "records"
    assert grid.load_grid(path).interruptions == "censor"
    assert _grid(path, out, records) == 1  # the early cut did not finish; the late one counts
    task = records / "t" / "records"
    record = json.loads((task / f"{late}.json").read_text())
    assert record["interruption"] == "censored" and record["summary"]["exit"] == "interrupted"
    assert not (task / f"{early}.json").exists() and not (task / f"{untrained}.json").exists()
    cut.clear()  # the next session: nothing is cut; only the two early cuts run again
    assert _grid(path, out, records) == 0 and sorted(started[8:]) == sorted([early, untrained])
    shutil.rmtree(out)  # a fresh checkout: the committed censored record still counts
    assert _grid(path, out, records) == 0 and len(started) == 10
    # The default runs the late cut again too (its directory set aside), and refuses an unknown policy.
    cut.update({late: 3})
    rerun = tmp_path / "rerun"
    rerun.mkdir()
    path = _grid_file(rerun)
    assert _grid(path, rerun / "out", rerun / "records") == 1
    assert not (rerun / "records" / "t" / "records" / f"{late}.json").exists()
    cut.clear()
    assert _grid(path, rerun / "out", rerun / "records") == 0 and started[-1] == late
    with pytest.raises(ConfigError, match="interruptions 'keep': choose rerun or censor"):
        grid.load_grid(_grid_file(tmp_path, interruptions="keep"))
