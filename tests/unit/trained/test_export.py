"""``actorq export``: each format computes the run's policy within its precision's bound of the learner's fp32
policy, carries its spec and quantization record, and the ONNX example in docs/usage.md runs it with ONNX Runtime
alone and reproduces the int8 policy's actions."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest

from actorq import algorithms
from actorq.trained import FORMATS
from tests.unit.trained.fake_runs import LEARNER_STEP, make_run

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    from actorq.trained.weights import load_weights

    base = tmp_path_factory.mktemp("runs")
    return {a: load_weights(make_run(base / a, a)[0]) for a in ("dqn", "d4pg", "dqn_conv")}


def load(fmt: str, path: Path):
    from actorq.trained.export import _LOADERS

    return _LOADERS[fmt](path)


def read_record(fmt: str, path: Path) -> dict:
    if fmt == "onnx":
        import onnx

        return json.loads({p.key: p.value for p in onnx.load(str(path)).metadata_props}["actorq"])
    import torch

    if fmt == "torchscript":
        files = {"actorq.json": ""}
        torch.jit.load(str(path), _extra_files=files)
        return json.loads(files["actorq.json"])
    return json.loads(torch.load(str(path), weights_only=True)["actorq"])


CASES = [
    ("int8", "onnx"),
    ("int8", "torchscript"),
    ("int8", "state-dict"),
    ("fp16", "torchscript"),
    ("fp32", "onnx"),
]


@pytest.mark.parametrize(
    "algorithm, precision, fmt",
    [(a, p, f) for a in ("dqn", "d4pg") for p, f in CASES] + [("dqn_conv", "int8", f) for f in FORMATS],
)
def test_the_file_computes_the_learners_policy_within_its_bound(weights, tmp_path, algorithm, precision, fmt):
    from actorq.actors.kernels import probe_inputs
    from actorq.trained.export import export, one_at_a_time
    from actorq.trained.weights import fp32_reference

    w = weights[algorithm]
    out = tmp_path / f"policy.{fmt}"
    meta = export(w, precision, fmt, out)
    ref_policy = fp32_reference(w)
    x = probe_inputs(ref_policy.spec, n=32, seed=9)  # other observations than the export checked itself on
    got = one_at_a_time(load(fmt, out), x)
    algo = algorithms.get(w.config.algorithm)
    check = algo.verify(got, ref_policy(x), precision, ref_policy.spec.action_range)
    assert check.ok, check.detail
    record = read_record(fmt, out)
    assert record == json.loads(json.dumps(meta))
    assert record["precision"] == precision and record["learner_step"] == LEARNER_STEP
    assert record["observation"]["shape"] == list(ref_policy.obs_shape)
    assert record["input"]["shape"] == [None, *ref_policy.spec.input_shape]
    assert record["action"]["discrete"] == algo.discrete
    assert record["fidelity"]["within_bound"]
    if precision == "int8":
        assert all(q["bits"] == 8 for q in record["quantization"]["weights"].values())
        assert record["quantization"]["weights"], "int8 weights carry their quantization"
    if not algo.discrete:
        assert record["action"]["low"] == list(ref_policy.spec.action_low)


def test_state_dict_holds_int8_codes_and_row_scales(weights, tmp_path):
    import torch

    from actorq.trained.export import export

    out = tmp_path / "p.pt"
    export(weights["dqn"], "int8", "state-dict", out)
    state = torch.load(str(out), weights_only=True)["state_dict"]
    assert state["torso.1.weight"].dtype == torch.int8
    assert state["torso.1.weight.scale"].shape == (state["torso.1.weight"].shape[0],)


def onnx_example() -> str:
    text = (ROOT / "docs" / "usage.md").read_text()
    match = re.search(r"<!-- onnx-example -->\n```python\n(.*?)```", text, re.S)
    assert match, "docs/usage.md lost its ONNX example"
    return match.group(1)


@pytest.mark.parametrize("algorithm", ["dqn", "d4pg", "dqn_conv"])
def test_the_documented_onnx_example_reproduces_the_int8_actions(weights, tmp_path, algorithm):
    from actorq.actors.kernels import probe_inputs
    from actorq.trained.export import export, one_at_a_time
    from actorq.trained.weights import fp32_reference, policy_at

    w = weights[algorithm]
    path = tmp_path / "p.onnx"
    export(w, "int8", "onnx", path)
    code = onnx_example()
    assert len(code.strip().splitlines()) <= 12
    namespace: dict = {}
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        exec(compile(code.replace("/tmp/p.onnx", str(path)), "docs/usage.md", "exec"), namespace)  # noqa: S102
    assert printed.getvalue().startswith("int8 ")
    # The example's own session and rule, on many observations:
    int8 = policy_at(w, "int8", batch=1)
    x = probe_inputs(int8.spec, n=32, seed=11)
    session = namespace["session"]
    out = one_at_a_time(lambda obs: session.run(["out"], {"obs": obs})[0], x)
    algo = algorithms.get(w.config.algorithm)
    int8_out = one_at_a_time(int8, x)
    for reference in (int8_out, fp32_reference(w)(x)):
        check = algo.verify(out, reference, "int8", int8.spec.action_range)
        assert check.ok, check.detail
    if algo.discrete:
        agree = np.mean(out.argmax(1) == int8_out.argmax(1))
        assert agree >= 0.95
