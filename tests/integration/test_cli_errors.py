"""Bad input gives a specific error before any work starts, and leaves no process behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def actorq(*args, timeout=120, env_drop: str | None = None):
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    env = {k: v for k, v in os.environ.items() if k != env_drop}
    result = subprocess.run(
        [sys.executable, "-m", "actorq.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    after = {p.pid for p in psutil.Process().children(recursive=True)}
    assert after <= before, "the command left processes behind"
    return result


def test_unknown_task_lists_valid_ones(tmp_path):
    r = actorq(
        "train",
        "configs/d4pg/dmc_cartpole_balance.yaml",
        "env.task=cartpole:balanse",
        "--run-dir",
        str(tmp_path / "r"),
    )
    assert r.returncode == 2
    assert "unknown dm_control task 'cartpole:balanse'" in r.stderr and "cartpole:balance" in r.stderr
    assert not (tmp_path / "r").exists()  # nothing started, nothing written


def test_unknown_key_and_bad_precision(tmp_path):
    r = actorq(
        "train", "configs/dqn/gym_cartpole.yaml", "learner.batchsize=3", "--run-dir", str(tmp_path / "r")
    )
    assert (
        r.returncode == 2
        and "unknown config key learner.batchsize (did you mean learner.batch_size?)" in r.stderr
        and "batch_size" in r.stderr
    )
    r = actorq("train", "configs/dqn/gym_cartpole.yaml", "--precision", "int4")
    assert r.returncode == 2 and "invalid choice: 'int4'" in r.stderr
    r = actorq("train", "configs/dqn/gym_cartpole.yaml", "algorithm=ppo")
    assert (
        r.returncode == 2
        and "algorithm='ppo' is not valid; choose one of: d4pg, " in r.stderr
        and "dqn" in r.stderr
    )
    r = actorq("train", "configs/nope.yaml")
    assert r.returncode == 2 and "not found" in r.stderr


def test_unreachable_replay_address(tmp_path):
    r = actorq(
        "role",
        "actor",
        "--config",
        "configs/dqn/gym_cartpole.yaml",
        "--run-dir",
        str(tmp_path),
        "--replay-address",
        "localhost:1",
        "--connect-timeout",
        "2",
        "--insecure-weights",
    )
    assert r.returncode == 3
    assert "replay server at localhost:1 did not answer" in r.stderr
    assert "warning: --connect-timeout is deprecated: use --connect-timeout-s" in r.stderr


def test_role_without_a_weights_key_refuses_to_start(tmp_path):
    for role in ("actor", "quantizer", "learner", "evaluator"):
        r = actorq(
            "role",
            role,
            "--config",
            "configs/dqn/gym_cartpole.yaml",
            "--run-dir",
            str(tmp_path),
            "--replay-address",
            "localhost:1",
            env_drop="ACTORQ_WEIGHTS_KEY_FILE",
        )
        assert r.returncode == 2, r.stderr
        assert r.stderr.startswith("error: no weights key for this run") and "--insecure-weights" in r.stderr
