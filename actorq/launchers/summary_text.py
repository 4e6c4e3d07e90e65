"""The few lines ``actorq train`` prints when a run ends: its outcome for a person, not summary.json's fields.

summary.json holds ~35 fields, nested ones included (the CPU's flags, codecarbon's internals); printed raw they
bury the answer a newcomer ran ``make run`` for. This says whether the target was reached and when, how far the
learner and the actors got and how fast, which kernel the actors ran, the CPU time and energy, and where the
rest is. It reads only the summary dict, so it serves every placement and tolerates fields a run did not produce.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from actorq.metrics import OUTSIDE_LOAD_LIMIT

STOPPED_BY = {
    "target": "the target return",
    "max_minutes": "its time budget (--max-minutes)",
    "max_actor_steps": "its actor-step budget (--max-actor-steps)",
    "max_learner_steps": "its learner-step budget (learner.max_steps)",
    "role_failed": "a failed role",
    "interrupted": "an interrupt (Ctrl-C or SIGTERM)",
}
"""How the outcome line names each ``exit`` reason of summary.json."""


def _rate(count: Any, seconds: Any) -> str:
    return f"{count / seconds:.1f}/s" if count and seconds else "-"


def _outcome(summary: dict[str, Any]) -> list[str]:
    """The first lines: reached the target or not, when, and why the run stopped."""
    wall, target, exit_reason = summary.get("wall_seconds"), summary.get("target_return"), summary.get("exit")
    stopped = STOPPED_BY.get(exit_reason, str(exit_reason))
    best, final = summary.get("best_eval_return"), summary.get("final_eval_return")
    evaluations = summary.get("evaluations") or 0
    if target is not None and summary.get("seconds_to_target") is not None:
        at_step = summary.get("learner_steps_to_target")
        step = f", learner step {at_step:,}" if at_step is not None else ""
        lines = [f"reached the target return {target:g} after {summary['seconds_to_target']:.1f} s{step}"]
    elif target is not None:
        best_text = "no evaluation finished" if best is None else f"best evaluation {best:.1f}"
        lines = [f"did NOT reach the target return {target:g} ({best_text})"]
    else:
        lines = []
    lines.append(f"stopped by {stopped} after {wall:.1f} s" if wall is not None else f"stopped by {stopped}")
    if summary.get("failure"):
        lines.append(f"failure: {summary['failure']}")
    if evaluations:
        lines.append(f"evaluation return: best {best:.1f}, final {final:.1f} ({evaluations} evaluations)")
    return lines


def _kernel(summary: dict[str, Any]) -> str | None:
    kernel = summary.get("kernel")
    if not kernel:
        return None
    micros = summary.get("kernel_us")
    timing = f", {micros / 1000:.3g} ms per forward" if micros else ""
    rejected = len(summary.get("rejected_kernels") or {})
    plural = "s" if rejected > 1 else ""
    others = f"; {rejected} other kernel{plural} failed verification" if rejected else ""
    return f"actor kernel {kernel} (verified on this CPU{timing}{others})"


def _energy(summary: dict[str, Any]) -> list[str]:
    energy = summary.get("energy") or {}
    if not energy:
        return []
    line = f"CPU {energy.get('cpu_seconds', 0):,.0f} s"
    carbon = energy.get("codecarbon") or {}
    if carbon.get("status") == "ok" and carbon.get("energy_kwh") is not None:
        line += f", energy {carbon['energy_kwh'] * 1000:.2f} Wh (codecarbon estimate)"
    else:
        reason = carbon.get("reason") or carbon.get("status") or "not measured"
        line += f", energy not measured ({reason})"
    lines = [line]
    seconds, cores = energy.get("seconds"), energy.get("machine_cores")
    outside = energy.get("outside_cpu_seconds")
    if outside is not None and seconds and cores and outside / seconds / cores > OUTSIDE_LOAD_LIMIT:
        share = 100 * outside / seconds / cores
        lines.append(
            f"warning: other processes used {share:.0f}% of this machine: its times and rates are slowed"
        )
    return lines


def human_summary(summary: dict[str, Any], path: Path | str) -> str:
    """A run's outcome in a few lines, then where ``summary.json`` (``path``) holds everything else.

    Args:
        summary: the dict written to summary.json (missing fields are left out, never an error).
        path: where that summary.json is.
    """
    learner, actors, wall = (
        summary.get("learner_steps"),
        summary.get("actor_steps"),
        summary.get("wall_seconds"),
    )
    lines = _outcome(summary)
    lines.append(f"learner: {learner or 0:,} steps ({_rate(learner, wall)})")
    lines.append(
        f"actors: {summary.get('actors', '?')} x {summary.get('precision', '?')},"
        f" {actors or 0:,} env steps ({_rate(actors, wall)})"
    )
    kernel = _kernel(summary)
    if kernel:
        lines.append(kernel)
    if summary.get("rejected_messages"):
        lines.append(f"rejected weight messages: {summary['rejected_messages']}")
    restarts = {role: n for role, n in (summary.get("restarts") or {}).items() if n}
    if restarts:
        lines.append("restarts: " + ", ".join(f"{role} {n}" for role, n in restarts.items()))
    lines += _energy(summary)
    return "\n".join(lines + [f"everything else: {path}"])
