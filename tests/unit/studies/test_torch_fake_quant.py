"""actorq.studies.torch_fake_quant: PTQ of every layer, fake-quant parity with the numpy maths, STE."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from actorq.quantize import affine, floats
from actorq.studies import torch_fake_quant as tq


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(4, 8, 3),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(8 * 6 * 6, 16),
        nn.LayerNorm(16),
        nn.Linear(16, 3),
    )


def test_scheme_parse() -> None:
    assert tq.QuantScheme.parse("fp16").precision == "fp16"
    assert tq.QuantScheme.parse("int8").bits == 8
    assert tq.QuantScheme.parse(4).label == "int4"
    with pytest.raises(ValueError):
        tq.QuantScheme.parse("int1")
    with pytest.raises(ValueError):
        tq.QuantScheme.parse("fp8")


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_ptq_quantizes_every_layer_with_numpy_numbers(bits: int) -> None:
    net = _net()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    reports = tq.ptq_quantize_(net, tq.QuantScheme.parse(bits))
    by_name = {r.name: r for r in reports}
    # Both weight layers quantized, the LayerNorm reported (never skipped silently).
    assert by_name["0"].quantized and by_name["3"].quantized and by_name["5"].quantized
    assert not by_name["4.weight"].quantized and "not a Linear/Conv" in by_name["4.weight"].note
    conv_w = before["0.weight"].numpy()
    flat = conv_w.reshape(8, -1)
    expect = affine.fake_quantize(flat, bits, symmetric=True, axis=0).reshape(conv_w.shape)
    np.testing.assert_array_equal(net[0].weight.detach().numpy(), expect)  # per output channel
    lin = before["3.weight"].numpy()
    np.testing.assert_array_equal(
        net[3].weight.detach().numpy(), affine.fake_quantize(lin, bits, symmetric=True)
    )
    np.testing.assert_array_equal(net[3].bias.detach().numpy(), before["3.bias"].numpy())  # bias kept fp32
    assert len(np.unique(net[3].weight.detach().numpy())) <= 2**bits - 1


def test_ptq_fp16_and_per_channel_linear() -> None:
    net = _net()
    w = net[5].weight.detach().numpy().copy()
    tq.ptq_quantize_(net, tq.QuantScheme.parse("fp16"))
    np.testing.assert_array_equal(net[5].weight.detach().numpy(), floats.to_fp16(w).astype(np.float32))
    net = _net()
    tq.ptq_quantize_(net, tq.QuantScheme.parse(4, per_channel_linear=True))
    np.testing.assert_array_equal(net[5].weight.detach().numpy(), affine.fake_quantize(w, 4, axis=0))


@pytest.mark.parametrize("bits", [2, 3, 8, 12])
@pytest.mark.parametrize("axis", [None, 0])
@pytest.mark.parametrize("symmetric", [True, False])
def test_torch_fake_quant_matches_numpy(bits: int, axis: int | None, symmetric: bool) -> None:
    rng = np.random.default_rng(bits)
    for shape in [(16, 4), (8, 3, 5, 5)]:
        w = (rng.standard_normal(shape) * 0.3).astype(np.float32)
        scheme = tq.QuantScheme.parse(bits, symmetric=symmetric)
        np.testing.assert_array_equal(
            tq.fake_quant_weight_torch(torch.from_numpy(w), scheme, axis).numpy(),
            tq.quantize_array(w, scheme, axis),
        )


def test_quant_layer_ste_and_ranges() -> None:
    net = _net()
    params = [id(p) for p in net.parameters()]
    names = tq.wrap_quant_layers(net, tq.QuantScheme.parse(4), act_bits=8)
    assert names == ["0", "3", "5"]
    assert [id(p) for p in net.parameters()] == params  # same Parameter objects: optimizers keep working
    x = torch.randn(5, 4, 8, 8)
    net.train()
    y = net(x)
    y.sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in net.parameters())
    ranges = tq.activation_ranges(net)
    assert set(ranges) == {"0", "3", "5"} and all(lo <= 0 <= hi for lo, hi in ranges.values())
    # The forward used the quantized weights: equal to a PTQ'd copy run with the same activation grid.
    net.eval()
    layer = net[5]
    w = layer.layer.weight.detach().numpy()
    assert torch.equal(
        layer._quantized_weight().detach(), torch.from_numpy(tq.quantize_array(w, layer.weight_scheme))
    )
    assert all(q.quantized_forwards > 0 for _, q in tq.quant_layers(net))
    tq.set_quant_enabled(net, False)
    wrapped_out = net(x)
    assert tq.unwrap_quant_layers(net) == 3
    torch.testing.assert_close(net(x), wrapped_out)  # disabled wrappers == the plain network


def test_fake_quant_activation_clips_gradient() -> None:
    x = torch.tensor([-2.0, 0.1, 0.5, 3.0], requires_grad=True)
    y = tq.fake_quant_activation(x, -1.0, 1.0, 8)
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0, 0.0]
    assert y[0].item() == pytest.approx(-1.0, abs=0.01) and y[3].item() == pytest.approx(1.0, abs=0.01)
