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


def test_the_part_of_the_forward_that_reads_the_weights_scales_with_the_bandwidth():
    cell = _cell()
    # 20 MB at 20 GB/s: 1.0 ms of the 1.5-ms forward reads weights; at half the bandwidth 2.0 ms, the step 3.0 ms.
    assert supply_at(cell, 20.0, 10.0, 20e6) == pytest.approx(1000 / 3.0)
    assert supply_at(cell, 20.0, 20.0, 20e6) == pytest.approx(500.0)
    # More bytes than the forward's time can hold: all of the forward's 1.5 ms counts as memory time.
    assert supply_at(cell, 20.0, 10.0, 80e6) == pytest.approx(1000 / 3.5)
    # At 8 envs per actor one forward serves 8 env steps: an eighth of the memory time per env step.
    eight = _cell(envs_per_actor=8, supply=2000.0, inference_ms=0.3, step_ms=0.5)
    assert supply_at(eight, 20.0, 10.0, 20e6) == pytest.approx(2000.0 * 0.5 / 0.625)
    assert supply_at(cell, 20.0, 10.0, None) == 500.0  # weights in the L3: the plan's S_p
    assert supply_at(cell, None, 10.0, 20e6) is None  # the plan recorded no bandwidth
    assert supply_at(_cell(inference_ms=None), 20.0, 10.0, 20e6) is None
