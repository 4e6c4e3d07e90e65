from __future__ import annotations

import numpy as np
import pytest

from actorq.config import EnvConfig
from actorq.envs import UnknownTaskError, environment_spec, make_environment


def test_dmc_flat_observations_and_specs():
    env = make_environment(EnvConfig("dmc", "cartpole:balance"), seed=1)
    ts = env.reset()
    assert ts.first() and ts.observation.dtype == np.float32 and ts.observation.shape == (5,)
    ts = env.step(np.zeros(1, np.float32))
    assert ts.reward.dtype == np.float32 and env.reward_spec().dtype == np.float32
    spec = environment_spec(EnvConfig("dmc", "cartpole:balance"))
    assert spec.obs_dim == 5 and not spec.discrete and spec.num_actions == 1
    assert spec.action_low[0] == -1 and spec.action_high[0] == 1


def test_gym_termination_and_truncation():
    env = make_environment(EnvConfig("gym", "CartPole-v1"), seed=0)
    ts = env.reset()
    steps = 0
    while not ts.last():
        ts = env.step(np.int32(0))
        steps += 1
    assert ts.discount == 0.0  # pushing left always topples the pole: a termination, not a truncation
    env = make_environment(EnvConfig("gym", "CartPole-v1", max_episode_steps=5), seed=0)
    env.reset()
    for _ in range(5):
        ts = env.step(np.int32(_ % 2))
    assert ts.last() and ts.discount == 1.0
    spec = environment_spec(EnvConfig("gym", "CartPole-v1"))
    assert spec.discrete and spec.num_actions == 2 and spec.obs_dim == 4


def test_seeded_envs_repeat():
    a = make_environment(EnvConfig("gym", "Acrobot-v1"), seed=3).reset().observation
    b = make_environment(EnvConfig("gym", "Acrobot-v1"), seed=3).reset().observation
    np.testing.assert_array_equal(a, b)


def test_unknown_tasks_list_valid_ones():
    with pytest.raises(UnknownTaskError, match="tasks of that domain: cartpole:balance"):
        make_environment(EnvConfig("dmc", "cartpole:balanse"))
    with pytest.raises(UnknownTaskError, match="nearest: CartPole-v1"):
        make_environment(EnvConfig("gym", "CartPole-v9"))


@pytest.mark.parametrize(
    ("env", "limit"),
    [
        (EnvConfig("gym", "CartPole-v1"), 500),
        (EnvConfig("gym", "Acrobot-v1"), 500),
        (EnvConfig("gym", "CartPole-v1", max_episode_steps=200), 200),
        (EnvConfig("dmc", "cartpole:balance", max_episode_steps=300), 300),
    ],
)
def test_step_limit_is_where_episodes_are_truncated(env, limit):
    environment = make_environment(env, seed=0)
    assert environment.step_limit == limit
    if env.task == "CartPole-v1":
        return  # its pole falls long before the limit: the tasks below never end early
    ts, steps = environment.reset(), 0
    action = np.int32(0) if env.suite == "gym" else np.zeros(1, np.float32)
    while not ts.last() and steps <= limit:
        ts = environment.step(action)
        steps += 1
    assert steps == limit and ts.discount == 1.0  # truncated at the limit, not terminated
