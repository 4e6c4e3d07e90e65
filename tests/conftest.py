"""Shared fixtures: tiny experiment configs and an in-process Reverb server with ActorQ's tables."""

from __future__ import annotations

import os
import tempfile

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Kernel choices made by the tests (and by the role processes they start) go to a cache of this session's own, so
# a test never reuses, nor leaves behind, a choice in the user's ~/.cache/actorq.
os.environ.setdefault(
    "ACTORQ_KERNEL_CACHE", os.path.join(tempfile.mkdtemp(prefix="actorq-test-kernels-"), "kernels.json")
)


def tiny_config(algorithm: str = "dqn", **changes):
    """A config with tiny networks and small replay settings, fast enough for unit/integration tests."""
    from actorq.config import config_from_dict, replace

    if algorithm == "dqn":
        data = {
            "algorithm": "dqn",
            "env": {"suite": "gym", "task": "CartPole-v1"},
            "network": {"policy_layers": [32, 32]},
            "replay": {
                "min_size": 50,
                "max_size": 10000,
                "samples_per_insert": 0,
                "n_step": 1,
                "prioritized": True,
            },
            "learner": {"batch_size": 16, "publish_period": 5, "checkpoint_period_s": 0},
            "actor": {"precision": "int8", "num_actors": 2, "update_period": 20},
            "evaluator": {"period_s": 1.0, "episodes": 1},
        }
    else:
        data = {
            "algorithm": "d4pg",
            "env": {"suite": "dmc", "task": "cartpole:balance", "max_episode_steps": 100},
            "network": {"policy_layers": [32, 32]},
            "d4pg": {"critic_layers": [32, 32]},
            "replay": {"min_size": 50, "max_size": 10000, "samples_per_insert": 0, "n_step": 3},
            "learner": {"batch_size": 16, "publish_period": 5, "checkpoint_period_s": 0},
            "actor": {"precision": "int8", "num_actors": 2, "update_period": 20},
            "evaluator": {"period_s": 1.0, "episodes": 1},
        }
    data.update({"log_period_s": 0.5, "max_minutes": 2})
    return replace(config_from_dict(data), **changes) if changes else config_from_dict(data)


@pytest.fixture
def reverb_server():
    """Factory: ``reverb_server(config)`` starts an in-process server with the experiment's tables; stopped after."""
    servers = []

    def start(config, checkpoint_dir=None):
        from actorq.envs import make_environment
        from actorq.replay import make_server
        from actorq.replay.tables import environment_spec_for

        env = make_environment(config.env)
        server = make_server(config, environment_spec_for(env), checkpoint_dir=checkpoint_dir)
        env.close()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
