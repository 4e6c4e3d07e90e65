"""``actorq experiment``: the plan's order, real runs in that order, resuming without redoing finished runs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from actorq.config import save_config
from tests.conftest import tiny_config
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


def _experiment(
    config_path: Path, out: Path, *extra: str, timeout: float = 300
) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "actorq.cli", "experiment", str(config_path), "--out", str(out), *extra]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


SPI = "replay.samples_per_insert"
FP32, INT8 = f"fp32-{SPI}=0-s0", f"int8-{SPI}=0-s0"
"""The runs' names: a sweep cell (one value here) is part of each run's name, command, record and label."""


@pytest.mark.integration
def test_experiment_runs_in_order_resumes_only_unfinished_runs_and_its_records_make_the_report(tmp_path):
    # One experiment for the order, the resume and the records (each run costs a TensorFlow start): fp32 then int8,
    # one seed, crossed with a one-value sweep.
    config = tiny_config(
        "dqn", launcher="inprocess", max_actor_steps=150, max_minutes=1.5, **{"actor.num_actors": 1}
    )
    save_config(config, tmp_path / "in.yaml")
    out = tmp_path / "exp"
    args = ("--precisions", "fp32,int8", "--seeds", "1", "--sweep", f"{SPI}=0")
    result = _experiment(tmp_path / "in.yaml", out, *args)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    record = json.loads((out / "experiment.json").read_text())
    assert record["order"] == [FP32, INT8]
    fp32, int8 = record["runs"][FP32], record["runs"][INT8]
    assert fp32["ended_at"] <= int8["started_at"]  # one at a time, in the planned order
    for name, precision in ((FP32, "fp32"), (INT8, "int8")):
        summary = json.loads((out / name / "summary.json").read_text())
        assert summary["precision"] == precision and summary["exit"] == "max_actor_steps"
        command = record["runs"][name]["command"]
        assert "--run-dir" in command and f"{SPI}=0" in command
        assert (out / "records" / f"{name}.json").is_file()

    # Mark int8 as interrupted: a rerun redoes only it, and keeps the old directory aside.
    summary_path = out / INT8 / "summary.json"
    summary = json.loads(summary_path.read_text())
    summary_path.write_text(json.dumps(dict(summary, exit="interrupted")))
    fp32_before = (out / FP32 / "summary.json").read_bytes()
    fp32_mtime = (out / FP32 / "summary.json").stat().st_mtime_ns
    result = _experiment(tmp_path / "in.yaml", out, *args)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "1 of 2 runs already finished" in result.stdout
    assert f"[2/2] {INT8}" in result.stdout and f"{FP32}:" not in result.stdout
    assert (out / FP32 / "summary.json").read_bytes() == fp32_before
    assert (out / FP32 / "summary.json").stat().st_mtime_ns == fp32_mtime
    assert json.loads(summary_path.read_text())["exit"] == "max_actor_steps"
    assert len(list((out / "_incomplete").iterdir())) == 1

    for name in (FP32, INT8):  # the records alone make the report
        shutil.rmtree(out / name)
    report = subprocess.run(
        [sys.executable, "-m", "actorq.cli", "report", str(out), "--out", str(tmp_path / "report")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr[-2000:]
    numbers = json.loads((tmp_path / "report" / "report.json").read_text())
    (task,) = numbers.values()
    assert sorted(task["labels"]) == [f"fp32 [{SPI}=0]", f"int8 [{SPI}=0]"]


@pytest.mark.integration
def test_bad_input_starts_nothing(tmp_path):
    result = _experiment(ROOT / "configs/dqn/gym_cartpole.yaml", tmp_path / "x", "--precisions", "int4")
    assert result.returncode == 2 and "error:" in result.stderr and "int4" in result.stderr
    assert not (tmp_path / "x").exists()


def _start_experiment(
    tmp_path: Path, launcher: str, precisions: str, **popen: Any
) -> tuple[subprocess.Popen, Path]:
    """An experiment of 5-minute tiny-DQN runs with one actor, in the background, once its first run (fp32-s0) has
    evaluated (or the experiment ended); returns it and its output folder."""
    config = tiny_config("dqn", launcher=launcher, max_minutes=5, **{"actor.num_actors": 1})
    save_config(config, tmp_path / "in.yaml")
    out = tmp_path / "exp"
    cmd = [sys.executable, "-m", "actorq.cli", "experiment", str(tmp_path / "in.yaml"), "--out", str(out),
           "--precisions", precisions, "--seeds", "1"]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, **popen)
    try:
        wait_until(
            lambda: (out / "fp32-s0" / "evaluator" / "metrics.csv").exists() or proc.poll() is not None,
            240,
            "the first run's first evaluation",
        )
    except AssertionError:
        proc.kill()
        raise
    return proc, out


@pytest.mark.slow
def test_ctrl_c_is_forwarded_and_nothing_is_left_behind(tmp_path):
    proc, out = _start_experiment(
        tmp_path, "inprocess", "fp32,int8", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        children = psutil.Process(proc.pid).children(recursive=True)
        assert children, "the experiment should be running a train subprocess"
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert json.loads((out / "fp32-s0" / "summary.json").read_text())["exit"] == "interrupted"
    assert not (out / "int8-s0").exists()  # stopped: the next run never started
    assert not [p for p in children if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.slow
def test_a_run_whose_experiment_is_killed_stops_itself(tmp_path):
    # kill -9 gives the experiment no chance to stop its run, which is in its own session: the run must notice
    # and stop as on SIGTERM (summary written), and leave no process behind.
    proc, out = _start_experiment(
        tmp_path, "local", "fp32", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    children: list[psutil.Process] = []
    try:
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) >= 6, "the experiment should be running a train subprocess and its roles"
        proc.kill()
        proc.wait(timeout=10)
        wait_until(
            lambda: not [p for p in children if p.is_running() and p.status() != psutil.STATUS_ZOMBIE],
            90,
            "the run and its roles to stop after the experiment was killed",
        )
    finally:
        for child in children:  # only what this test started, whatever failed above
            if child.is_running():
                child.kill()
    summary = json.loads((out / "fp32-s0" / "summary.json").read_text())
    assert summary["exit"] == "interrupted"
