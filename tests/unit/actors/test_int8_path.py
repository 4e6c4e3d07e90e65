"""Every CPU that runs these tests has a working int8 actor path.

A kernel failing verification on a CPU is allowed (``tests/kernel_outcomes.py``), but not all of them: fbgemm's
dynamic int8 (7-bit activations, exact int32 sums) is exact on AVX2 and on VNNI CPUs alike (/work/shared/STACK.md),
so a machine where no int8 kernel, or fbgemm's, verifies has a broken build or install, not a CPU to skip.
"""

from __future__ import annotations

import pytest

from actorq.actors.kernels import PolicySpec, select_kernel


@pytest.mark.parametrize(
    ("algorithm", "obs", "out", "layers"),
    [("d4pg", 11, 3, (64, 64)), ("dqn", 11, 3, (64, 64)), ("d4pg", 24, 4, (256, 256, 256))],
)
def test_some_int8_kernel_verifies_here_and_fbgemm_is_one(algorithm, obs, out, layers):
    low, high = (-2.0, 2.0) if algorithm == "d4pg" else (None, None)
    spec = PolicySpec.build(algorithm, obs, out, layers, low, high)
    kernel, selection = select_kernel(spec, "int8", use_cache=False, budget_s=0.02)
    assert kernel.name == selection.kernel and selection.precision == "int8", selection.describe()
    assert "int8/fbgemm" in selection.order, selection.describe()


def test_fbgemm_int8_verifies_on_the_make_run_policy():
    """DQN 3x2048 on CartPole (``make run``'s int8 actors): the size where int16 pair sums saturate first."""
    spec = PolicySpec.build("dqn", 4, 2, (2048, 2048, 2048))
    kernel, selection = select_kernel(spec, "int8", requested="fbgemm", use_cache=False)
    assert kernel.name == "int8/fbgemm" and selection.order == ["int8/fbgemm"], selection.describe()
