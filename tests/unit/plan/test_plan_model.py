"""``actorq plan``'s predictions and choices from hand-made measurements (no processes, no timing)."""

from __future__ import annotations

import os

import pytest

from actorq.plan.model import (
    Measurement,
    Split,
    capacity_notes,
    make_splits,
    predict,
    recommend,
    spi_grid,
)

OWN = Split("learner [0] + actors [1]", (0,), (1,), 1)
SHARED = Split("shared [0,1]", (0, 1), (0, 1), 2)


def cell(precision, supply, capacity, envs=1, split=OWN, inference_ms=None, step_ms=None):
    return Measurement(
        split, precision, envs, supply, capacity, "hand-made", f"{precision}/k", inference_ms, step_ms
    )


def by(predictions, precision, spi, envs=1, split=OWN):
    (p,) = [
        p
        for p in predictions
        if (p.measurement.precision, p.spi, p.measurement.envs_per_actor, p.measurement.split)
        == (precision, spi, envs, split)
    ]
    return p


def test_delivered_rate_and_speedup_follow_the_regime_model():
    # The run: fp32 actors 252 env steps/s, int8 649, a learner of 1024 samples/s on its own core.
    preds = predict([cell("fp32", 252, 1024), cell("int8", 649, 1024)], [0.25, 4.0, 8.0])
    assert by(preds, "int8", 0.25).delivered == 649 and by(preds, "int8", 0.25).label == "actor-bound"
    assert by(preds, "int8", 0.25).speedup == pytest.approx(649 / 252)
    assert by(preds, "fp32", 0.25).speedup == pytest.approx(1.0)
    # spi 8: the learner takes 128 env steps/s, below both: learner-bound, no gain.
    assert (
        by(preds, "int8", 8.0).delivered == pytest.approx(128)
        and by(preds, "int8", 8.0).label == "learner-bound"
    )
    assert by(preds, "int8", 8.0).speedup == pytest.approx(1.0)
    # spi 4: 256 env steps/s, fp32 just below it: int8 gains only 256/252.
    assert by(preds, "int8", 4.0).speedup == pytest.approx(256 / 252)


def test_learner_bound_everywhere_int8_does_not_help_and_says_why():
    # A slow learner (1 step/s x batch 64): at spi >= 8 it takes <= 8 env steps/s, far below fp32's 300.
    preds = predict(
        [
            cell("fp32", 300, 64, inference_ms=2.2, step_ms=3.3),
            cell("int8", 900, 64, inference_ms=0.4, step_ms=1.1),
        ],
        [8.0, 16.0, 32.0],
    )
    choice = recommend(preds, config_spi=8.0)
    assert not choice.helps
    assert choice.setting.measurement.precision == "fp32" and choice.setting.spi == 8.0
    (reason,) = choice.reasons
    assert "Learner-bound" in reason and "int8" in reason
    assert "below spi ~0.21" in reason  # fp32 becomes actor-bound below C / S_fp32 = 64 / 300
    assert "replay.samples_per_insert=8" in choice.setting.overrides()


def test_actor_bound_int8_helps_at_the_spi_nearest_the_configs_within_reach_of_the_largest_gain():
    preds = predict([cell("fp32", 250, 1024), cell("int8", 650, 1024)], spi_grid(8.0))
    choice = recommend(preds, config_spi=8.0)
    assert choice.helps
    s = choice.setting
    # The gain is 2.6x up to spi 1024/650 = 1.58; spi 1 is the grid's largest such ratio (2: 2.05x; 8: 1.0x).
    assert (s.measurement.precision, s.spi) == ("int8", 1.0) and s.speedup == pytest.approx(2.6)
    overrides = s.overrides()
    assert {"actor.precision=int8", "replay.samples_per_insert=1", "actor.num_actors=1"} <= set(overrides)
    assert {
        "affinity.learner=[0]",
        "affinity.replay=[0]",
        "affinity.evaluator=[0]",
        "affinity.actor=[1]",
    } <= set(overrides)
    # At the config's own spi 8 int8 does not help, and the plan says so.
    assert len(choice.reasons) == 1 and "at the config's spi" in choice.reasons[0]
    # A config at spi 0.25 keeps its ratio: the gain is as large there.
    assert recommend(preds, config_spi=0.25).setting.spi == 0.25


def test_best_against_best_each_precision_at_its_own_fastest_setting():
    # 8 envs per actor make fp32 4x faster but int8 only 1.5x (batched fp32 inference is cheap).
    cells = [
        cell("fp32", 250, 1024),
        cell("int8", 1000, 1024),
        cell("fp32", 1000, 1024, envs=8),
        cell("int8", 1500, 1024, envs=8),
    ]
    choice = recommend(predict(cells, [0.5, 1.0, 8.0]), config_spi=1.0)
    assert choice.setting.measurement.envs_per_actor == 1 and choice.setting.speedup == pytest.approx(4.0)
    best = choice.best_per_precision
    assert best["fp32"].measurement.envs_per_actor == 8 and best["fp32"].delivered == 1000
    assert best["int8"].delivered == 1024  # capped by the learner: 1024 samples/s at spi 1
    assert choice.as_dict()["best_against_best"]["int8"] == pytest.approx(1.024)
    assert "best against best at spi 1, int8 is 1.02x fp32" in choice.reasons[-1]


def test_shared_cores_and_own_cores_are_compared_as_settings():
    # Sharing both cores gives the actors more CPU but the learner less; at spi 2 the own-core split wins for int8.
    cells = [
        cell("fp32", 250, 1024),
        cell("int8", 650, 1024),
        cell("fp32", 400, 400, split=SHARED),
        cell("int8", 900, 500, split=SHARED),
    ]
    choice = recommend(predict(cells, [2.0]), config_spi=2.0)
    assert choice.best_per_precision["int8"].measurement.split == OWN  # 512 vs 250 env steps/s
    assert choice.best_per_precision["fp32"].measurement.split == OWN  # 250 vs min(400, 200)


def test_batched_fp32_inference_already_cheap():
    cells = [
        cell("fp32", 1000, 1e6, envs=8, inference_ms=0.2, step_ms=1.0),
        cell("int8", 1050, 1e6, envs=8, inference_ms=0.15, step_ms=0.95),
    ]
    choice = recommend(predict(cells, [1.0]), config_spi=1.0)
    assert not choice.helps and "Batched fp32 inference is already cheap" in choice.reasons[0]
    assert "20% of an fp32 actor step" in choice.reasons[0]


def test_the_env_step_dominates():
    cells = [cell("fp32", 500, 1e6, inference_ms=0.2, step_ms=2.0), cell("int8", 520, 1e6, inference_ms=0.1)]
    choice = recommend(predict(cells, [1.0]), config_spi=1.0)
    assert not choice.helps and "The env step dominates" in choice.reasons[0]
    assert "at most 1.11x" in choice.reasons[0]  # Amdahl: 1 / (1 - 0.1)


def test_a_slower_kernel_is_named():
    cells = [cell("fp32", 500, 1e6, inference_ms=1.5, step_ms=2.0), cell("fp16", 400, 1e6, inference_ms=1.9)]
    choice = recommend(predict(cells, [1.0]), config_spi=1.0)
    assert "fp16/k kernel is not faster" in choice.reasons[0]


def test_no_fp32_no_plan():
    with pytest.raises(ValueError, match="fp32"):
        recommend(predict([cell("int8", 500, 100)], [1.0]), config_spi=1.0)


def test_splits_of_the_cores():
    assert [s.name for s in make_splits([0, 1])] == ["learner [0] + actors [1]", "shared [0,1]"]
    four = make_splits([0, 1, 2, 3])
    assert [(s.learner_cpus, s.actor_cpus, s.actors) for s in four] == [
        ((0,), (1, 2, 3), 3),
        ((0, 1), (2, 3), 2),
        ((0, 1, 2), (3,), 1),
        ((0, 1, 2, 3), (0, 1, 2, 3), 4),
    ]
    assert [s.name for s in make_splits([5])] == ["shared [5]"]
    with pytest.raises(ValueError, match="must be 1..1"):
        make_splits([0, 1], [2])


def test_spi_grid_adds_the_configs_ratio():
    assert spi_grid(3.0, (1.0, 8.0)) == [1.0, 3.0, 8.0]
    assert spi_grid(0.0, (1.0, 8.0)) == [1.0, 8.0]  # no limiter in the config: nothing to add


def test_a_learner_elsewhere_scales_the_actors_and_sets_no_affinity():
    from actorq.plan.measure import given_learner_measurements, measurements
    from actorq.plan.side_loads import SideLoads

    records = [
        {
            "precision": "fp32",
            "envs": 1,
            "supply": 600.0,
            "inference_ms": 2.0,
            "step_ms": 3.0,
            "kernel": "fp32/ort",
        },
        {
            "precision": "fp32",
            "envs": 1,
            "supply": 400.0,
            "inference_ms": 2.0,
            "step_ms": 3.0,
            "kernel": "fp32/ort",
        },
    ]
    (m,) = given_learner_measurements(records, cores=2, actor_cores=4, learner_steps_per_s=50.0, batch=64)
    assert m.supply == pytest.approx(1000.0) and m.capacity == 3200.0  # median 500 on 2 cores -> 4 cores
    assert m.split.overrides() == ["actor.num_actors=4"]
    split_records = [
        dict(r, split=OWN.name, capacity=c) for r, c in zip(records, (100.0, 300.0), strict=True)
    ]
    idle = SideLoads(
        1, 0.0, 0.0, 500, 10.0, {"fp32": 0.0}, 50, 0.0, 0.05
    )  # no evaluator or quantizer work: C as measured
    (own,) = measurements(split_records, {OWN.name: OWN}, {OWN.name: idle}, 64)
    assert (own.supply, own.capacity, own.capacity_alone, own.split) == (500.0, 200.0, 200.0, OWN)


def test_plot_and_tables(tmp_path):
    from actorq.plan.cli import format_predictions, format_recommendation, plot

    preds = predict([cell("fp32", 250, 1024), cell("int8", 650, 1024)], [0.25, 8.0])
    text = format_predictions(preds)
    assert "(2.60x)" in text and "actor-bound/actor-bound" in text and "learner-bound/learner-bound" in text
    assert "affinity.actor=[1]" in format_recommendation(recommend(preds, 8.0), 8.0)
    path = plot(preds, tmp_path / "plan.png", "hand-made")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) > 1000


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--precisions", "int8"], "include fp32"),
        (["--learner-steps-per-s", "5"], "go together"),
        (["--spi", "0,1"], "must be > 0"),
        (["--learner-cores", "2"], "must be 1..1"),
    ],
)
def test_bad_arguments_fail_before_any_process(argv, message, capsys, monkeypatch):
    from actorq.cli import main
    from actorq.plan import measure as plan_measure

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(plan_measure, "verify_kernels", lambda *a: pytest.fail("went past validation"))
    assert main(["plan", "configs/dqn/gym_cartpole.yaml", *argv]) == 2
    assert message in capsys.readouterr().err


def test_a_learner_faster_beside_one_precision_is_pointed_out():
    assert capacity_notes([cell("fp32", 250, 1000), cell("int8", 650, 1050)]) == []
    (note,) = capacity_notes([cell("fp32", 250, 1000), cell("int8", 650, 2210)])
    assert "2210 samples/s beside int8 actors but 1000 beside fp32 ones (2.21x)" in note
