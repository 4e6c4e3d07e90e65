"""DDPG, the third built-in algorithm: its torch policy computes its TF policy through its mapping, the actors' int8
kernel verifies against it, and its learner's split and compiled updates are Acme's DDPG step."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from actorq.algorithms.ddpg.torch_policy import DDPGPolicy
from actorq.config import config_from_dict, replace
from actorq.networks.mapping import tf_to_torch_state
from tests.unit.networks.test_parity import randomize, torch_twin
from tests.unit.test_learner_update import _copy_state, _dataset, _learners, _state

TINY = {
    "algorithm": "ddpg",
    "env": {"suite": "gym", "task": "Pendulum-v1"},
    "network": {"policy_layers": [32, 32]},
    "ddpg": {"critic_layers": [32, 32]},
    "replay": {"min_size": 50, "max_size": 10000, "samples_per_insert": 0, "n_step": 3},
    "learner": {"batch_size": 16, "publish_period": 5, "checkpoint_period_s": 0},
    "actor": {"precision": "int8", "num_actors": 1, "update_period": 20},
    "evaluator": {"period_s": 1.0, "episodes": 1},
}


def tf_policy(obs_dim: int, low: np.ndarray, high: np.ndarray, layers: tuple[int, ...], seed: int = 0):
    """DDPG's TF policy with random weights: ``(variables by TF name, observations, TF actions)``."""
    import tensorflow as tf
    from acme import specs

    from actorq.algorithms.ddpg.tf_networks import make_networks
    from actorq.networks import tf_nets

    rng = np.random.default_rng(seed)
    spec = specs.BoundedArray(low.shape, np.float32, low, high)
    policy = make_networks(spec, layers, (8,))["policy"]
    tf_nets.create_variables(policy, obs_dim)
    randomize(policy, rng)
    x = (2.0 * rng.standard_normal((64, obs_dim))).astype(np.float32)
    return tf_nets.policy_variables(policy), x, policy(tf.constant(x)).numpy()


@pytest.mark.parametrize("layers", [(32, 16), (8,), (256, 256)])
def test_the_torch_policy_computes_the_tf_policy_through_the_mapping(layers):
    low, high = np.array([-2.0, 0.0], np.float32), np.array([2.0, 3.0], np.float32)
    tf_vars, x, expected = tf_policy(5, low, high, layers)
    twin = torch_twin(DDPGPolicy(5, 2, layers, low, high), tf_to_torch_state("ddpg", tf_vars, layers))
    with torch.no_grad():
        got = twin(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    assert np.all(got >= low) and np.all(got <= high) and np.ptp(got, axis=0).min() > 0.1  # not saturated


def test_an_int8_actor_kernel_verifies_against_the_tf_policy():
    from actorq.actors.policy import ActorPolicy

    low, high, layers = np.array([-2.0], np.float32), np.array([2.0], np.float32), (64, 64)
    tf_vars, x, expected = tf_policy(3, low, high, layers, seed=1)
    state = tf_to_torch_state("ddpg", tf_vars, layers)
    policy = ActorPolicy("ddpg", 3, 1, layers, "int8", low, high, use_cache=False)
    policy.load_state(state)
    assert policy.precision == "int8" and policy.selection.first_message[-1]["ok"], policy.selection
    got = policy(x)
    assert np.abs(got - expected).max() / 4.0 <= 0.03  # DDPG's int8 bound: 3% of the action range


@pytest.mark.reverb
def test_split_and_compiled_updates_match_acmes_ddpg_step(reverb_server):
    from actorq.learners import make_update_function

    acme = replace(
        config_from_dict(TINY),
        **{"learner.target_update_period": 2, "learner.jit_optimizer": False, "learner.einsum_dense": False},
    )
    ours = replace(acme, **{"learner.jit_optimizer": True, "learner.einsum_dense": True})
    server = reverb_server(acme)
    fused, split, compiled = _learners([acme, ours, ours], server)
    batches = [fused.sample() for _ in range(4)]
    fused._learner._iterator = iter(_dataset(batches))
    for other in (split, compiled):
        _copy_state(fused, other)
    compiled_update = make_update_function(compiled._learner, compiled._acme_class, jit_compile=True)
    before = [np.array(v.numpy()) for v in _state(fused)]
    for batch in batches:  # includes a target-network copy (period 2)
        ref = fused._learner._step()
        got_split, got_compiled = split.update(batch), compiled_update(batch)
        for key in ("critic_loss", "policy_loss"):
            np.testing.assert_allclose(got_split[key], ref[key], rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(got_compiled[key], ref[key], rtol=1e-4, atol=1e-5)
    after = [np.array(v.numpy()) for v in _state(fused)]
    assert any(not np.array_equal(a, b) for a, b in zip(before, after, strict=True))
    for a, b, c in zip(_state(fused), _state(split), _state(compiled), strict=True):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6, err_msg=a.name)
        np.testing.assert_allclose(c.numpy(), a.numpy(), rtol=1e-4, atol=1e-5, err_msg=a.name)
    split.step()  # the learner role's step: Acme's step() on our sample and update
    assert split.steps == 5 and set(split.get_variables()) == {n for n, _, _ in _mapping(acme)}


def _mapping(config):
    from actorq.networks.mapping import mapping_table

    return mapping_table("ddpg", config.network.policy_layers)
