"""Holm's correction (actorq.report.multitest) against statsmodels' on random and tied families."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from actorq.report.multitest import holm


@pytest.mark.parametrize("m", [1, 2, 5, 18, 36])
def test_holm_equals_statsmodels(m: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # multipletests runs a full gc.collect() on every call: 0.1-0.6 s in a test process holding TensorFlow's and
    # torch's objects, ~30 s per case here. Its p-values do not depend on it.
    monkeypatch.setattr(gc, "collect", lambda *args, **kwargs: 0)
    rng = np.random.default_rng(m)
    for _ in range(50):
        p = rng.uniform(0, 1, m) ** 3  # many small p-values: the step-down's running maximum matters
        if m > 2:
            p[1] = p[0]  # a tie
        np.testing.assert_allclose(holm(list(p)), multipletests(p, method="holm")[1], rtol=0, atol=1e-12)


def test_holm_step_down_by_hand() -> None:
    # sorted 0.01, 0.03, 0.04: 0.01 * 3 = 0.03; 0.03 * 2 = 0.06; 0.04 * 1 = 0.04 -> raised to 0.06 (a later
    # step never falls below an earlier one)
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([]) == []


@pytest.mark.parametrize("bad", [[float("nan")], [1.5], [-0.1]])
def test_holm_rejects_what_is_not_a_p_value(bad: list[float]) -> None:
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        holm(bad)
