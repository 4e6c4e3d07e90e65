"""``actorq bench actor-probe``'s records part: staleness, exploration and kernels per precision and envs per actor,
from the Zen 3's committed Acrobot records."""

from __future__ import annotations

from pathlib import Path

import pytest

from actorq.experiments.actor_probe import epsilons, from_records, table
from actorq.report.records import load_records

ROOT = Path(__file__).resolve().parents[3]
ZEN3 = ROOT / "reports/experiments/table2-actorbound/amd-epyc-2c-avx2-701f40/dqn_acrobot/records"


def test_one_env_is_one_stream_at_epsilon_max_and_eight_spread_to_epsilon_min():
    config = {
        "actor": {"envs_per_actor": 1, "num_actors": 1},
        "dqn": {"epsilon_min": 0.01, "epsilon_max": 0.05},
    }
    assert epsilons(config) == [0.05]
    config["actor"]["envs_per_actor"] = 8
    eight = epsilons(config)
    assert len(eight) == 8 and eight[0] == pytest.approx(0.05) and eight[-1] == pytest.approx(0.01)
    assert all(a > b for a, b in zip(eight, eight[1:], strict=False))


def test_the_records_part_gives_each_cell_its_staleness_exploration_and_kernel():
    runs, _ = load_records([ZEN3])
    rows = {(r["precision"], r["envs_per_actor"]): r for r in from_records(runs, actions=3)}
    assert set(rows) == {(p, e) for p in ("fp32", "fp16", "int8") for e in (1, 8)}
    for row in rows.values():
        low, high = row["staleness_range"]
        assert row["runs"] == 10 and low <= row["staleness_learner_steps"] <= high
        assert row["staleness_versions"] == pytest.approx(row["staleness_learner_steps"] / 50)
        assert row["staleness_env_steps"] == pytest.approx(row["staleness_learner_steps"] * 64 / 0.25)
    assert rows[("int8", 8)]["epsilon_mean"] < rows[("int8", 1)]["epsilon_mean"] == pytest.approx(0.05)
    assert rows[("int8", 8)]["kernels"] == ["int8/ort-s8r"]
    assert "| int8 | 8 | 10 |" in table(list(rows.values()))
