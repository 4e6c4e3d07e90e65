"""The evaluator's batched greedy episodes: the same returns as one episode at a time, one forward per step."""

from __future__ import annotations

import dm_env
import numpy as np

from actorq import algorithms
from actorq.roles.policy import greedy_episodes


class _CountdownEnv:
    """Observation [t, seed]; reward = the action taken; the episode ends after ``length`` steps."""

    def __init__(self, length: int, seed: float):
        self.length, self.seed, self.t = length, seed, 0

    def reset(self) -> dm_env.TimeStep:
        self.t = 0
        return dm_env.restart(np.array([0.0, self.seed], np.float32))

    def step(self, action) -> dm_env.TimeStep:
        self.t += 1
        obs = np.array([self.t, self.seed], np.float32)
        reward = float(np.asarray(action).reshape(-1)[0])
        return dm_env.termination(reward, obs) if self.t >= self.length else dm_env.transition(reward, obs)


class _Policy:
    """Q-values (discrete) or an action (continuous) that depend on each row's observation; records batch sizes."""

    def __init__(self):
        self.batches: list[int] = []

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs, np.float32)
        self.batches.append(1 if obs.ndim == 1 else obs.shape[0])
        rows = np.atleast_2d(obs)
        out = np.stack([rows[:, 1] + rows[:, 0], np.zeros(len(rows)), np.ones(len(rows))], axis=1)
        return out[0] if obs.ndim == 1 else out


def _one_at_a_time(env, policy, discrete: bool) -> float:
    timestep, total = env.reset(), 0.0
    while not timestep.last():
        out = policy(timestep.observation)
        timestep = env.step(np.int32(np.argmax(out)) if discrete else out.astype(np.float32))
        total += timestep.reward
    return total


def test_batched_episodes_equal_sequential_ones_with_one_forward_per_step():
    lengths, seeds = [3, 7, 5], [-4.0, 2.0, 0.5]
    for discrete in (True, False):
        policy = _Policy()
        algorithm = algorithms.get("dqn" if discrete else "d4pg")  # argmax, or the action as it is
        batched = greedy_episodes(
            [_CountdownEnv(n, s) for n, s in zip(lengths, seeds, strict=True)], policy, algorithm
        )
        # Every forward carries all three rows, until the longest episode ends: 7 forwards, not 3 + 7 + 5.
        assert policy.batches == [3] * max(lengths)
        reference = [
            _one_at_a_time(_CountdownEnv(n, s), _Policy(), discrete)
            for n, s in zip(lengths, seeds, strict=True)
        ]
        np.testing.assert_allclose(batched, reference)
        assert len(set(batched)) == 3  # the rows were not mixed up between environments


def test_observe_sees_each_step_of_the_rows_still_playing():
    seen: list[tuple[list[int], np.ndarray]] = []
    greedy_episodes(
        [_CountdownEnv(n, s) for n, s in ((2, 1.0), (4, 3.0))],
        _Policy(),
        algorithms.get("dqn"),
        observe=lambda obs, out, live: seen.append((list(live), obs[live, 0].copy())),
    )
    # Both rows act at t = 0 and 1; then only the 4-step episode, at t = 2 and 3.
    assert [live for live, _ in seen] == [[0, 1], [0, 1], [1], [1]]
    assert [list(t) for _, t in seen] == [[0, 0], [1, 1], [2], [3]]
