"""The Acme baseline's own pieces (evaluator, logger, stop rules) with stand-ins for Acme objects."""

from __future__ import annotations

import subprocess
import sys
import time
from types import SimpleNamespace

import psutil
import pytest

from actorq.experiments import acme_program
from actorq.experiments.acme_program import PeriodicEvaluator, RunDirLogger, _stop_reason, policy_bytes
from actorq.metrics import MetricsWriter, read_metrics
from tests.conftest import tiny_config
from tests.waiting import wait_until


class _Env:
    """Episodes of 5 steps, reward 1 per step."""

    def reset(self):
        self.t = 0
        return SimpleNamespace(last=lambda: False, observation=0.0, reward=None)

    def step(self, action):
        self.t += 1
        done = self.t >= 5
        return SimpleNamespace(last=lambda: done, observation=0.0, reward=1.0)


def test_periodic_evaluator_writes_evaluations_and_counts(tmp_path):
    updates = []
    actor = SimpleNamespace(select_action=lambda obs: 0.0, update=lambda wait=False: updates.append(wait))
    counter = SimpleNamespace(get_counts=lambda: {"actor_steps": 1200, "learner_steps": 30})
    config = tiny_config("d4pg", **{"evaluator.period_s": 3600.0, "evaluator.episodes": 2})
    ev = PeriodicEvaluator(_Env(), actor, counter, str(tmp_path), config)
    ev.tick()
    ev.tick()  # not due again for an hour: counts only
    evals = read_metrics(tmp_path / "evaluator" / "metrics.csv")
    counts = read_metrics(tmp_path / "counter" / "metrics.csv")
    assert len(evals) == 1 and len(counts) == 2 and updates == [True]
    assert evals[0]["eval_return"] == 5.0 and evals[0]["actor_steps"] == 1200 and evals[0]["step"] == 30
    assert counts[-1]["step"] == 1200 and counts[-1]["learner_steps"] == 30


def test_run_dir_logger_writes_rates_once_per_period(tmp_path, monkeypatch):
    clock = SimpleNamespace(now=1000.0)  # the logger's clock, moved by hand: no sleeping, exact rates
    monkeypatch.setattr(acme_program, "time", SimpleNamespace(time=lambda: clock.now))
    logger = RunDirLogger(str(tmp_path), "learner", "learner_steps", period_s=1.0)
    clock.now += 2.0
    logger.write({"learner_steps": 10})
    clock.now += 0.5
    logger.write({"learner_steps": 20})  # within the period: not written
    clock.now += 1.5
    logger.write({"learner_steps": 40})
    logger.close()
    rows = read_metrics(tmp_path / "learner" / "metrics.csv")
    assert [(r["step"], r["elapsed"], r["steps_per_s"]) for r in rows] == [(10, 2.0, 5.0), (40, 4.0, 15.0)]


def test_stop_reasons(tmp_path):
    config = tiny_config("d4pg", max_minutes=1.0, max_actor_steps=500, target_return=90.0)
    assert _stop_reason(config, tmp_path, time.time()) is None
    assert _stop_reason(config, tmp_path, time.time() - 61) == "max_minutes"
    w = MetricsWriter(tmp_path / "counter", tensorboard=False)
    w.write({"step": 600, "elapsed": 1.0, "learner_steps": 3})
    w.close()
    assert _stop_reason(config, tmp_path, time.time()) == "max_actor_steps"
    # The report's rule: the mean of 3 evaluations after the learner's first update; an untrained policy's lucky
    # evaluation (learner step 0) neither counts nor lifts a trained window.
    w = MetricsWriter(tmp_path / "evaluator", tensorboard=False)
    w.write({"step": 0, "elapsed": 1.0, "actor_steps": 0, "eval_return": 500.0})
    for i, value in enumerate((95.0, 95.0)):
        w.write({"step": 3 + i, "elapsed": 2.0 + i, "actor_steps": 600, "eval_return": value})
    assert _stop_reason(config, tmp_path, time.time()) == "max_actor_steps"
    w.write({"step": 5, "elapsed": 4.0, "actor_steps": 600, "eval_return": 80.0})  # mean 90.0: at the target
    w.close()
    assert _stop_reason(config, tmp_path, time.time()) == "target"


def test_policy_bytes_counts_the_fp32_policy():
    config = tiny_config("d4pg")  # cartpole: obs 5, act 1, layers 32x32, LayerNorm on the first
    expected = 4 * (5 * 32 + 32 + 2 * 32 + 32 * 32 + 32 + 32 * 1 + 1)
    assert policy_bytes(config) == expected


def test_comparison_table_reports_speedups_against_acme(tmp_path):
    from actorq.experiments.acme_baseline import comparison_table
    from actorq.experiments.orchestration import run_finished
    from tests.unit.report.synthetic import make_run, ramp_returns

    make_run(tmp_path, "fp32", 0, ramp_returns(30, 200), label="acme-fp32")
    make_run(tmp_path, "fp32", 0, ramp_returns(30, 150))
    make_run(tmp_path, "int8", 0, ramp_returns(30, 100))
    assert run_finished(tmp_path / "acme-fp32-s0") and not run_finished(tmp_path / "nope")
    text = comparison_table(tmp_path)
    lines = {ln.split()[0]: ln for ln in text.splitlines()[2:]}
    assert set(lines) == {"acme-fp32", "fp32", "int8"}
    vs_acme = {label: float(line.split()[-2].rstrip("x")) for label, line in lines.items()}
    vs_fp32 = {label: float(line.split()[-1].rstrip("x")) for label, line in lines.items()}
    # Curves ramp over 200 (Acme), 150 (ActorQ fp32) and 100 (int8) evaluations, 10 s apart.
    assert 1.2 < vs_acme["fp32"] < 1.45 and 1.7 < vs_acme["int8"] < 2.1
    assert 0.65 < vs_fp32["acme-fp32"] < 0.85 and 1.35 < vs_fp32["int8"] < 1.65


@pytest.mark.subprocess
@pytest.mark.usefixtures("moving_boot_time")
def test_cpu_sampler_counts_a_process_once_while_the_boot_time_moves(tmp_path):
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 30: pass\n"
    sampler = acme_program.CpuSampler(tmp_path, period_s=600)  # its thread stays out: this test samples
    with sampler:
        proc = subprocess.Popen([sys.executable, "-c", busy])
        try:
            counted = wait_until(lambda: (c := sampler.sample()) >= 0.5 and c, 60, "0.5 s of the child's CPU")
            for _ in range(10):
                counted = sampler.sample()
            times = psutil.Process(proc.pid).cpu_times()  # read after: the child's CPU can only have grown
            assert counted <= times.user + times.system + 1e-6
        finally:
            proc.kill()
            proc.wait()
