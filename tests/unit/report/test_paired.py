"""Reward at equal steps, seed by seed: the cut at the smaller run's steps and the per-seed differences."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from actorq.report.measure import RunMetrics
from actorq.report.paired import paired_reward
from actorq.report.runs import RunData


def metrics(seed: int, env_steps: list[float], returns: list[float], learner_steps=None) -> RunMetrics:
    n = len(returns)
    run = RunData(
        path=Path(f"r{seed}"), summary={}, config={}, task="t", label="x", seed=seed, start=0.0,
        eval_t=np.arange(n, dtype=float), eval_steps=np.asarray(env_steps, float),
        eval_learner_steps=np.asarray(learner_steps if learner_steps is not None else env_steps, float),
        eval_return=np.asarray(returns, float),
    )  # fmt: skip
    return RunMetrics(run)


def test_runs_are_compared_up_to_the_steps_both_made():
    # fp32 made 300 env steps, int8 (twice as fast) 600: int8's evaluations past 300 are not counted.
    fp32 = [metrics(s, [100, 200, 300], [10.0, 20.0, 30.0]) for s in range(3)]
    int8 = [metrics(s, [100, 200, 300, 400, 500, 600], [12.0, 22.0, 32.0, 90, 90, 90]) for s in range(3)]
    p = paired_reward(fp32, int8, "actor_steps", k=2)
    assert p.seeds == [0, 1, 2] and p.upto == [300.0] * 3
    assert p.base_mean == [20.0] * 3 and p.mean == [22.0] * 3
    assert p.base_final == [25.0] * 3 and p.final == [27.0] * 3  # the last 2 at or before 300
    d = p.difference("mean")
    assert d.value == pytest.approx(2.0) and d.low == pytest.approx(2.0) and d.high == pytest.approx(2.0)
    assert p.below("mean") == 0


def test_only_seeds_both_ran_pair_and_the_axis_is_checked():
    fp32 = [metrics(0, [100, 200], [1.0, 2.0]), metrics(1, [100, 200], [1.0, 2.0])]
    int8 = [metrics(1, [100, 200], [0.0, 1.0]), metrics(5, [100, 200], [9.0, 9.0])]
    p = paired_reward(fp32, int8, "learner_steps", k=3)
    assert p.seeds == [1] and p.below("final") == 1
    assert p.difference("mean").low is None  # one seed: no interval
    assert paired_reward(fp32, [metrics(7, [1], [1.0])]) is None
    # Whole runs: nothing cut, so int8's evaluations past fp32's steps count.
    fp32 = [metrics(s, [100, 200, 300], [10.0, 20.0, 30.0]) for s in range(3)]
    int8 = [metrics(s, [100, 200, 300, 400], [12.0, 22.0, 32.0, 90.0]) for s in range(3)]
    whole = paired_reward(fp32, int8, "run", k=2)
    assert whole.mean == [39.0] * 3 and whole.final == [61.0] * 3 and whole.base_final == [25.0] * 3
    with pytest.raises(ValueError, match="axis"):
        paired_reward(fp32, int8, "minutes")
