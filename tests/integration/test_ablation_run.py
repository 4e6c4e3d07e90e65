"""The actor benchmarks end to end: a Reverb server, worker processes running real ActorRoles, JSON out."""

from __future__ import annotations

import json

import pytest

from actorq.config import save_config
from tests.conftest import tiny_config

pytestmark = pytest.mark.integration


def test_ablation_cli_runs_real_actors_and_writes_json(tmp_path):
    from actorq.cli import main

    cfg = tmp_path / "tiny.yaml"
    save_config(tiny_config("d4pg"), cfg)
    out = tmp_path / "ablation.json"
    code = main(
        ["ablation", str(cfg), "--periods", "10", "--sweep-periods", "", "--seconds", "1",
         "--repeats", "1", "--json", str(out)]
    )  # fmt: skip
    assert code == 0
    doc = json.loads(out.read_text())
    assert doc["kind"] == "ablation" and doc["meta"]["fresh"] is True
    rows = {r["variant"]: r for r in doc["summary"]}
    assert set(rows) == {"fp32/c32", "fp32/c8", "int8/c32", "int8/c8"}
    for row in rows.values():
        assert (
            row["steps_per_s"] > 0 and row["ms_per_step"]["inference"] > 0 and row["ms_per_step"]["adder"] > 0
        )
        assert row["broadcasts_applied"] >= 1  # pulls every 10 steps, each a new broadcast
    # Each variant's speed-up is against fp32/c32 at the same K, from the steps/s the JSON itself reports.
    base = rows["fp32/c32"]["steps_per_s"]
    for row in rows.values():
        assert row["baseline"] == "fp32/c32" and row["speedup"] == pytest.approx(row["steps_per_s"] / base)
    # 8-bit wire (a tiny net: the JSON header and per-row scales keep it from the full 4x)
    assert rows["fp32/c32"]["message_bytes"] > 2 * rows["fp32/c8"]["message_bytes"]
    records = doc["records"]
    assert len(records) == 4 and all(r["steps"] > 0 and r["rejected"] == 0 for r in records)
    assert len(doc["notes"]) == 1 and "K=10" in doc["notes"][0]
