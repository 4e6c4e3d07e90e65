"""Progress of long commands, on ``rich``: live on a terminal, plain lines when the output is a file or a pipe.

Two shapes, each degrading the same way (a log file or CI gets ordinary lines, never escape codes):

* :class:`LiveView`: a view redrawn in place (``actorq train``'s table of roles); off a terminal its text is written
  every ``plain_period_s``.
* :class:`TaskProgress`: units of work out of a total (the runs of ``actorq experiment``/``grid``, the cells of a
  study): a bar with what is running, done/total, elapsed and time left, with the command's own lines printed above
  it; off a terminal the lines as they come, and a ``done/total`` log line per unit.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

log = logging.getLogger(__name__)


def is_terminal(stream: TextIO | None = None) -> bool:
    """True when ``stream`` (default stdout) is an interactive terminal."""
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)())


def _console(stream: TextIO):
    from rich.console import Console

    return Console(file=stream, force_terminal=True, highlight=False)


class LiveView:
    """A view redrawn in place on a terminal, or written as plain text every ``plain_period_s`` elsewhere.

    Args:
        render: The rich renderable (e.g. a ``rich.table.Table``) of the view now (terminal).
        text: The view now as plain text (files and pipes).
        live: Redraw in place (default: when the stream is a terminal).
        period_s: Seconds between redraws on a terminal.
        plain_period_s: Seconds between plain views.
        stream: Where the view goes (default stdout).
    """

    def __init__(
        self,
        render: Callable[[], Any],
        text: Callable[[], str],
        *,
        live: bool | None = None,
        period_s: float = 2.0,
        plain_period_s: float = 30.0,
        stream: TextIO | None = None,
    ):
        self._render, self._text = render, text
        self._stream = stream or sys.stdout
        self.live = is_terminal(self._stream) if live is None else live
        self._period = period_s if self.live else plain_period_s
        self._last = 0.0
        self._live: Any = None

    def tick(self) -> None:
        """Redraw (or write) the view when its period has passed."""
        now = time.monotonic()
        if now - self._last < self._period:
            return
        self._last = now
        if not self.live:
            self._stream.write(self._text() + "\n\n")
            self._stream.flush()
            return
        if self._live is None:
            from rich.live import Live

            self._live = Live(
                self._render(), console=_console(self._stream), auto_refresh=False, transient=True
            )
            self._live.start()
        self._live.update(self._render(), refresh=True)

    def close(self) -> None:
        """Stop redrawing (the terminal keeps what comes after it)."""
        if self._live is not None:
            self._live.stop()
            self._live = None


_OPEN: list[TaskProgress] = []
"""Task progresses open in this process now (only the outermost shows anything)."""


class TaskProgress:
    """``total`` units of work (``done`` of them done before this process): a bar on a terminal, lines elsewhere.

    Use as a context manager; :meth:`note` prints a line of the command's own output, :meth:`start` names the unit
    now running, :meth:`advance` counts one done. A progress opened inside another (a study's PTQ sweep inside its
    QAT loop) stays quiet: the outer one shows the work.
    """

    def __init__(
        self,
        what: str,
        total: int,
        *,
        done: int = 0,
        live: bool | None = None,
        stream: TextIO | None = None,
        log_counts: bool = True,
    ):
        self.what = what
        self.total = int(total)
        self.done = int(done)
        self._stream = stream or sys.stdout
        self.live = is_terminal(self._stream) if live is None else live
        self._started = time.monotonic()
        self._units = 0
        self._bar: Any = None
        self._task: Any = None
        self._log_counts = log_counts
        self._pending = ""

    def __enter__(self) -> TaskProgress:
        _OPEN.append(self)
        if len(_OPEN) > 1:
            self.live, self._log_counts = False, False
        if self.live:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("left"),
                TimeRemainingColumn(),
                console=_console(self._stream),
                transient=False,
            )
            self._bar.start()
            self._task = self._bar.add_task(self.what, total=self.total, completed=self.done)
        return self

    def __exit__(self, *_exc: object) -> None:
        _OPEN.remove(self)
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def note(self, text: str, end: str = "\n") -> None:
        """The command's own output (above the bar on a terminal). Off a terminal it is written as it comes; on one
        a line is printed once it ends (``end="\\n"``), so a line begun when a unit starts and finished when it
        ends stays one line."""
        if self._bar is None:
            self._stream.write(text + end)
            self._stream.flush()
            return
        self._pending += text + end
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            self._bar.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def start(self, unit: str) -> None:
        """The unit of work now running (shown in the bar)."""
        if self._bar is not None:
            self._bar.update(self._task, description=f"{self.what}: {unit}")

    def advance(self, n: int = 1) -> None:
        """``n`` more units done; off a terminal, one log line with the count and the time left."""
        self.done += n
        self._units += n
        if self._bar is not None:
            self._bar.update(self._task, advance=n, description=self.what)
            return
        if not self._log_counts:
            return
        elapsed = time.monotonic() - self._started
        left = (self.total - self.done) * elapsed / self._units if self._units else 0.0
        log.info(
            "%s: %d/%d done, %s elapsed, ~%s left",
            self.what,
            self.done,
            self.total,
            _hms(elapsed),
            _hms(left),
        )


def _hms(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
