"""The regime model checked run by run: the plan's S_p at a run's own memory bandwidth."""

from __future__ import annotations

import pytest

from actorq.report.model_check import supply_at
from actorq.report.plan_input import PlanCell


def _cell(**kw) -> PlanCell:
    base = dict(split="learner [0] + actors [1]", learner_cpus=(0,), actor_cpus=(1,), actors=1,
                learner_elsewhere=False, precision="fp32", envs_per_actor=1, supply=500.0, capacity=400.0,
                inference_ms=1.5, step_ms=2.0)  # fmt: skip
    return PlanCell(**{**base, **kw})


def test_streamed_weights_scale_the_forwards_share_of_the_step_with_the_bandwidth():
    cell = _cell()
    # Half the bandwidth: the forward takes 3.0 ms instead of 1.5, the step 3.5 instead of 2.0.
    assert supply_at(cell, 20.0, 10.0, stream=True) == pytest.approx(1000 / 3.5)
    assert supply_at(cell, 20.0, 20.0, stream=True) == pytest.approx(500.0)
    assert supply_at(cell, 20.0, 10.0, stream=False) == 500.0  # weights in the L3: the plan's S_p
    assert supply_at(cell, None, 10.0, stream=True) is None  # the plan recorded no bandwidth
    assert supply_at(_cell(inference_ms=None), 20.0, 10.0, stream=True) is None
