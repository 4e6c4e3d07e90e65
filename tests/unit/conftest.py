"""Fixtures shared by the unit tests of CPU-time sampling (launchers.energy and the Acme baseline)."""

from __future__ import annotations

import sys

import pytest


@pytest.fixture
def moving_boot_time(monkeypatch):
    """psutil's boot time, a second later at every reading.

    psutil's ``create_time()`` adds ``/proc/stat``'s boot time, which the kernel moves when the clock is adjusted
    (NTP on a VM): here it moves at every reading, so code that keys processes by ``create_time()`` sees a new
    process each time it looks.
    """
    if not sys.platform.startswith("linux"):
        pytest.skip("psutil's boot time comes from /proc/stat")
    from psutil import _pslinux

    boot = [_pslinux.boot_time()]

    def moved() -> float:
        boot[0] += 1.0
        return boot[0]

    monkeypatch.setattr(_pslinux, "boot_time", moved)
