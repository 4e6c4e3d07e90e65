"""A seed's runs start from the same network: the learner seeds its initial weights with the run's seed, whatever
the actors' precision or setting (actors wait for the learner's first weights, so this is every role's start)."""

from __future__ import annotations

import numpy as np
import pytest

from actorq.config import replace
from tests.conftest import tiny_config

pytestmark = pytest.mark.reverb


def _initial_policy(config, server) -> list[np.ndarray]:
    from actorq.envs import make_environment
    from actorq.learners import make_learner
    from actorq.replay.tables import environment_spec_for

    env = make_environment(config.env)
    spec = environment_spec_for(env)
    env.close()
    learner = make_learner(config, spec, f"localhost:{server.port}")
    return [np.array(v.numpy()) for v in learner.policy_module.variables]


def test_same_seed_same_initial_network_across_precisions_and_settings(reverb_server):
    base = tiny_config("dqn", seed=3)
    server = reverb_server(base)
    fp32 = _initial_policy(replace(base, **{"actor.precision": "fp32"}), server)
    # Another precision and another cell of the actor-bound grid (envs per actor), the same seed.
    int8 = _initial_policy(replace(base, **{"actor.precision": "int8", "actor.envs_per_actor": 8}), server)
    other_seed = _initial_policy(replace(base, seed=4), server)
    assert fp32 and len(fp32) == len(int8) == len(other_seed)
    for a, b in zip(fp32, int8, strict=True):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, c) for a, c in zip(fp32, other_seed, strict=True))
