"""The progress views: live (rich) on a terminal, plain lines without escape codes elsewhere."""

from __future__ import annotations

import io
import logging

from actorq.progress import LiveView, TaskProgress


def test_live_view_off_a_terminal_writes_plain_text_each_period():
    out = io.StringIO()
    view = LiveView(lambda: "unused", lambda: "learner step 5", stream=out, plain_period_s=0.0)
    assert not view.live
    view.tick()
    view.tick()
    view.close()
    assert out.getvalue() == "learner step 5\n\n" * 2


def test_live_view_on_a_terminal_redraws_a_rich_table():
    from rich.table import Table

    def table():
        t = Table(title="[3s] dqn CartPole-v1")
        t.add_column("role")
        t.add_row("learner")
        return t

    out = io.StringIO()
    view = LiveView(table, lambda: "plain", stream=out, live=True, period_s=0.0)
    view.tick()
    view.close()
    text = out.getvalue()
    assert "learner" in text and "CartPole-v1" in text and "\x1b[" in text and "plain" not in text


def test_task_progress_off_a_terminal_keeps_the_commands_lines_and_logs_the_count(caplog):
    out = io.StringIO()
    with (
        caplog.at_level(logging.INFO, logger="actorq.progress"),
        TaskProgress("runs", 3, done=1, stream=out) as p,
    ):
        p.start("int8-s0")
        p.note("[2/3] int8-s0: target")
        p.advance()
    assert out.getvalue() == "[2/3] int8-s0: target\n"
    assert "runs: 2/3 done" in caplog.text


def test_task_progress_on_a_terminal_draws_a_bar_with_the_lines_above_it():
    out = io.StringIO()
    with TaskProgress("cells", 2, stream=out, live=True) as p:
        p.start("ppo bits 8 seed 0")
        p.note("cell done in 3 s")
        p.advance()
        p.advance()
    text = out.getvalue()
    assert "cell done in 3 s" in text and "2/2" in text and "\x1b[" in text


def test_a_progress_inside_another_stays_quiet(caplog):
    out = io.StringIO()
    with caplog.at_level(logging.INFO, logger="actorq.progress"), TaskProgress("QAT", 1, stream=out) as outer:
        with TaskProgress("PTQ", 2, stream=out, live=True) as inner:  # would draw a second live bar
            inner.advance()
            inner.advance()
        assert not inner.live
        outer.advance()
    assert out.getvalue() == "" and "PTQ" not in caplog.text and "QAT: 1/1 done" in caplog.text
