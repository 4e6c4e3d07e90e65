"""``actorq experiment`` grids without training: the sweep plan, validation before any run, resuming, records.

The runs are a stand-in command that writes the run's summary (what ``actorq train`` leaves behind), so the
orchestration is exercised for real in milliseconds; real training runs are tests/integration/test_experiment.py's.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from actorq.config import ConfigError
from actorq.experiments import experiment
from actorq.experiments.orchestration import plan_runs
from actorq.experiments.sweep import plan_sweeps

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "configs/dqn/gym_cartpole.yaml"
SPI = "replay.samples_per_insert"


def test_sweep_plan_is_the_product_with_readable_names():
    sweeps = plan_sweeps(CONFIG, [], [f"{SPI}=1,8", "learner.batch_size=32,64"])
    assert len(sweeps) == 4
    runs = plan_runs(["fp32", "fp16", "int8"], [0, 1], sweeps)
    assert len(runs) == 3 * 2 * 4 and len({r.name for r in runs}) == 24
    assert f"int8-{SPI}=8-learner.batch_size=64-s1" in {r.name for r in runs}
    run = next(r for r in runs if r.name == f"fp16-{SPI}=1-learner.batch_size=32-s0")
    assert run.overrides == [f"{SPI}=1", "learner.batch_size=32"]
    # every seed runs every cell once before the next seed starts
    assert Counter(r.seed for r in runs[:12]) == {0: 12}


@pytest.mark.parametrize("seeds", [3, 5, 6, 12])
def test_rotation_spreads_every_cells_position(seeds):
    labels, sweeps = ["fp32", "fp16", "int8"], [((SPI, "1"),), ((SPI, "8"),)]
    runs = plan_runs(labels, list(range(seeds)), sweeps)
    n = 6
    positions: dict[tuple, list[int]] = {}
    for i, run in enumerate(runs):
        positions.setdefault((run.label, run.sweep), []).append(i % n)
    means = [sum(p) / len(p) for p in positions.values()]
    firsts = Counter(runs[s * n].label for s in range(seeds))
    assert len(positions) == n and all(len(p) == seeds for p in positions.values())
    assert len(firsts) >= min(3, seeds)  # no precision always starts a seed
    if seeds % n == 0:  # a whole Latin square: every cell at every position equally often
        assert all(sorted(p) == sorted(list(range(n)) * (seeds // n)) for p in positions.values())
    else:  # spread: no cell's mean position far from the middle
        assert max(means) - min(means) <= n / 2


def test_the_old_plan_without_a_sweep_is_unchanged():
    names = [r.name for r in plan_runs(["fp32", "fp16", "int8"], [0, 1, 2])]
    assert names[:4] == ["fp32-s0", "fp16-s0", "int8-s0", "fp16-s1"]


@pytest.mark.parametrize(
    ("sweep", "overrides", "message"),
    [
        (["replay.nope=1"], [], "unknown config key"),
        ([f"{SPI}=-1"], [], "must be >= 0"),
        (["learner.batch_size=abc"], [], "expected int"),
        ([f"{SPI}"], [], "expected KEY=V1,V2"),
        ([f"{SPI}=1,1"], [], "twice"),
        ([f"{SPI}=1", f"{SPI}=8"], [], "more than once"),
        (["actor.precision=int8"], [], "--precisions"),
        (["seed=1,2"], [], "--seeds"),
        ([f"{SPI}=a/b"], [], "directory name"),
        ([f"{SPI}=1,8"], [f"{SPI}=4"], "both swept and overridden"),
    ],
)
def test_bad_sweeps_are_refused_naming_the_problem(sweep, overrides, message):
    with pytest.raises(ConfigError, match=message):
        plan_sweeps(CONFIG, overrides, sweep)


def _args(tmp_path: Path, *extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    experiment.add_parser(parser.add_subparsers())
    return parser.parse_args(
        ["experiment", str(CONFIG), "--out", str(tmp_path / "exp"), "--precisions", "fp32,int8", "--seeds", "2",
         "--sweep", f"{SPI}=1,8", *extra]
    )  # fmt: skip


def test_a_bad_sweep_value_starts_nothing(tmp_path):
    args = _args(tmp_path, "--sweep", "learner.batch_size=32,0")
    with pytest.raises(ConfigError, match="batch_size"):
        experiment.cmd_experiment(args)
    assert not (tmp_path / "exp").exists()


FAKE_TRAIN = """
import json, sys, time
from pathlib import Path
run_dir = Path(sys.argv[sys.argv.index("--run-dir") + 1])
(run_dir / "evaluator").mkdir(parents=True)
(run_dir / "evaluator" / "metrics.csv").write_text(
    "step,time,actor_steps,eval_return\\n0,%f,0,10\\n50,%f,500,180\\n" % (time.time() + 1, time.time() + 2)
)
from actorq.config import save_config
from actorq.hardware import cpu_info
from actorq.launchers.train import planned_config
save_config(planned_config(sys.argv[1:]), run_dir / "config.yaml")  # what actorq train saves
summary = {"exit": "max_actor_steps", "task": "gym:CartPole-v1", "wall_seconds": 3.0, "best_eval_return": 180,
           "precision": sys.argv[sys.argv.index("--precision") + 1], "energy": {"started_at": time.time()},
           "seed": int(sys.argv[sys.argv.index("--seed") + 1]), "args": sys.argv[1:], "hardware": cpu_info()}
(run_dir / "summary.json").write_text(json.dumps(summary))
"""


def test_resume_skips_finished_runs_and_redoes_unfinished_ones(tmp_path, monkeypatch, capsys):
    fake = tmp_path / "fake_train.py"
    fake.write_text(FAKE_TRAIN)

    real = experiment.run_command

    def command(args, run, run_dir):  # the real command line, run by the stand-in instead of actorq train
        return [sys.executable, str(fake), *real(args, run, run_dir)[3:]]

    monkeypatch.setattr(experiment, "run_command", command)
    out = tmp_path / "exp"
    assert experiment.cmd_experiment(_args(tmp_path)) == 0
    first = capsys.readouterr().out
    lines = [line for line in first.splitlines() if line.startswith("[")]
    assert len(lines) == 8 and all("max_actor_steps" in line for line in lines)  # one line per run
    record = json.loads((out / "experiment.json").read_text())
    assert record["sweeps"] == [f"{SPI}=1,8"] and len(record["order"]) == 8
    name = f"int8-{SPI}=8-s1"
    summary = json.loads((out / name / "summary.json").read_text())
    assert f"{SPI}=8" in summary["args"] and summary["precision"] == "int8" and summary["seed"] == 1
    assert record["runs"][name]["sweep"] == {SPI: "8"}
    records = sorted(p.stem for p in (out / "records").glob("*.json"))
    assert records == sorted(record["order"])
    assert json.loads((out / "records" / f"{name}.json").read_text())["sweep"] == {SPI: "8"}

    # A crash left one run unfinished, and one record was lost: the rerun redoes only that run (its directory set
    # aside) and writes the missing record without rerunning its run.
    unfinished = f"fp32-{SPI}=1-s1"
    path = out / unfinished / "summary.json"
    path.write_text(json.dumps(dict(json.loads(path.read_text()), exit="interrupted")))
    (out / "records" / f"int8-{SPI}=1-s0.json").unlink()
    finished_before = (out / name / "summary.json").read_bytes()
    assert experiment.cmd_experiment(_args(tmp_path)) == 0
    second = capsys.readouterr().out
    assert "7 of 8 runs already finished" in second
    assert [line.split(":")[0] for line in second.splitlines() if line.startswith("[")] == [
        f"[{record['order'].index(unfinished) + 1}/8] {unfinished}"
    ]
    assert (out / name / "summary.json").read_bytes() == finished_before
    assert json.loads(path.read_text())["exit"] == "max_actor_steps"
    assert [p.name.rsplit("-", 2)[0] for p in (out / "_incomplete").iterdir()] == [unfinished]
    assert (out / "records" / f"int8-{SPI}=1-s0.json").is_file()


def _fake_runs(tmp_path: Path, monkeypatch) -> None:
    fake = tmp_path / "fake_train.py"
    fake.write_text(FAKE_TRAIN)
    real = experiment.run_command
    monkeypatch.setattr(
        experiment,
        "run_command",
        lambda args, run, run_dir: [sys.executable, str(fake), *real(args, run, run_dir)[3:]],
    )


def test_a_fresh_checkout_goes_on_from_committed_records(tmp_path, monkeypatch, capsys):
    """With --records DIR, a run whose finished record is in DIR is done even though its run directory is gone."""
    _fake_runs(tmp_path, monkeypatch)
    records = tmp_path / "reports" / "records"
    assert experiment.cmd_experiment(_args(tmp_path, "--records", str(records))) == 0
    capsys.readouterr()
    order = json.loads((tmp_path / "exp" / "experiment.json").read_text())["order"]
    assert sorted(p.stem for p in records.glob("*.json")) == sorted(order)
    assert not (tmp_path / "exp" / "records").exists()  # the records live only where --records says

    # A fresh checkout: no run directories, only the committed records, two of them from runs that never finished
    # (one interrupted, one lost), so exactly those two run again, in plan order.
    import shutil

    shutil.rmtree(tmp_path / "exp")
    lost, cut = order[2], order[5]
    (records / f"{lost}.json").unlink()
    path = records / f"{cut}.json"
    data = json.loads(path.read_text())
    data["summary"]["exit"] = "interrupted"
    path.write_text(json.dumps(data))
    assert experiment.cmd_experiment(_args(tmp_path, "--records", str(records))) == 0
    out = capsys.readouterr().out
    assert f"6 of 8 runs already finished in {tmp_path / 'exp'} or {records}" in out
    assert [line.split(" ")[1].rstrip(":") for line in out.splitlines() if line.startswith("[")] == [
        lost,
        cut,
    ]
    assert json.loads(path.read_text())["summary"]["exit"] == "max_actor_steps"
    assert sorted(p.name for p in (tmp_path / "exp").iterdir() if p.name in order) == sorted([lost, cut])


def test_records_of_another_task_or_cell_are_refused_before_any_run(tmp_path, monkeypatch):
    _fake_runs(tmp_path, monkeypatch)
    records = tmp_path / "records"
    assert experiment.cmd_experiment(_args(tmp_path, "--records", str(records))) == 0
    name = f"int8-{SPI}=8-s1"
    path = records / f"{name}.json"
    good = path.read_text()
    for field, value, message in (
        ("task", "gym:Acrobot-v1", "gym:Acrobot-v1"),
        ("sweep", {SPI: "1"}, "sweep"),
    ):
        data = json.loads(good)
        (data["summary"] if field == "task" else data)[field] = value
        path.write_text(json.dumps(data))
        started = sorted(p.name for p in tmp_path.iterdir())
        with pytest.raises(ConfigError, match=f"{name}.json is a run of .*{message}"):
            experiment.cmd_experiment(_args(tmp_path / "other", "--records", str(records)))
        assert sorted(p.name for p in tmp_path.iterdir()) == started  # nothing ran, no experiment dir made


def test_finished_runs_made_with_other_settings_are_refused_before_any_run(tmp_path, monkeypatch):
    """A rerun with another budget (or override) must not skip runs made with the old one: the grid would mix them.
    Checked for run directories and for records alone (a fresh checkout)."""
    _fake_runs(tmp_path, monkeypatch)
    records = tmp_path / "records"
    assert experiment.cmd_experiment(_args(tmp_path, "--records", str(records))) == 0
    same = sorted(p.name for p in (tmp_path / "exp").iterdir())
    assert (
        experiment.cmd_experiment(_args(tmp_path, "--records", str(records))) == 0
    )  # same settings: all skipped
    for extra, overrides, message in (
        (["--max-actor-steps", "0"], [], "max_actor_steps: 60000 there, 0 now"),
        ([], ["learner.batch_size=32"], "learner.batch_size: 64 there, 32 now"),
    ):
        args = _args(tmp_path, "--records", str(records), *extra)
        args.overrides = overrides
        with pytest.raises(ConfigError, match=f"finished run .* was made with another config .*{message}"):
            experiment.cmd_experiment(args)
        assert sorted(p.name for p in (tmp_path / "exp").iterdir()) == same  # nothing ran or moved
    import shutil

    shutil.rmtree(tmp_path / "exp")  # only the records are left: they are checked the same way
    with pytest.raises(
        ConfigError, match=r"records/.*\.json\) was made with another config .*max_actor_steps"
    ):
        experiment.cmd_experiment(_args(tmp_path, "--records", str(records), "--max-actor-steps", "0"))
    # A key a record lacks (a config field added since it was made) cannot contradict.
    for path in records.glob("*.json"):
        data = json.loads(path.read_text())
        del data["config"]["max_actor_steps"]
        path.write_text(json.dumps(data))
    assert (
        experiment.cmd_experiment(_args(tmp_path, "--records", str(records), "--max-actor-steps", "0")) == 0
    )
    assert not any(p.name.endswith("-s0") or p.name.endswith("-s1") for p in (tmp_path / "exp").iterdir())


def _other_machine(records: Path) -> dict:
    """Make every record in ``records`` say it ran on another CPU (this one's, with another L2 and no AVX2)."""
    from actorq.hardware import cpu_info

    other = {
        **cpu_info(),
        "l2_bytes": 12345,
        "flags": {**cpu_info()["flags"], "avx2": not cpu_info()["flags"]["avx2"]},
    }
    for path in records.glob("*.json"):
        data = json.loads(path.read_text())
        data["summary"]["hardware"] = other
        path.write_text(json.dumps(data))
    return other


def test_runs_of_this_machine_are_not_added_to_records_of_another(tmp_path, monkeypatch, capsys, caplog):
    """A grid continued on another CPU is refused before any run starts (its speed-ups would compare wall-clock
    times of two machines), unless every run is finished (re-rendering) or --allow-other-machine says so."""
    import shutil

    from actorq.hardware import machine_slug

    _fake_runs(tmp_path, monkeypatch)
    records = tmp_path / "records"
    assert experiment.cmd_experiment(_args(tmp_path, "--records", str(records))) == 0
    shutil.rmtree(tmp_path / "exp")  # a fresh checkout on another day's machine: only the committed records
    _other_machine(records)
    assert (
        experiment.cmd_experiment(_args(tmp_path, "--records", str(records))) == 0
    )  # all finished: no refusal
    assert "8 of 8 runs already finished" in capsys.readouterr().out
    lost = f"fp32-{SPI}=1-s1"
    (records / f"{lost}.json").unlink()
    made = sorted(p.name for p in (tmp_path / "exp").iterdir())
    with pytest.raises(ConfigError) as refused:
        experiment.cmd_experiment(_args(tmp_path, "--records", str(records)))
    message = str(refused.value)
    assert str(records) in message and "7 runs" in message and "1 run would run" in message
    assert "l2_bytes: 12345 vs" in message and "flags:" in message  # the fields that differ, there vs here
    assert f"--records DIR/{machine_slug()}" in message and "--allow-other-machine" in message
    assert sorted(p.name for p in (tmp_path / "exp").iterdir()) == made  # nothing ran
    with caplog.at_level("WARNING"):
        assert (
            experiment.cmd_experiment(_args(tmp_path, "--records", str(records), "--allow-other-machine"))
            == 0
        )
    assert (records / f"{lost}.json").exists() and "mixing them" in caplog.text
    assert [
        line.split(" ")[1].rstrip(":") for line in capsys.readouterr().out.splitlines() if line[:1] == "["
    ] == [lost]


def test_records_that_name_no_machine_cannot_show_they_are_this_ones(tmp_path, monkeypatch):
    _fake_runs(tmp_path, monkeypatch)
    records = tmp_path / "records"
    assert experiment.cmd_experiment(_args(tmp_path, "--records", str(records), "--seeds", "1")) == 0
    for path in records.glob("*.json"):
        data = json.loads(path.read_text())
        del data["summary"]["hardware"]
        path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="no machine recorded"):
        experiment.cmd_experiment(_args(tmp_path, "--records", str(records)))  # seed 1 would run
