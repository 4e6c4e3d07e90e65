"""Argument helpers shared by the study commands (:mod:`actorq.studies.cli`, :mod:`actorq.studies.qat_cli`): bad
input is a :class:`~actorq.errors.UsageError` (one ``error:`` line and exit status 2), before anything is loaded or
trained."""

from __future__ import annotations

import argparse

from actorq.errors import UsageError

ALGO_CHOICES = ["a2c", "dqn", "ppo", "ddpg", "td3", "sac"]
"""SB3 algorithms the study commands train."""


def fail(msg: object) -> UsageError:
    """Bad user input (``raise fail(...)``): one ``error:`` line, exit status 2."""
    return UsageError(str(msg))


def bit_width(text: str) -> int:
    """argparse type: an integer bit width the quantizers support."""
    from actorq.quantize.affine import MAX_BITS, MIN_BITS

    try:
        bits = int(text)
    except ValueError:
        bits = 0
    if not MIN_BITS <= bits <= MAX_BITS:
        raise argparse.ArgumentTypeError(
            f"must be an integer bit width in [{MIN_BITS}, {MAX_BITS}], got {text!r}"
        )
    return bits


def names(value: str, allowed: list[str] | tuple[str, ...], flag: str) -> list[str]:
    """A comma list of names from ``allowed``, or an ``error:`` naming the unknown ones and the choices."""
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        what = f"unknown {', '.join(repr(n) for n in unknown)}" if unknown else "nothing given"
        raise fail(f"{flag} {value!r}: {what}; give a comma list of {', '.join(allowed)}")
    return names


def check_env(env_id: str) -> None:
    """An unknown ``--env`` fails here, before any training starts."""
    from actorq.studies import envs

    try:
        envs.check_env_id(env_id)
    except ValueError as e:
        raise fail(f"--env: {e}") from None


def threads(n: int) -> None:
    import torch

    torch.set_num_threads(n)
