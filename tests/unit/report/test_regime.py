"""The one regime model: its arithmetic, where C comes from, and each run's label, on hand-made rates."""

from __future__ import annotations

import pytest

from actorq.plan import regime as model
from actorq.report import regime
from actorq.report.regime import ACTOR_BOUND, BALANCED, LEARNER_BOUND, NO_LIMITER, UNKNOWN, RunRates


def rates(name: str, precision: str = "fp32", **kw) -> RunRates:
    base = dict(
        name=name,
        group=("gym:CartPole-v1", "64", "AMD EPYC", "2"),
        precision=precision,
        cell="replay.samples_per_insert=1",
        samples_per_insert=1.0,
        batch_size=64,
        learner_steps_per_s=5.0,
        env_steps_per_s=300.0,
        actor_free_rate=500.0,
        actor_free_source="cpu",
        learner_blocked_share=0.0,
        actor_blocked_share=0.9,
    )
    base.update(kw)
    return RunRates(**base)


def test_delivered_rate_is_the_smaller_of_supply_and_capacity_over_spi():
    assert model.delivered_rate(500.0, 320.0, 1.0) == 320.0  # the learner lets 320 env steps/s in
    assert model.delivered_rate(500.0, 320.0, 0.25) == 500.0  # 1280 allowed: the actors' 500 is the limit
    assert model.delivered_rate(500.0, 320.0, 8.0) == 40.0
    assert model.delivered_rate(500.0, None, 0.0) == 500.0  # no limiter: what the actors make
    with pytest.raises(ValueError, match="capacity"):
        model.delivered_rate(500.0, None, 1.0)
    with pytest.raises(ValueError, match=">= 0"):
        model.delivered_rate(-1.0, 320.0, 1.0)


def test_predicted_label_and_margin():
    assert model.predicted_label(500.0, 320.0, 1.0) == LEARNER_BOUND  # 500 vs 320: 1.56x
    assert model.predicted_label(500.0, 320.0, 0.25) == ACTOR_BOUND  # 500 vs 1280
    assert model.predicted_label(350.0, 320.0, 1.0) == BALANCED  # 1.09x: inside the margin
    assert model.predicted_label(384.0, 320.0, 1.0) == LEARNER_BOUND  # exactly MARGIN (1.2x)
    assert model.predicted_label(500.0, None, 1.0) == UNKNOWN
    assert model.predicted_label(500.0, 320.0, 0.0) == NO_LIMITER


def test_predicted_speedup_is_the_ratio_of_median_delivered_rates():
    # int8 actors make 2.6x fp32's env steps/s, but at spi 1 the learner admits only 320 of them: 320/252.
    fp32 = [model.delivered_rate(252.0, 320.0, 1.0)] * 3
    int8 = [model.delivered_rate(649.0, 320.0, 1.0)] * 3
    assert model.predicted_speedup(int8, fp32) == pytest.approx(320 / 252)
    # At spi 0.25 the learner admits 1280: the full 2.6x.
    fp32 = [model.delivered_rate(252.0, 320.0, 0.25)]
    int8 = [model.delivered_rate(649.0, 320.0, 0.25), None]
    assert model.predicted_speedup(int8, fp32) == pytest.approx(649 / 252)
    assert model.predicted_speedup([None], fp32) is None


@pytest.mark.parametrize(
    ("learner", "actors", "label"),
    [(0.1, 0.8, LEARNER_BOUND), (0.7, 0.0, ACTOR_BOUND), (0.3, 0.3, BALANCED), (None, 0.5, UNKNOWN)],
)
def test_observed_label_from_the_two_blocked_shares(learner, actors, label):
    assert regime.observed_label(learner, actors, 1.0) == label
    assert regime.observed_label(learner, actors, 0.0) == NO_LIMITER


def test_capacity_comes_from_the_run_when_its_learner_was_never_starved():
    (r,) = regime.assess([rates("a")])
    assert r.capacity.value == pytest.approx(5.0 * 64) and "this run" in r.capacity.source
    assert r.supply.value == 500.0
    assert r.delivered == pytest.approx(320.0)
    assert (r.label, r.label_source, r.predicted, r.agrees) == (
        LEARNER_BOUND,
        "blocked shares",
        LEARNER_BOUND,
        True,
    )


def test_a_starved_learners_own_rate_is_never_its_capacity():
    # fp32 at spi 1, actor-bound: its learner waited 98% of the time at 1.08 steps/s. Its capacity comes from
    # the never-starved runs of the same task and machine, the same precision first.
    starved = rates(
        "fp32-spi1", learner_steps_per_s=1.08, learner_blocked_share=0.98, actor_blocked_share=0.0,
        actor_free_rate=252.0,
    )  # fmt: skip
    same_cell = rates("fp32-other-seed", learner_steps_per_s=6.0)
    other_cell = rates("fp32-spi8", cell="replay.samples_per_insert=8", learner_steps_per_s=7.0)
    other_precision = rates("int8-spi1", precision="int8", learner_steps_per_s=9.0)
    elsewhere = rates("fp32-zen4", group=("gym:CartPole-v1", "64", "Zen 4", "2"), learner_steps_per_s=20.0)
    runs = [starved, same_cell, other_cell, other_precision, elsewhere]
    r = regime.assess(runs)[0]
    assert r.capacity.value == pytest.approx(6.0 * 64)
    assert "same precision and cell" in r.capacity.source
    assert r.label == ACTOR_BOUND and r.predicted == ACTOR_BOUND  # 252 env steps/s vs 384 allowed
    assert r.delivered == pytest.approx(252.0)
    # Then the same cell at another precision; then the same precision in another cell; never another machine.
    r = regime.assess([starved, other_cell, other_precision, elsewhere])[0]
    assert r.capacity.value == pytest.approx(9.0 * 64) and "same cell, other precisions" in r.capacity.source
    r = regime.assess([starved, other_cell, elsewhere])[0]
    assert r.capacity.value == pytest.approx(7.0 * 64) and "fp32, other cells" in r.capacity.source
    other_both = rates("int8-spi8", precision="int8", cell="x", learner_steps_per_s=8.0)
    r = regime.assess([starved, other_both, elsewhere])[0]
    assert r.capacity.value == pytest.approx(8.0 * 64) and "other cells and precisions" in r.capacity.source
    r = regime.assess([starved, elsewhere])[0]
    assert r.capacity is None and r.delivered is None and r.predicted == UNKNOWN
    assert r.label == ACTOR_BOUND  # what the run did is still known


def test_without_limiter_snapshots_the_label_is_the_models():
    r = regime.assess([rates("old", learner_blocked_share=None, actor_blocked_share=None)])[0]
    # No blocked shares: the learner cannot be shown never-starved, so C is unknown and so is the label.
    assert (r.label, r.label_source, r.agrees) == (UNKNOWN, "model", None)
    peer = rates("peer", learner_steps_per_s=2.0)  # 128 samples/s, never starved
    r = regime.assess([rates("old", learner_blocked_share=None, actor_blocked_share=None), peer])[0]
    assert (r.label, r.label_source) == (LEARNER_BOUND, "model")  # 500 env steps/s vs 128 allowed


def test_a_model_that_does_not_transfer_is_shown_to_differ():
    # The learner's capacity measured in a run where the actors idled (spi 8) overstates what it gets when the
    # actors run flat out beside it on shared cores: the model says balanced, the run was actor-bound.
    starved = rates("fp32-spi1", learner_blocked_share=0.98, actor_blocked_share=0.0, actor_free_rate=480.0)
    idle_actors = rates("fp32-spi8", cell="replay.samples_per_insert=8", learner_steps_per_s=7.3)
    r = regime.assess([starved, idle_actors])[0]
    assert (r.label, r.predicted, r.agrees) == (ACTOR_BOUND, BALANCED, False)
    assert r.as_dict()["agrees"] is False and r.as_dict()["capacity_samples_per_s"]["value"] == pytest.approx(
        467.2
    )
