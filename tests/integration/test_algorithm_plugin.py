"""An algorithm outside ``actorq`` is one module plus its config: the test-only Softmax DQN (``tests/softmax_dqn.py``)
with its own config field, trained in-process (registered by the test) and through the subprocess placement (found
by every process through an ``actorq.algorithms`` entry point on ``PYTHONPATH``, as an installed plugin is)."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
import yaml

from actorq import algorithms
from actorq.config import config_from_dict
from actorq.launchers.inprocess import run_inprocess
from tests import softmax_dqn
from tests.training import train_summary

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


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


def plugin_path(tmp_path: Path) -> Path:
    """A directory holding a distribution's metadata that declares Softmax DQN's entry point (what ``pip install``
    of a plugin would leave in site-packages); on ``PYTHONPATH`` it makes every Python process find the plugin."""
    site = tmp_path / "site"
    dist = site / "softmax_dqn_plugin-0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: softmax-dqn-plugin\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text(f"[{algorithms.ENTRY_POINT_GROUP}]\n{softmax_dqn.ENTRY_POINT}\n")
    return site


def test_a_plugin_found_by_entry_point_trains_through_the_subprocess_placement(tmp_path):
    config_path = tmp_path / "softmax_dqn.yaml"
    # Ends on learner steps: role processes start at their own pace (the learner's TensorFlow import is slow).
    config_path.write_text(
        yaml.safe_dump(
            {
                **softmax_dqn.CONFIG,
                "max_actor_steps": 0,
                "learner": {**softmax_dqn.CONFIG["learner"], "max_steps": 30},
            }
        )
    )
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_path(tmp_path)), str(ROOT)])}
    summary = train_summary([str(config_path), "--launcher", "local"], run_dir, env=env)
    assert summary["exit"] == "max_learner_steps" and summary["learner_steps"] >= 30
    assert summary["min_broadcasts_received"] >= 1 and summary["rejected_messages"] == 0
    assert summary["evaluations"] >= 1 and summary["best_eval_return"] is not None
    # Each actor process explored at the plugin's temperatures, from the plugin's own config field (0.5 spread
    # over 2 streams: 0.25 and 0.5; DQN's epsilons would be 0.3 and 0.01).
    levels = {}
    for metrics in sorted(run_dir.glob("actor*/metrics.csv")):
        rows = list(csv.DictReader(metrics.open()))
        levels[metrics.parent.name] = {float(r["exploration"]) for r in rows if r.get("exploration")}
    assert sorted(levels.values(), key=min) == [{0.25}, {0.5}], levels
