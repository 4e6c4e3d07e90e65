"""PyTorch fake quantization for the QuaRL studies: post-training quantization of every weight layer and
fake-quant modules.

It lives with its only users, the studies (PTQ, QAT, weight plots); :mod:`actorq.quantize` stays pure numpy. The
numbers always come from the numpy
maths in :mod:`actorq.quantize.affine` / :mod:`actorq.quantize.floats`, so a weight quantized here is
bit-for-bit the weight the rest of ActorQ would produce for the same scheme.

* :mod:`.scheme`: :class:`QuantScheme` (precision, bits, granularity) and :func:`quantize_array`.
* :mod:`.ptq`: :func:`ptq_quantize_`, post-training quantization of every Linear/Conv, one
  :class:`LayerReport` per parameterised module.
* :mod:`.fake_quant`: :class:`QuantLayer` and its helpers, fake quantization with a straight-through
  estimator for QAT and activation PTQ.
"""

from actorq.studies.torch_fake_quant.fake_quant import (
    QuantLayer,
    activation_ranges,
    fake_quant_activation,
    fake_quant_weight_torch,
    quant_layers,
    set_calibrating,
    set_quant_enabled,
    set_ranges_frozen,
    unwrap_quant_layers,
    wrap_quant_layers,
)
from actorq.studies.torch_fake_quant.ptq import LayerReport, ptq_quantize_
from actorq.studies.torch_fake_quant.scheme import (
    FLOAT_PRECISIONS,
    QUANT_LAYER_TYPES,
    QuantScheme,
    quantize_array,
    to_numpy,
    weight_qparams,
)

__all__ = [
    "FLOAT_PRECISIONS",
    "QUANT_LAYER_TYPES",
    "LayerReport",
    "QuantLayer",
    "QuantScheme",
    "activation_ranges",
    "fake_quant_activation",
    "fake_quant_weight_torch",
    "ptq_quantize_",
    "quant_layers",
    "quantize_array",
    "set_calibrating",
    "set_quant_enabled",
    "set_ranges_frozen",
    "to_numpy",
    "unwrap_quant_layers",
    "weight_qparams",
    "wrap_quant_layers",
]
