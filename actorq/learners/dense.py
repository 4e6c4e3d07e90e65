"""Dense layers whose forward product runs as ``tf.einsum``: the same fp32 maths, a faster oneDNN kernel on CPU.

With oneDNN (``learner.onednn``) TF 2.8 runs ``tf.matmul(x, w)`` at batch 64 x 2048 x 2048 as a plain (NN) GEMM
that is ~1.4x slower than the same product through ``tf.einsum`` on an AVX2 Zen 2 (measured: 9.1 vs 6.5 ms per
2048x2048 layer on 2 cores). Einsum's own gradient is slow there, so the gradients stay the matmuls TensorFlow
derives for ``tf.matmul`` (``dy @ w^T`` and ``x^T @ dy``). Only the kernel changes: same products, same variables
(names, shapes, checkpoints, the weights published to actors), fp32 throughout; results may differ from
``tf.matmul``'s in the last bits, as oneDNN's do from Eigen's. ``tests/unit/test_learner_update.py`` checks it.
"""

from __future__ import annotations

import sonnet as snt
import tensorflow as tf

from actorq.learners.acme_adapter import create_linear_variables


@tf.custom_gradient
def einsum_dense(x: tf.Tensor, w: tf.Tensor):
    """``x @ w`` for a ``[batch, in]`` x and ``[in, out]`` w, forward as einsum, gradients as MatMul's."""

    def grad(dy: tf.Tensor):
        return tf.matmul(dy, w, transpose_b=True), tf.matmul(x, dy, transpose_a=True)

    return tf.einsum("bi,io->bo", x, w), grad


class EinsumLinear(snt.Linear):
    """``snt.Linear`` with its forward product through :func:`einsum_dense` (rank-2 inputs; others as Sonnet)."""

    def __call__(self, inputs: tf.Tensor) -> tf.Tensor:
        create_linear_variables(self, inputs)  # Sonnet's private _initialize, through the adapter
        if inputs.shape.rank != 2:
            return super().__call__(inputs)
        outputs = einsum_dense(inputs, self.w)
        if self.with_bias:
            outputs = tf.add(outputs, self.b)
        return outputs


def use_einsum_dense(*modules: snt.Module) -> int:
    """Make every plain ``snt.Linear`` inside ``modules`` an :class:`EinsumLinear`; returns how many.

    Call it before the modules are traced. Subclasses of ``snt.Linear`` (e.g. Acme's ``NearZeroInitializedLinear``
    output layers, small) keep their own class.
    """
    count = 0
    for module in modules:
        for sub in (module, *module.submodules):
            if type(sub) is snt.Linear:
                sub.__class__ = EinsumLinear
                count += 1
    return count
