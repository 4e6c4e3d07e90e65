"""``actorq bench policy`` on a small network: every kernel accounted for, warm and cold rows, the table."""

from __future__ import annotations

import pytest

from actorq.bench import policy as bench_policy
from actorq.bench.policy import BATCHES, PolicyShape, _bench_shape, format_table
from actorq.bench.policy_layers import LAYER_BATCHES


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


@pytest.fixture(scope="module")
def conv_result():
    shape = PolicyShape("conv44", "dqn", 44 * 44 * 4, 3, (32,), image=(44, 44, 4))
    return {"hardware": {}, "policies": [_bench_shape(shape, quick=True)]}


def test_a_conv_policy_is_timed_per_layer_and_its_choices_given_at_batch_1_and_8(conv_result):
    shape = conv_result["policies"][0]
    verified = {r["kernel"] for r in shape["records"] if r["status"] == "verified"}
    assert {"fp32/torch", "int8/fbgemm"} <= verified
    assert set(shape["chosen_by_batch"]) == {1, 8}
    for batch, choice in shape["chosen_by_batch"].items():
        assert choice["int8"] and choice["int8"].startswith("int8/") and choice["fp16"].startswith("fp16/"), (
            batch
        )
    # Every kernel has a row per layer and batch (ONNX Runtime ones from its per-node profile).
    layers = shape["layers"]
    assert {r["kernel"] for r in layers} == verified
    names = ["conv.0", "conv.1", "conv.2", "torso.0", "head"]
    for kernel in verified:
        for batch in LAYER_BATCHES:
            rows = [r for r in layers if r["kernel"] == kernel and r["batch"] == batch]
            assert [r["layer"] for r in rows] == names
            assert [r["kind"] for r in rows] == ["conv"] * 3 + ["dense"] * 2
            assert all(r["us"] > 0 and r["macs"] > 0 and r["weight_bytes"] > 0 for r in rows)
            assert abs(sum(r["share"] for r in rows) - 1) < 0.01
    conv0 = next(
        r for r in layers if r["kernel"] == "int8/fbgemm" and r["layer"] == "conv.0" and r["batch"] == 8
    )
    assert conv0["macs"] == 8 * 10 * 10 * 32 * 8 * 8 * 4 and conv0["weight_bytes"] == 32 * 4 * 8 * 8
    text = format_table(conv_result)
    assert "per layer (conv44" in text and "int8/fbgemm at batch 8: saves" in text
    assert "chosen at batch 8 (conv44)" in text
