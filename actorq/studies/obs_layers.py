"""The layers that read a policy's observation, which PTQ and QAT may keep at a wider activation bit width.

One per-tensor range over the first layer's input serves every observation component alike: the zoo's DDPG
MountainCarContinuous actor sees inputs in [-0.94, 0.45] while its velocity spans [-0.07, 0.07], so at 5 bits the
velocity gets ~3 levels and the agent fails; the same agent with only that input at 8 bits keeps its fp32 return at
4 bits. Integer deployments commonly keep the network's input at 8 bits for this reason (``obs_bits``).

The layers are found by measurement, not by name: the deployed networks run on a batch of observations, and a
layer reads the observation when its input equals the policy's preprocessed observation (SB3's ``preprocess_obs``:
one-hot for discrete spaces, /255 for images) flattened per sample. So DDPG/TD3 ``actor.mu.0``, SAC
``actor.latent_pi.0``, DQN ``q_net.q_net.0``, the first layers of PPO/A2C's ``mlp_extractor.policy_net`` and
``value_net`` (or ``action_net``/``value_net`` without hidden layers), and an Atari policy's first convolution all
come out of one rule.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.preprocessing import preprocess_obs
from torch import nn

from actorq.quantize.affine import MAX_BITS, MIN_BITS
from actorq.studies import torch_fake_quant as tq
from actorq.studies import zoo

SEARCH_BATCH = 256
"""At most this many observations (the first ones given) run through the networks to find the layers: enough
varied samples that no hidden activation equals the observation by chance, few enough to cost one batch."""


def check_obs_bits(obs_bits: int | None, act_quantized: bool | None = None) -> None:
    """The one rule for an ``obs_bits`` option: None, or a bit width the quantizers support, used together with
    activation quantization (``act_quantized``: whether the other layers' inputs are quantized; None: not known
    yet, only the width is checked).

    Raises:
        ValueError: Saying what is wrong and how to fix it.
    """
    if obs_bits is None:
        return
    if isinstance(obs_bits, bool) or not isinstance(obs_bits, int) or not MIN_BITS <= obs_bits <= MAX_BITS:
        raise ValueError(f"obs_bits must be None or an integer in [{MIN_BITS}, {MAX_BITS}], got {obs_bits!r}")
    if act_quantized is False:
        raise ValueError(
            f"obs_bits={obs_bits} sets the bit width of the observation layers' quantized input, but activations "
            "are not quantized: turn activation quantization on (act_bits) or leave obs_bits unset"
        )


def observation_layers(
    model: BaseAlgorithm, obs: np.ndarray, modules: dict[str, nn.Module] | None = None
) -> dict[str, list[str]]:
    """The Linear/Conv layers of ``modules`` whose input is the policy's observation, found by running them.

    The forwards run in eval mode under a forked torch RNG, so they change no weight, no activation range, no
    module's training mode and no random draw of what follows (a fine-tune and its control stay on one RNG
    stream).

    Args:
        model: SB3 model whose policy preprocesses the observations.
        obs: Observations in the env's layout, e.g. the calibration ones (the first :data:`SEARCH_BATCH` are
            used; they should vary: a layer is matched by equality, so constant features could match by chance).
        modules: Networks to search (default :func:`actorq.studies.zoo.deployed_modules`; QAT passes
            :func:`actorq.studies.zoo.qat_modules`, targets included). Already wrapped layers
            (:class:`~actorq.studies.torch_fake_quant.QuantLayer`) are found under their wrapper's name.

    Returns:
        For each network, the matching layers' names relative to it, in module order (the names
        :func:`~actorq.studies.torch_fake_quant.wrap_quant_layers` returns).

    Raises:
        ValueError: If a network has no layer that reads the observation (a features extractor that transforms
            it first, or a dict observation space).
    """
    modules = zoo.deployed_modules(model) if modules is None else modules
    pol = model.policy
    obs = obs[:SEARCH_BATCH]
    x = pol.obs_to_tensor(obs)[0]
    if not isinstance(x, torch.Tensor):
        raise ValueError("obs_bits supports Box/Discrete observations only, not dict observation spaces")
    ref = preprocess_obs(x, pol.observation_space, normalize_images=pol.normalize_images)
    ref = ref.reshape(len(ref), -1)
    hits: set[tuple[str, str]] = set()

    def hook_for(key: str, name: str) -> Callable[[nn.Module, tuple], None]:
        def hook(_m: nn.Module, args: tuple) -> None:
            t = args[0]
            same_size = t.shape[0] == ref.shape[0] and t[0].numel() == ref.shape[1]
            if same_size and torch.equal(t.reshape(len(t), -1).to(ref.dtype), ref):
                hits.add((key, name))

        return hook

    layer_types = (tq.QuantLayer, *tq.QUANT_LAYER_TYPES)  # a QuantLayer never calls its inner layer
    order = {
        key: [n for n, sub in mod.named_modules() if n and isinstance(sub, layer_types)]
        for key, mod in modules.items()
    }
    hooks = [
        mod.get_submodule(n).register_forward_pre_hook(hook_for(key, n))
        for key, mod in modules.items()
        for n in order[key]
    ]
    # Every submodule's own flag: fresh wrappers sit in training mode inside an eval-mode target network.
    modes = {sub: sub.training for mod in modules.values() for sub in mod.modules()}
    for mod in modules.values():
        mod.eval()
    try:
        with torch.random.fork_rng(devices=[]):
            zoo.forward_modules(model, obs, modules)
    finally:
        for h in hooks:
            h.remove()
        for sub, mode in modes.items():
            sub.training = mode
    found = {key: [n for n in names if (key, n) in hits] for key, names in order.items()}
    empty = [key for key, names in found.items() if not names]
    if empty:
        raise ValueError(
            f"no Linear/Conv layer of {', '.join(empty)} takes the observation ({ref.shape[1]} preprocessed "
            "features) as its input, so there is no layer for obs_bits: its features extractor transforms the "
            "observation first; leave obs_bits unset for this policy"
        )
    return found
