"""A pixel smoke run: DQN on MinAtar Breakout's [10, 10, 4] uint8 frames with int8 actors, every role in one process:
actors write uint8 frames (the experience table's signature is uint8: a float frame would be refused), the learner
samples and casts them and learns, the evaluator plays unclipped episodes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from actorq.envs import environment_spec
from actorq.launchers.inprocess import run_inprocess
from tests.conftest import tiny_config

pytestmark = pytest.mark.integration


def test_minatar_frames_are_written_sampled_and_learned_from(tmp_path):
    config = tiny_config(
        "dqn",
        max_actor_steps=1500,
        max_minutes=4,
        **{"env.task": "MinAtar/Breakout-v1", "env.max_episode_steps": 500, "replay.prioritized": False},
    )
    spec = environment_spec(config.env)
    assert spec.obs_shape == (10, 10, 4) and spec.obs_dtype == np.uint8
    code = run_inprocess(config, tmp_path, quiet=True, poll_s=0.2)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert code == 0, summary.get("errors")
    assert summary["exit"] == "max_actor_steps" and summary["actor_steps"] >= 1500
    assert summary["learner_steps"] > 0 and summary["precision"] == "int8"
    assert summary["min_broadcasts_received"] >= 1 and summary["rejected_messages"] == 0
    assert summary["evaluations"] >= 1 and summary["best_eval_return"] is not None
