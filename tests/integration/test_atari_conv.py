"""A conv smoke run: DQN on ALE Pong's [4, 84, 84] uint8 frames with the Nature CNN (``network.torso: auto``) and
int8 actors, every role in one process: the learner trains the conv Q-network on frames from replay, the quantizer
maps its conv and dense weights to torch keys and 8-bit codes, the actors install them (a message whose conv shapes
did not fit would be rejected and counted) and act through a verified int8 kernel, the evaluator plays unclipped."""

from __future__ import annotations

import json

import pytest

from actorq.launchers.inprocess import run_inprocess
from actorq.roles.torso import run_torso
from tests.conftest import tiny_config

pytestmark = pytest.mark.integration


def test_pong_frames_train_the_nature_cnn_and_int8_actors_run_it(tmp_path):
    config = tiny_config(
        "dqn",
        max_actor_steps=600,
        max_minutes=4,
        **{
            "env.task": "ALE/Pong-v5",
            "env.max_episode_steps": 300,
            "replay.prioritized": False,
            "replay.min_size": 100,
            "network.policy_layers": (64,),
            "learner.batch_size": 8,
            "evaluator.period_s": 5.0,
        },
    )
    torso = run_torso(config)
    assert torso.kind == "nature_cnn" and torso.obs_shape == (4, 84, 84) and torso.channels_first
    code = run_inprocess(config, tmp_path, quiet=True, poll_s=0.2)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert code == 0, summary.get("errors")
    assert summary["exit"] == "max_actor_steps" and summary["learner_steps"] > 0
    assert summary["precision"] == "int8" and summary["kernel"].startswith("int8/")
    assert summary["min_broadcasts_received"] >= 1 and summary["rejected_messages"] == 0
    assert summary["evaluations"] >= 1 and -21 <= summary["best_eval_return"] <= 21
