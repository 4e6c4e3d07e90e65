"""A user's environment (``tests/user_env.py``, known to nothing inside ``actorq``) trained by its import path through
the local launcher: every role's process imports it (``PYTHONPATH`` holds the repository root, as a user's installed
package would be found). The in-process, Launchpad and Ray placements train it in ``tests/slow/test_launchers.py``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from actorq.config import save_config
from tests import user_env
from tests.conftest import tiny_config
from tests.training import train_summary

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_a_users_environment_trains_in_every_role_process_of_the_local_launcher(tmp_path):
    config = tiny_config("dqn", **user_env.OVERRIDES, **{"learner.max_steps": 30})
    save_config(config, tmp_path / "user_env.yaml")
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    summary = train_summary([str(tmp_path / "user_env.yaml"), "--launcher", "local"], run_dir, env=env)
    assert summary["exit"] == "max_learner_steps" and summary["learner_steps"] >= 30
    assert summary["precision"] == "int8" and summary["min_broadcasts_received"] >= 1
    assert summary["evaluations"] >= 1 and summary["best_eval_return"] is not None
    assert json.loads((run_dir / "actor_0" / "kernel.json").read_text())["precision"] == "int8"
