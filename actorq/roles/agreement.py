"""How often the quantized policy would act differently from the fp32 one on the states the fp32 policy visits.

A quantized actor explores with its own greedy actions: where its Q-values (DQN) or actions (D4PG) differ from the
learner's fp32 function, the data the learner gets is that of a different behaviour policy. A weight-space error
bound (the kernels' verification) does not say how often that happens on a trained network, whose top two
Q-values are often nearly tied on the states it visits. This measures it where it matters: the evaluator plays its
greedy fp32 episodes and, on every state visited, asks the quantized policy built from the *same* weights (the
same learner step, quantized by the quantizer's rule) for its action.

Discrete actions: ``quantized_agreement`` is the fraction of visited states where both greedy actions are equal.
Continuous actions: ``quantized_action_error`` is the mean, over visited states, of the largest per-dimension
action difference as a fraction of that dimension's range.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from actorq.algorithms import Algorithm


class ActionAgreement:
    """Accumulates fp32-vs-quantized action differences over the states passed to :meth:`observe`.

    Args:
        quantized: The quantized policy (``[B, obs] -> [B, out]``), holding the same learner step's weights as the
            fp32 policy whose episodes are observed.
        algorithm: The run's algorithm: its evaluation rule turns outputs into actions.
        action_low: Lower action bounds (continuous actions only).
        action_high: Upper action bounds (continuous actions only).
    """

    def __init__(
        self,
        quantized: Callable[[np.ndarray], np.ndarray],
        algorithm: Algorithm,
        action_low: tuple[float, ...] = (),
        action_high: tuple[float, ...] = (),
    ):
        self._quantized = quantized
        self._algorithm = algorithm
        if not algorithm.discrete:
            span = np.asarray(action_high, np.float64) - np.asarray(action_low, np.float64)
            if span.size == 0 or not np.all(span > 0):
                raise ValueError(
                    f"continuous actions need bounds with high > low, got {action_low}..{action_high}"
                )
            self._span = span
        self.reset()

    def reset(self) -> None:
        """Forget the states seen so far (one evaluation's worth is one measurement)."""
        self.states = 0
        self._total = 0.0

    def observe(self, obs: np.ndarray, outputs: np.ndarray, live: list[int]) -> None:
        """``greedy_episodes``' diagnostic hook: compare both policies' actions on the rows still playing.

        The quantized forward gets the whole batch (its kernel was verified and timed at that batch size); only
        the ``live`` rows count.
        """
        if not live:
            return
        theirs = np.asarray(self._quantized(obs)).reshape(len(obs), -1)
        for j in live:
            ours_action = np.asarray(self._algorithm.greedy(outputs[j]), np.float64)
            their_action = np.asarray(self._algorithm.greedy(theirs[j]), np.float64)
            if self._algorithm.discrete:
                self._total += float(np.array_equal(ours_action, their_action))
            else:
                diff = np.abs(ours_action.reshape(-1) - their_action.reshape(-1)) / self._span
                self._total += float(diff.max())
        self.states += len(live)

    def row(self) -> dict[str, float | None]:
        """The evaluation's metrics columns: the agreement (or action error) and how many states it is over (None
        before any state: the keys are always there, so the metrics header has them from the first row)."""
        name = "quantized_agreement" if self._algorithm.discrete else "quantized_action_error"
        return {name: self._total / self.states if self.states else None, "agreement_states": self.states}
