"""``actorq bench learner``'s pure parts (variants, summary), the learner settings it compares, and a tiny run."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from actorq.bench.learner_summary import format_table, summarize
from actorq.config import ConfigError, replace
from actorq.measure.learner_variants import PLAIN, bench_config, parse_variant
from actorq.roles.process_setup import ONEDNN_ENV, apply_learner_environment, learner_environment
from tests.conftest import tiny_config

ROOT = Path(__file__).resolve().parents[3]


def test_variants_start_from_plain_or_the_config():
    plain = dict(parse_variant("plain").changes)
    assert plain == PLAIN and plain["learner.onednn"] is False
    v = dict(parse_variant("plain+onednn+xla+intra=2+inter=1+prefetch=8").changes)
    assert v["learner.onednn"] is True and v["learner.jit_compile"] is True
    assert (v["learner.intra_op_threads"], v["learner.inter_op_threads"], v["learner.prefetch_size"]) == (
        2,
        1,
        8,
    )
    assert dict(parse_variant("onednn").changes)["learner.jit_compile"] is False  # implicit plain
    assert parse_variant("config").changes == ()  # the config's own settings
    assert dict(parse_variant("config+onednn=0").changes) == {"learner.onednn": False}
    for bad in ("plain+fast", "intra=two", "+"):
        with pytest.raises(ConfigError):
            parse_variant(bad)


def test_bench_config_never_waits_on_actors_and_validates():
    config = tiny_config("d4pg", **{"replay.samples_per_insert": 8.0, "learner.checkpoint_period_s": 60.0})
    cfg = bench_config(config, parse_variant("plain+intra=1"))
    assert cfg.replay.samples_per_insert == 0 and cfg.learner.checkpoint_period_s == 0
    assert cfg.learner.intra_op_threads == 1 and cfg.learner.onednn is False
    with pytest.raises(ConfigError, match="intra_op_threads"):
        bench_config(config, parse_variant("plain+intra=-1"))


def test_learner_settings_are_validated():
    config = tiny_config("d4pg")
    for key, bad in (
        ("learner.intra_op_threads", -1),
        ("learner.inter_op_threads", -2),
        ("learner.prefetch_size", 0),
        ("learner.sample_parallelism", 0),
    ):
        with pytest.raises(ConfigError, match=key):
            replace(config, **{key: bad})


def test_learner_environment_sets_onednn_before_tensorflow(monkeypatch, caplog):
    on, off = tiny_config("d4pg"), tiny_config("d4pg", **{"learner.onednn": False})
    assert learner_environment(on) == {ONEDNN_ENV: "1"} and learner_environment(off) == {ONEDNN_ENV: "0"}
    monkeypatch.setitem(os.environ, ONEDNN_ENV, "0")
    monkeypatch.setitem(sys.modules, "tensorflow", object())  # as if TensorFlow had loaded already
    with caplog.at_level(logging.WARNING):
        apply_learner_environment(on)
    assert os.environ[ONEDNN_ENV] == "1" and "do not apply in this process" in caplog.text


def test_local_launcher_gives_only_the_learner_its_environment(tmp_path, monkeypatch):
    import actorq.launchers.local as local
    from actorq.launchers.supervisor import run_context
    from actorq.launchers.topology import topology

    config = tiny_config("dqn", **{"learner.onednn": True})
    placement = local.LocalPlacement(run_context(config, tmp_path, tmp_path / "config.yaml", quiet=True))
    seen = {}

    class _Popen:
        def __init__(self, argv, env, **kwargs):
            seen[argv[3]] = env.get(ONEDNN_ENV)
            self.pid = 1

    monkeypatch.setattr(local.subprocess, "Popen", _Popen)
    monkeypatch.delitem(os.environ, ONEDNN_ENV, raising=False)
    for spec in topology(config):
        placement.start(spec, address="localhost:1")
    assert seen["learner"] == "1" and seen["actor"] is None and seen["evaluator"] is None


def _record(variant: str, repeat: int, rate: float) -> dict:
    parts = dict.fromkeys(
        (
            "dataset_ms",
            "update_ms",
            "target_copy_ms",
            "target_per_step_ms",
            "publish_ms",
            "publish_per_step_ms",
        ),
        1.0,
    )
    return {
        "variant": variant, "repeat": repeat, "steps_per_s": rate, "batch_size": 64, "settings": {},
        "breakdown_ms": parts, "load_before": 2.0,
    }  # fmt: skip


def test_summary_medians_and_paired_ratios():
    records = [_record("plain", r, rate) for r, rate in enumerate((6.0, 8.0, 7.0))]
    records += [_record("config", r, rate) for r, rate in enumerate((12.0, 20.0, 14.0))]
    rows = {r["variant"]: r for r in summarize(records, baseline="plain")}
    assert rows["plain"]["steps_per_s"] == 7.0 and rows["config"]["steps_per_s"] == 14.0
    assert rows["config"]["speedup"] == pytest.approx(2.0)
    assert rows["config"]["speedup_min"] == pytest.approx(2.0) and rows["config"]["speedup_max"] == 2.5
    assert rows["config"]["samples_per_s"] == 14.0 * 64
    assert "config" in format_table(list(rows.values()))


@pytest.mark.subprocess
@pytest.mark.slow
def test_bench_learner_cli_runs_real_learners(tmp_path):
    out = tmp_path / "learner.json"
    result = subprocess.run(
        [sys.executable, "-m", "actorq.cli", "bench", "learner", "configs/d4pg/dmc_cartpole_balance.yaml"]
        + ["network.policy_layers=[32,32]", "d4pg.critic_layers=[32,32]", "learner.batch_size=16"]
        + [
            "--variants",
            "plain,plain+onednn+intra=1",
            "--seconds",
            "1",
            "--repeats",
            "1",
            "--prefill",
            "1000",
        ]
        + ["--breakdown-steps", "2", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    doc = json.loads(out.read_text())
    rows = {r["variant"]: r for r in doc["summary"]}
    assert set(rows) == {"plain", "plain+onednn+intra=1"} and doc["meta"]["machine"]["cpu"] is not None
    assert all(r["steps_per_s"] > 0 and r["breakdown_ms"]["update_ms"] > 0 for r in rows.values())
    by_variant = {r["variant"]: r for r in doc["records"]}
    # Each worker ran with its own settings: oneDNN in its environment, TensorFlow's thread pool as asked.
    assert by_variant["plain"]["onednn_env"] == "0"
    assert by_variant["plain+onednn+intra=1"]["onednn_env"] == "1"
    assert by_variant["plain+onednn+intra=1"]["tf_threads"][0] == 1


def test_an_unknown_token_lists_switches_without_a_number_and_counts_with_one():
    with pytest.raises(ConfigError, match="unknown token 'fast'") as err:
        parse_variant("plain+fast")
    listed = str(err.value).split("+-joined ")[1].split(", ")
    assert {"onednn", "xla", "xopt", "einsum"} <= set(listed)  # switches: no "=N" (einsum had one)
    assert {"intra=N", "inter=N", "prefetch=N", "parallel=N"} <= set(listed)
