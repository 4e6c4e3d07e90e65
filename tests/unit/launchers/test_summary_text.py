"""The lines ``actorq train`` prints at the end of a run (``make run``'s first result): outcome, steps, rates,
kernel, energy and the path to summary.json, from hand-made summaries shaped like the ones runs write."""

from __future__ import annotations

import copy

from actorq.launchers.summary_text import human_summary

PATH = "runs/make-run-20261126-120000/summary.json"

REACHED = {
    "algorithm": "dqn",
    "task": "gym:CartPole-v1",
    "precision": "int8",
    "actors": 2,
    "wall_seconds": 110.0,
    "actor_steps": 8_800,
    "learner_steps": 990,
    "best_eval_return": 500.0,
    "final_eval_return": 480.5,
    "evaluations": 12,
    "target_return": 195.0,
    "seconds_to_target": 102.9,
    "learner_steps_to_target": 894,
    "rejected_messages": 0,
    "kernel": "int8/ort-u8",
    "kernel_us": 373.0,
    "rejected_kernels": {"int8/intmm": 0.22},
    "hardware": {"model": "AMD EPYC", "flags": {"avx2": True, "avx512_vnni": False}},
    "restarts": {},
    "exit": "target",
    "energy": {
        "seconds": 111.0,
        "cpu_seconds": 205.4,
        "outside_cpu_seconds": 1.0,
        "machine_cores": 2,
        "codecarbon": {"status": "ok", "energy_kwh": 0.00123, "cpu_power_w": 6.8, "tracking_mode": "machine"},
    },
}


def test_a_reached_target_says_when_with_steps_rates_kernel_and_energy() -> None:
    text = human_summary(REACHED, PATH)
    lines = text.splitlines()
    assert lines[0] == "reached the target return 195 after 102.9 s, learner step 894"
    assert "stopped by the target return after 110.0 s" in lines
    assert "learner: 990 steps (9.0/s)" in lines
    assert "actors: 2 x int8, 8,800 env steps (80.0/s)" in lines
    assert (
        "actor kernel int8/ort-u8 (verified on this CPU, 0.373 ms per forward; 1 other kernel failed verification)"
        in text
    )
    assert "CPU 205 s, energy 1.23 Wh (codecarbon estimate)" in lines
    assert lines[-1] == f"everything else: {PATH}"
    # The raw nested fields stay in summary.json: no CPU flags, no codecarbon internals.
    assert "avx512_vnni" not in text and "tracking_mode" not in text and "cpu_power_w" not in text
    assert len(lines) <= 10


def test_an_unreached_target_says_so_with_the_best_return_and_the_budget_that_stopped_it() -> None:
    summary = copy.deepcopy(REACHED)
    summary.update(
        seconds_to_target=None, learner_steps_to_target=None, best_eval_return=183.0, exit="max_minutes"
    )
    lines = human_summary(summary, PATH).splitlines()
    assert lines[0] == "did NOT reach the target return 195 (best evaluation 183.0)"
    assert lines[1] == "stopped by its time budget (--max-minutes) after 110.0 s"
    assert not any(line.startswith("reached") for line in lines)


def test_missing_energy_kernel_and_evaluations_are_left_out_not_errors() -> None:
    summary = {
        "precision": "fp32",
        "actors": 1,
        "wall_seconds": 5.0,
        "actor_steps": 0,
        "learner_steps": 0,
        "target_return": None,
        "seconds_to_target": None,
        "evaluations": 0,
        "best_eval_return": None,
        "exit": "role_failed",
        "failure": "learner exited with 1 (see logs/learner.log)",
        "restarts": {"actor_0": 2, "quantizer": 0},
    }
    lines = human_summary(summary, PATH).splitlines()
    assert lines[0] == "stopped by a failed role after 5.0 s"
    assert "failure: learner exited with 1 (see logs/learner.log)" in lines
    assert "learner: 0 steps (-)" in lines
    assert "restarts: actor_0 2" in lines
    assert not any("energy" in line or "kernel" in line or "evaluation" in line for line in lines)


def test_energy_without_codecarbon_says_why_and_a_loaded_machine_is_flagged() -> None:
    summary = copy.deepcopy(REACHED)
    summary["energy"]["codecarbon"] = {"status": "unavailable", "reason": "disabled"}
    summary["energy"]["outside_cpu_seconds"] = 111.0  # half of 2 cores for the whole run
    lines = human_summary(summary, PATH).splitlines()
    assert "CPU 205 s, energy not measured (disabled)" in lines
    assert "warning: other processes used 50% of this machine: its times and rates are slowed" in lines


def test_the_monitors_own_summary_reads_as_reached_with_the_learner_step_of_the_first_evaluation_at_target(
    tmp_path,
) -> None:
    """Field names shared by RunMonitor.summary and the printout cannot drift apart."""
    from actorq.launchers.monitor import RunMonitor
    from actorq.status import ActorStatus, Evaluation, EvaluatorStatus, LearnerStatus
    from tests.conftest import tiny_config

    started = 1_000.0
    evaluations = (  # the mean of the 3 trained evaluations reaches 195 at learner step 412
        Evaluation(time=started + 10, learner_step=0, actor_steps=100, eval_return=500.0),
        Evaluation(time=started + 30, learner_step=100, actor_steps=900, eval_return=150.0),
        Evaluation(time=started + 45, learner_step=250, actor_steps=1_400, eval_return=200.0),
        Evaluation(time=started + 60, learner_step=412, actor_steps=2_000, eval_return=250.0),
        Evaluation(time=started + 90, learner_step=700, actor_steps=3_000, eval_return=500.0),
    )
    records = {
        "learner": LearnerStatus(role="learner", label="learner", step=750),
        "actor_0": ActorStatus(role="actor", label="actor_0", step=1_600),
        "actor_1": ActorStatus(role="actor", label="actor_1", step=1_600),
        "evaluator": EvaluatorStatus(role="evaluator", label="evaluator", evaluations=evaluations),
    }
    config = tiny_config("dqn", target_return=195.0)
    monitor = RunMonitor(config, tmp_path, records.get, list(records), started=started)
    summary = monitor.summary("target", wall_seconds=100.0)
    assert summary["learner_steps_to_target"] == 412
    lines = human_summary(summary, tmp_path / "summary.json").splitlines()
    assert lines[0] == "reached the target return 195 after 60.0 s, learner step 412"
    assert "learner: 750 steps (7.5/s)" in lines
    assert "actors: 2 x int8, 3,200 env steps (32.0/s)" in lines
