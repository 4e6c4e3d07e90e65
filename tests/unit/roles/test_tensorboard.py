"""TensorBoard scalars written by the roles' writer (``tf.summary``) are the metrics CSV's numeric columns at each
row's step, readable by TensorBoard itself; a writer that fails (a full disk) is counted and reopened, never fatal."""

from __future__ import annotations

import pytest

from actorq.metrics import MetricsWriter, read_metrics
from actorq.roles.tensorboard import writer


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


def test_the_events_hold_the_csv_columns(tmp_path):
    metrics = MetricsWriter(tmp_path, tensorboard=writer)
    metrics.write({"step": 10, "steps_per_s": 3.5, "label": "x", "flag": True})
    metrics.write({"step": 20, "steps_per_s": 4.0, "loss": float("nan")})
    metrics.write({"step": 30, "steps_per_s": 4.5, "loss": 0.25})
    metrics.close()
    scalars = tensorboard_scalars(tmp_path / "tb")
    rows = read_metrics(tmp_path / "metrics.csv")
    assert scalars["steps_per_s"] == [(int(r["step"]), pytest.approx(r["steps_per_s"])) for r in rows]
    assert scalars["loss"] == [(30, 0.25)]  # NaN is not a point
    assert set(scalars) == {"steps_per_s", "loss"}  # no strings, booleans, time or step


def test_no_tensorboard_means_csv_only(tmp_path):
    metrics = MetricsWriter(tmp_path, tensorboard=False)
    metrics.write({"step": 1, "x": 1.0})
    metrics.close()
    assert not (tmp_path / "tb").exists()


def test_a_failing_writer_is_counted_reopened_later_and_never_stops_the_role(tmp_path, monkeypatch):
    import actorq.metrics as metrics_module

    class Full:
        def __init__(self, _directory):
            pass

        def write(self, values, step):
            raise OSError(28, "No space left on device")

        def close(self):
            raise OSError(28, "No space left on device")

    made = []

    def factory(directory):
        made.append(directory)
        return Full(directory) if len(made) == 1 else writer(directory)

    clock = [0.0]
    monkeypatch.setattr(metrics_module.time, "monotonic", lambda: clock[0])
    metrics = MetricsWriter(tmp_path, tensorboard=factory)
    metrics.write({"step": 1, "x": 1.0})  # fails: counted, the writer closed
    assert metrics.failures == 1
    metrics.write({"step": 2, "x": 2.0})  # within the retry delay: no new writer
    assert len(made) == 1
    clock[0] += metrics_module.TB_RETRY_S + 1
    metrics.write({"step": 3, "x": 3.0})  # a new writer, which works
    metrics.close()
    assert len(made) == 2 and [r["x"] for r in read_metrics(tmp_path / "metrics.csv")] == [1.0, 2.0, 3.0]
    assert tensorboard_scalars(tmp_path / "tb")["x"] == [(3, 3.0)]
