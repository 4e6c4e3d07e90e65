"""A new algorithm is one module plus its config: the test-only Softmax DQN (``tests/softmax_dqn.py``), registered
here and nowhere else, trains through the in-process launcher, and every role asks it (never a name compare)."""

from __future__ import annotations

import json

import pytest

from actorq import algorithms
from actorq.config import config_from_dict
from actorq.launchers.inprocess import run_inprocess
from tests import softmax_dqn

pytestmark = pytest.mark.integration


def test_a_registered_third_algorithm_runs_every_role_in_process(tmp_path):
    algo = algorithms.register(softmax_dqn.SoftmaxDQN())
    try:
        config = config_from_dict(softmax_dqn.CONFIG)
        code = run_inprocess(config, tmp_path, quiet=True, poll_s=0.2)
    finally:
        algorithms.unregister(algo.name)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert code == 0, summary.get("errors")
    assert summary["exit"] == "max_actor_steps" and summary["actor_steps"] >= 600
    assert summary["learner_steps"] > 0
    assert summary["min_broadcasts_received"] >= 1 and summary["rejected_messages"] == 0
    assert summary["evaluations"] >= 1 and summary["best_eval_return"] is not None
    # Its exploration acted (actors), its rule evaluated (evaluator), its bound verified the int8 kernels
    # (actors), its mapping converted the learner's weights (quantizer, evaluator).
    assert algo.calls["explore"] >= 600 // config.actor.num_actors
    assert algo.calls["greedy"] > 0 and algo.calls["verify"] > 0 and algo.calls["mapping_rows"] > 0
