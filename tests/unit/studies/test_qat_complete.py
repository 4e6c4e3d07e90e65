"""A rerun of ``qat-study`` with more ``--bits`` completes the PTQ of existing fp32 records (issue 37): from the
policy the fp32 cell kept, with the entries the fp32 cell itself would have written, and it says so when the
policy is gone."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import torch

from actorq.studies import qat_study

TINY = qat_study.Pair("ppo", "CartPole-v1", 256)


def _no_qat(
    pair: qat_study.Pair, bits: int, seed: int, episodes: int, schedule: str, out: Path
) -> dict[str, Any]:
    return {"kind": "qat", "pair": pair.key, "seed": seed, "bits": bits}  # only the fp32 cells are under test


def _no_control(pair: qat_study.Pair, seed: int, episodes: int, out: Path) -> dict[str, Any]:
    return {"kind": qat_study.CONTROL_KIND, "pair": pair.key, "seed": seed}


@pytest.fixture
def full_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, Any]]:
    """An fp32 cell run with ``--bits 8,3``, then cut back to 8 bits as if it had been run with ``--bits 8``."""
    torch.set_num_threads(1)
    monkeypatch.setattr(qat_study, "PAIRS", {TINY.key: TINY})
    monkeypatch.setattr(qat_study, "run_qat_cell", _no_qat)
    monkeypatch.setattr(qat_study, "run_control_cell", _no_control)
    full = qat_study.run_fp32_cell(TINY, 0, [8, 3], episodes=3, out=tmp_path)
    cut = {**full, "ptq_w": {"8": full["ptq_w"]["8"]}, "ptq_wa": {"8": full["ptq_wa"]["8"]}}
    path = qat_study.record_path(tmp_path, TINY, None, 0)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(cut))
    return path, full


def test_rerun_with_more_bits_completes_ptq_as_the_fp32_cell_computes_it(full_record: tuple) -> None:
    path, full = full_record
    out = path.parents[2]
    written = qat_study.run_grid(out, bits=[8, 3], seeds=1, episodes=3)
    assert path in written
    rec = json.loads(path.read_text())
    assert rec["ptq_completed"] == [3]
    for key in ("ptq_w", "ptq_wa"):
        assert set(rec[key]) == {"8", "3"}
        assert rec[key]["3"] == full[key]["3"]  # the same policy, calibration and episodes: the same returns
        assert rec[key]["8"] == full[key]["8"]  # what was there is kept
    assert rec["fp32"] == full["fp32"]
    before = path.stat().st_mtime_ns
    assert path not in qat_study.run_grid(out, bits=[8, 3], seeds=1, episodes=3)  # complete: not rewritten
    assert path.stat().st_mtime_ns == before


def test_missing_policy_is_reported_and_nothing_retrained(
    full_record: tuple, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = full_record
    out = path.parents[2]
    qat_study.policy_path(out, TINY, 0).unlink()
    monkeypatch.setattr(qat_study.zoo, "make_model", lambda *a, **k: pytest.fail("retrained"))
    with caplog.at_level(logging.WARNING, logger=qat_study.__name__):
        assert path not in qat_study.run_grid(out, bits=[8, 3], seeds=1, episodes=3)
    assert (
        "lacks PTQ at [3] bits" in caplog.text
        and "policy" in caplog.text
        and "delete the record" in caplog.text
    )
    assert set(json.loads(path.read_text())["ptq_w"]) == {"8"}
