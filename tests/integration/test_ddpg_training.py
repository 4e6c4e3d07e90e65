"""DDPG, the third built-in algorithm, trains end to end through the subprocess placement with int8 actors: its
learner steps, its policy's weights reach the actor and the evaluator, and the int8 kernel verifies against it."""

from __future__ import annotations

import pytest

from tests.training import train_summary

pytestmark = pytest.mark.integration


def test_ddpg_trains_on_pendulum_through_the_local_placement(tmp_path):
    run_dir = tmp_path / "run"
    overrides = [
        "network.policy_layers=[32,32]",
        "ddpg.critic_layers=[32,32]",
        "replay.min_size=200",
        "learner.max_steps=300",  # ends the run (exit max_learner_steps)
        "evaluator.period_s=5",
        "evaluator.episodes=1",
        "target_return=null",
    ]
    args = ["configs/ddpg/gym_pendulum.yaml", *overrides, "--launcher", "local", "--precision", "int8"]
    summary = train_summary(args + ["--actors", "1", "--max-minutes", "2.5"], run_dir)
    assert summary["algorithm"] == "ddpg" and summary["exit"] == "max_learner_steps"
    assert summary["learner_steps"] >= 300 and summary["actor_steps"] >= 200
    assert summary["min_broadcasts_received"] >= 1 and summary["rejected_messages"] == 0
    assert summary["evaluations"] >= 1 and -2000 < summary["best_eval_return"] <= 0  # Pendulum's range
