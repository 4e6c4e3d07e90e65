"""The quantized-vs-fp32 action agreement on the states the fp32 episodes visit (the evaluator's diagnostic)."""

from __future__ import annotations

import numpy as np
import pytest

from actorq import algorithms
from actorq.roles.agreement import ActionAgreement
from actorq.roles.policy import greedy_episodes
from tests.unit.roles.test_greedy_episodes import _CountdownEnv


def _flip_when(rows: np.ndarray, flip: np.ndarray) -> np.ndarray:
    """Q-values [1, 0] (action 0), or [0, 1] where ``flip`` holds."""
    out = np.zeros((len(rows), 2), np.float32)
    out[np.arange(len(rows)), flip.astype(int)] = 1.0
    return out


def test_discrete_agreement_counts_the_live_rows_where_the_greedy_actions_match():
    fp32 = lambda obs: _flip_when(obs, np.zeros(len(obs), bool))  # noqa: E731  always action 0
    # The quantized policy picks action 1 on the steps t = 2 and 4 (obs [t, seed]).
    quantized = lambda obs: _flip_when(obs, np.isin(obs[:, 0], (2.0, 4.0)))  # noqa: E731
    agreement = ActionAgreement(quantized, algorithms.get("dqn"))
    # Two episodes of 3 and 5 steps: states t = 0..2 and t = 0..4, 8 in all; t = 2 twice and t = 4 once differ.
    greedy_episodes(
        [_CountdownEnv(3, 0.0), _CountdownEnv(5, 1.0)], fp32, algorithms.get("dqn"), agreement.observe
    )
    assert agreement.row() == {"quantized_agreement": pytest.approx(5 / 8), "agreement_states": 8}
    agreement.reset()
    assert agreement.row() == {"quantized_agreement": None, "agreement_states": 0}


def test_continuous_action_error_is_the_largest_difference_as_a_fraction_of_each_range():
    d4pg = algorithms.get("d4pg")
    fp32 = lambda obs: np.zeros((len(obs), 2), np.float32)  # noqa: E731
    quantized = lambda obs: np.tile(np.array([[0.5, 0.1]], np.float32), (len(obs), 1))  # noqa: E731
    # Ranges 4 (dim 0) and 0.2 (dim 1): differences 0.5/4 = 0.125 and 0.1/0.2 = 0.5: the largest counts.
    agreement = ActionAgreement(quantized, d4pg, action_low=(-2.0, -0.1), action_high=(2.0, 0.1))
    agreement.observe(np.zeros((3, 2), np.float32), fp32(np.zeros((3, 2))), live=[0, 2])
    assert agreement.row() == {"quantized_action_error": pytest.approx(0.5), "agreement_states": 2}


def test_continuous_actions_without_bounds_are_refused():
    with pytest.raises(ValueError, match="bounds"):
        ActionAgreement(lambda obs: obs, algorithms.get("d4pg"))
