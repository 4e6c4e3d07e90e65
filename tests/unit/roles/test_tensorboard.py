"""TensorBoard scalars written by each role's writer (``tf.summary``; torch's ``SummaryWriter`` in actors) are the
metrics CSV's numeric columns at each row's step, readable by TensorBoard itself."""

from __future__ import annotations

import pytest

from actorq.metrics import MetricsWriter, read_metrics
from actorq.roles.tensorboard import writer_for


def tensorboard_scalars(directory) -> dict[str, list[tuple[int, float]]]:
    """``{tag: [(step, value), ...]}`` of the event files in ``directory``, as TensorBoard reads them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(directory), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    out = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
    import tensorflow as tf

    for tag in acc.Tags()["tensors"]:  # tf.summary writes scalars as tensors
        out[tag] = [(e.step, float(tf.make_ndarray(e.tensor_proto))) for e in acc.Tensors(tag)]
    return out


@pytest.mark.parametrize("framework", ["tf", "torch"])
def test_the_events_hold_the_csv_columns(tmp_path, framework):
    writer = MetricsWriter(tmp_path, tensorboard=writer_for(framework))
    writer.write({"step": 10, "steps_per_s": 3.5, "label": "x", "flag": True})
    writer.write({"step": 20, "steps_per_s": 4.0, "loss": float("nan")})
    writer.write({"step": 30, "steps_per_s": 4.5, "loss": 0.25})
    writer.close()
    scalars = tensorboard_scalars(tmp_path / "tb")
    rows = read_metrics(tmp_path / "metrics.csv")
    assert scalars["steps_per_s"] == [(int(r["step"]), pytest.approx(r["steps_per_s"])) for r in rows]
    assert scalars["loss"] == [(30, 0.25)]  # NaN is not a point
    assert set(scalars) == {"steps_per_s", "loss"}  # no strings, booleans, time or step


def test_no_tensorboard_means_csv_only(tmp_path):
    writer = MetricsWriter(tmp_path, tensorboard=False)
    writer.write({"step": 1, "x": 1.0})
    writer.close()
    assert not (tmp_path / "tb").exists()
