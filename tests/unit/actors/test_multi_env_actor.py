"""An actor over several environments: one batched forward, per-environment exploration streams and adders."""

from __future__ import annotations

import dm_env
import numpy as np
import pytest

from actorq.actors.actor import QuantizedActor
from actorq.actors.policy import ActorPolicy
from actorq.algorithms.d4pg import exploration_sigma
from actorq.algorithms.dqn import exploration_epsilon
from tests.conftest import tiny_config

OBS, LAYERS = 4, (16, 16)


class _Subscriber:
    def latest(self, timeout_s=None):
        return None


class _Adder:
    def __init__(self):
        self.calls = []

    def add_first(self, timestep):
        self.calls.append(("first", timestep))

    def add(self, action, next_timestep, extras=()):
        self.calls.append(("add", action, next_timestep))

    def reset(self):
        self.calls.append(("reset",))


def _actor(algorithm: str, envs: int, actor_id: int, adders=None, bound=1.0, **changes) -> QuantizedActor:
    config = tiny_config(algorithm, **{"actor.envs_per_actor": envs, **changes})
    out = 2 if algorithm == "dqn" else 1
    policy = ActorPolicy(algorithm, OBS, out, LAYERS, precision="fp32", batch=envs, use_cache=False)
    return QuantizedActor(
        config,
        policy,
        adders,
        _Subscriber(),
        actor_id=actor_id,
        seed=actor_id,
        action_low=np.float32(-bound),
        action_high=np.float32(bound),
    )


def test_each_environment_explores_on_its_own_stream_of_the_actors_schedule():
    # 2 actors x 3 envs explore as 6 streams: actor 1's env j is stream 3 + j.
    config = tiny_config("d4pg", **{"actor.envs_per_actor": 3})
    actor = _actor("d4pg", 3, actor_id=1)
    want = [exploration_sigma(3 + j, 6, config.settings.sigma_max) for j in range(3)]
    np.testing.assert_allclose(actor.exploration, want, rtol=1e-6)
    assert len(set(actor.exploration.tolist())) == 3 and actor.exploration_level == pytest.approx(want[0])
    dqn = _actor("dqn", 3, actor_id=0)
    cfg = tiny_config("dqn").settings
    want = [exploration_epsilon(j, 6, cfg.epsilon_min, cfg.epsilon_max) for j in range(3)]
    np.testing.assert_allclose(dqn.exploration, want)
    assert dqn.exploration[0] == cfg.epsilon_max and len(set(dqn.exploration.tolist())) == 3


def test_one_batched_forward_gives_each_environment_its_action_with_its_own_noise():
    actor = _actor("d4pg", 4, actor_id=0, bound=100.0)  # wide bounds: the noise is never clipped
    obs = np.random.default_rng(0).standard_normal((4, OBS)).astype(np.float32)
    greedy = actor.policy(obs)
    draws = np.stack([np.stack(actor.select_actions(obs)) for _ in range(400)])  # [400, 4, 1]
    assert draws.dtype == np.float32 and draws.shape == (400, 4, 1)
    assert actor.timers.counts["inference"] == 400  # one forward per call, not one per environment
    # Each environment's spread follows its own sigma.
    spread = (draws[:, :, 0] - greedy[None, :, 0]).std(axis=0)
    np.testing.assert_allclose(spread, actor.exploration, rtol=0.25)
    clipped = _actor("d4pg", 4, actor_id=0, bound=0.01)
    assert np.all(np.abs(np.stack(clipped.select_actions(obs))) <= 0.01)


def test_dqn_actions_are_int32_scalars_and_greedy_without_exploration():
    actor = _actor("dqn", 3, actor_id=0, **{"settings.epsilon_max": 0.0, "settings.epsilon_min": 0.0})
    obs = np.random.default_rng(1).standard_normal((3, OBS)).astype(np.float32)
    actions = actor.select_actions(obs)
    assert [type(a) for a in actions] == [np.int32] * 3
    assert [int(a) for a in actions] == np.argmax(actor.policy(obs), axis=-1).tolist()


def test_observations_go_to_each_environments_own_adder_and_count_as_env_steps():
    adders = [_Adder() for _ in range(3)]
    actor = _actor("dqn", 3, actor_id=0, adders=adders)
    first = dm_env.restart(np.zeros(OBS, np.float32))
    step = dm_env.transition(np.float32(1), np.ones(OBS, np.float32), np.float32(1))
    for j in range(3):
        actor.observe_first(first, env=j)
    actor.observe(np.int32(1), step, env=2)
    assert [len(a.calls) for a in adders] == [1, 1, 2] and adders[2].calls[1][1] == 1
    assert actor._steps_since_pull == 1
    with pytest.raises(ValueError, match="2 adders for 3 environments"):
        _actor("dqn", 3, actor_id=0, adders=adders[:2])
