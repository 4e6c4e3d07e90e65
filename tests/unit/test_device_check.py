"""``make device-check``'s CPU part (what runs on a machine without a GPU), small and fast, and the learner twins'
updates on the CPU."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]


def _module():
    # Loaded as the device machine runs it: a file, importing torch and the standard library only. Its actor
    # processes (spawned) import it by name, from the path the parent passes them.
    if str(ROOT / "actorq" / "bench") not in sys.path:
        sys.path.insert(0, str(ROOT / "actorq" / "bench"))
    spec = importlib.util.spec_from_file_location(
        "device_check", ROOT / "actorq" / "bench" / "device_check.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["device_check"] = module
    spec.loader.exec_module(module)
    return module


def test_the_cpu_part_times_every_precision_and_checks_it_against_fp32(tmp_path):
    dc = _module()
    out = tmp_path / "check.json"
    assert (
        dc.main(
            ["--out", str(out), "--procs", "1", "--seconds", "0.05", "--policies", "mlp", "--batches", "1"]
        )
        == 0
    )
    import json

    result = json.loads(out.read_text())
    assert result["machine"]["cores"] >= 1 and result["machine"]["torch"] == torch.__version__
    assert [(r["precision"], r["procs"], r["batch"]) for r in result["actors"]] == [
        ("fp32", 1, 1), ("int8", 1, 1), ("fp16", 1, 1),
    ]  # fmt: skip
    assert all(r["forwards_per_s_total"] > 0 for r in result["actors"])
    checks = {r["precision"]: r for r in result["agreement"]}
    assert checks["fp16"]["action_agreement"] == 1.0 and checks["fp16"]["max_relative_error"] < 0.01
    assert checks["int8"]["action_agreement"] >= 0.9 and checks["int8"]["max_relative_error"] < 0.1
    if not torch.cuda.is_available():
        assert result["learner"] == [] and "no GPU" in result["learner_skipped"]


def test_the_learner_twins_update_their_networks():
    dc = _module()
    for make, batch in ((dc.dqn_update, 8), (dc.d4pg_update, 8)):
        net, step = make(torch.device("cpu"), batch)
        before = [p.detach().clone() for p in net.parameters()]
        step()
        assert any(not torch.equal(a, b) for a, b in zip(before, net.parameters(), strict=True))


def test_process_counts_end_at_the_limit():
    dc = _module()
    assert dc.proc_counts(15) == [1, 2, 4, 8, 15] and dc.proc_counts(1) == [1] and dc.proc_counts(2) == [1, 2]
