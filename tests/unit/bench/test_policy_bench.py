"""``actorq bench policy`` on a small network: every kernel accounted for, warm and cold rows, the table."""

from __future__ import annotations

import pytest

from actorq.bench import policy as bench_policy
from actorq.bench.policy import BATCHES, PolicyShape, _bench_shape, format_table


@pytest.fixture(scope="module")
def result():
    shape = PolicyShape("2x48", "dqn", 4, 2, (48, 48))
    return {"hardware": {}, "policies": [_bench_shape(shape, quick=True)]}


def test_every_kernel_is_verified_rejected_or_unavailable_with_warm_and_cold_rows(result):
    records = result["policies"][0]["records"]
    assert {r["kernel"] for r in records} == set(bench_policy._all_names())
    verified = [r for r in records if r["status"] == "verified"]
    assert any(r["precision"] == "int8" for r in verified) and any(r["precision"] == "fp32" for r in verified)
    for name in {r["kernel"] for r in verified}:
        rows = [
            r
            for r in verified
            if r["kernel"] == name
            and r["comm_bits"] == max(x["comm_bits"] for x in verified if x["kernel"] == name)
        ]
        assert sorted((r["batch"], r["cold"]) for r in rows) == sorted(
            [(b, False) for b in BATCHES] + [(1, True)]
        ), name
        for r in rows:
            assert r["forward_us"] > 0 and r["forward_p10_us"] <= r["forward_us"] <= r["forward_p90_us"]
            assert (r["floor_us"] is not None) == (r["batch"] == 1), r
    for r in records:
        if r["status"] == "rejected":
            assert r["reason"], r


def test_the_table_marks_cold_rows_and_the_choices(result):
    text = format_table(result)
    assert "1 cold" in text and "chosen at batch 1 (2x48)" in text
