"""Post-training quantization sweeps (QuaRL Table 2 and the sweet-spot figure).

For each precision the policy's fp32 weights are restored, every Linear/Conv weight of the deployed networks
is quantized in place (:func:`actorq.studies.torch_fake_quant.ptq_quantize_`), optionally the input activation
of every layer is fake-quantized with ranges calibrated on recorded observations (the layers that read the
observation at their own width ``obs_bits`` when set: :mod:`actorq.studies.obs_layers`), and the policy is
evaluated deterministically on the same env seeds as its fp32 original. Outputs: ``ptq.csv``, ``ptq.json`` (rows and
the per-layer report), ``ptq_table.md`` and ``sweet_spot.png``.
"""

from __future__ import annotations

import copy
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm

from actorq.progress import TaskProgress
from actorq.studies import envs, obs_layers, plots, zoo
from actorq.studies import torch_fake_quant as tq

logger = logging.getLogger(__name__)

DEFAULT_PRECISIONS = ("fp32", "fp16", "8", "7", "6", "5", "4", "3", "2")


def parse_precisions(spec: str | list[str]) -> list[str]:
    """``"fp32,fp16,8,4"`` -> ``["fp32", "fp16", "8", "4"]`` (validated; fp32 always first)."""
    items = [
        s.strip().lower().removeprefix("int") for s in (spec.split(",") if isinstance(spec, str) else spec)
    ]
    items = [s for s in items if s]
    for s in items:
        tq.QuantScheme.parse(s)
    if "fp32" in items:
        items.remove("fp32")
    return ["fp32", *items]


def relative_error(fp32: float, value: float) -> float:
    """QuaRL's E%: ``100 * (R_fp32 - R_q) / |R_fp32|`` (negative = the quantized policy did better)."""
    if fp32 == 0:
        return 0.0 if value == 0 else float("inf") * np.sign(-value)
    return 100.0 * (fp32 - value) / abs(fp32)


@dataclass
class PtqConfig:
    """Options of one sweep."""

    precisions: list[str] = field(default_factory=lambda: list(DEFAULT_PRECISIONS))
    episodes: int = 100
    seeds: int = 3
    per_channel_linear: bool = False
    quantize_activations: bool = False
    act_bits: int | None = None  # default: the weight bit width (8 for fp16 runs is not used: fp16 acts stay)
    calib_steps: int = 1000
    n_envs: int = 4
    max_episode_steps: int | None = None
    obs_bits: int | None = None
    """Input bit width of the layers that read the observation (:mod:`actorq.studies.obs_layers`) at every
    integer precision, instead of the activation width; calibrated like the other inputs. Needs
    ``quantize_activations``; None quantizes them like every other input."""

    def __post_init__(self) -> None:
        obs_layers.check_obs_bits(self.obs_bits, self.quantize_activations)


def activations_label(act_bits: int | None, obs_bits: int | None = None) -> str:
    """A row's ``activations`` column: ``fp32``, ``uint4``, or ``uint4 (obs uint8)`` when the observation
    layers' inputs have their own width (no comma: the value goes into ``ptq.csv`` as it is)."""
    if not act_bits:
        return "fp32"
    return f"uint{act_bits}" + (f" (obs uint{obs_bits})" if obs_bits is not None else "")


def quantize_policy(
    model: BaseAlgorithm,
    scheme: tq.QuantScheme,
    act_bits: int | None = None,
    calib_obs: np.ndarray | None = None,
    obs_bits: int | None = None,
) -> dict[str, Any]:
    """Quantize the deployed networks of ``model`` in place; return the layer report.

    Args:
        model: SB3 model (modified in place; keep a copy of its state to undo).
        scheme: Weight scheme.
        act_bits: Quantize every layer's input activation to this many bits (needs ``calib_obs``).
        calib_obs: Recorded observations for min/max activation calibration.
        obs_bits: Bit width of the inputs of the layers that read the observation
            (:func:`actorq.studies.obs_layers.observation_layers`, found on ``calib_obs``) instead of
            ``act_bits`` (needs ``act_bits``).

    Returns:
        ``{"layers": [...], "not_deployed": [...], "activation_ranges": {...}, "activation_bits": {...}}``:
        ``activation_bits`` maps each layer whose input is quantized to its bit width.
    """
    obs_layers.check_obs_bits(obs_bits, act_bits is not None)
    layers: list[dict] = []
    for name, mod in zoo.deployed_modules(model).items():
        layers += [r.to_dict() for r in tq.ptq_quantize_(mod, scheme, prefix=f"{name}.")]
    not_deployed = [
        {"name": name, "n_params": sum(p.numel() for p in mod.parameters()), "note": "training only; fp32"}
        for name, mod in zoo.training_only_modules(model).items()
    ]
    ranges: dict[str, tuple[float, float]] = {}
    bits: dict[str, int] = {}
    if act_bits is not None:
        if calib_obs is None:
            raise ValueError("activation quantization needs calibration observations")
        obs_in = {} if obs_bits is None else obs_layers.observation_layers(model, calib_obs)
        for name, mod in zoo.deployed_modules(model).items():
            wider = dict.fromkeys(obs_in.get(name, []), obs_bits)
            tq.wrap_quant_layers(mod, weight_scheme=None, act_bits=act_bits, act_bits_for=wider)
            tq.set_calibrating(mod, True)
        model.policy.set_training_mode(False)
        for i in range(0, len(calib_obs), 256):
            zoo.forward_modules(model, calib_obs[i : i + 256], zoo.deployed_modules(model))
        for name, mod in zoo.deployed_modules(model).items():
            tq.set_calibrating(mod, False)
            ranges.update({f"{name}.{k}": v for k, v in tq.activation_ranges(mod).items()})
            bits.update(
                {f"{name}.{k}": q.act_bits for k, q in tq.quant_layers(mod) if q.act_bits is not None}
            )
        missing = [k for k, (lo, hi) in ranges.items() if not np.isfinite([lo, hi]).all()]
        if missing:
            raise RuntimeError(f"calibration never reached layers {missing}")
    return {
        "layers": layers,
        "not_deployed": not_deployed,
        "activation_ranges": ranges,
        "activation_bits": bits,
    }


def unquantize_policy(model: BaseAlgorithm, state: dict[str, torch.Tensor]) -> None:
    """Remove activation wrappers and restore the saved fp32 state."""
    for mod in zoo.deployed_modules(model).values():
        tq.unwrap_quant_layers(mod)
    model.policy.load_state_dict(state)


def run_ptq(
    model: BaseAlgorithm,
    env_id: str | envs.EnvSpec,
    cfg: PtqConfig,
    out: str | Path | None = None,
    title: str = "",
) -> dict[str, Any]:
    """Sweep the precisions of ``cfg`` over ``model`` and (optionally) write the outputs to ``out``.

    Returns:
        ``{"rows": [...], "layers": {precision: report}, "config": ...}``; each row has precision,
        mean/std over all episodes, per-seed means, E% vs fp32.
    """
    precisions = parse_precisions(cfg.precisions)
    fp32_state = copy.deepcopy(model.policy.state_dict())
    calib = None
    if cfg.quantize_activations:
        calib = envs.record_observations(
            model, env_id, cfg.calib_steps, seed=7, max_episode_steps=cfg.max_episode_steps
        )
    rows: list[dict[str, Any]] = []
    layer_reports: dict[str, Any] = {}
    with TaskProgress(f"PTQ {envs.env_label(env_id)}", len(precisions) * cfg.seeds) as progress:
        for prec in precisions:
            rows.append(_ptq_row(model, env_id, cfg, prec, calib, fp32_state, layer_reports, progress))
    return _ptq_result(rows, layer_reports, env_id, cfg, precisions, out, title)


def _ptq_row(
    model, env_id, cfg: PtqConfig, prec: str, calib, fp32_state, layer_reports, progress
) -> dict[str, Any]:
    """One precision of :func:`run_ptq`: quantize, evaluate every seed, restore fp32; its row."""
    scheme = tq.QuantScheme.parse(prec, per_channel_linear=cfg.per_channel_linear)
    act_bits = None
    if cfg.quantize_activations and scheme.precision == "int":
        act_bits = cfg.act_bits or scheme.bits
    obs_bits = cfg.obs_bits if act_bits else None
    report = quantize_policy(model, scheme, act_bits=act_bits, calib_obs=calib, obs_bits=obs_bits)
    layer_reports[scheme.label] = report
    per_seed = []
    episodes = []
    for s in range(cfg.seeds):
        progress.start(f"{scheme.label} seed {s}")
        r = envs.evaluate(
            model, env_id, cfg.episodes, seed=envs.eval_seed(s), n_envs=cfg.n_envs,
            max_episode_steps=cfg.max_episode_steps,
        )  # fmt: skip
        per_seed.append(float(r.mean()))
        episodes.append(r)
        progress.advance()
    allr = np.concatenate(episodes)
    logger.info("PTQ %s %s: %.1f +/- %.1f", envs.env_label(env_id), scheme.label, allr.mean(), allr.std())
    unquantize_policy(model, fp32_state)
    return {
        "precision": scheme.label,
        "bits": scheme.bits,
        "activations": activations_label(act_bits, obs_bits),
        "mean": float(allr.mean()),
        "std": float(allr.std()),
        "seed_means": per_seed,
        "seed_std": float(np.std(per_seed)),
        "episodes": int(allr.size),
        "layers_quantized": sum(1 for x in report["layers"] if x["quantized"]),
        "layers_total": len(report["layers"]),
    }


def _ptq_result(rows, layer_reports, env_id, cfg: PtqConfig, precisions, out, title: str) -> dict[str, Any]:
    """:func:`run_ptq`'s result from its rows (E% against the fp32 row), written to ``out`` when given."""
    base = rows[0]["mean"]
    for row in rows:
        row["E%"] = relative_error(base, row["mean"])
    result = {
        "title": title or envs.env_label(env_id),
        "env_id": envs.env_label(env_id),
        "config": {**cfg.__dict__, "precisions": precisions},
        "rows": rows,
        "layers": layer_reports,
    }
    if out is not None:
        write_outputs(result, Path(out))
    return result


def table_markdown(result: dict[str, Any]) -> str:
    """QuaRL Table 2 style: one line per precision with reward and relative error."""
    lines = [
        f"PTQ: {result['title']} ({result['rows'][0]['episodes']} episodes = "
        f"{result['config']['seeds']} seeds x {result['config']['episodes']})",
        "",
        "| precision | activations | reward mean | reward std | seed std | E% vs fp32 | layers quantized |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['precision']} | {r['activations']} | {r['mean']:.1f} | {r['std']:.1f} | {r['seed_std']:.1f} | "
            f"{r['E%']:.2f} | {r['layers_quantized']}/{r['layers_total']} |"
        )
    return "\n".join(lines) + "\n"


def layers_markdown(result: dict[str, Any], precision: str | None = None) -> str:
    """Per-layer report of one precision (default: the lowest integer width of the sweep)."""
    labels = list(result["layers"])
    precision = precision or labels[-1]
    rep = result["layers"][precision]
    lines = [
        f"Layers at {precision}:",
        "",
        "| layer | type | shape | quantized | scheme | weight MSE | changed | bias |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for x in rep["layers"]:
        lines.append(
            f"| {x['name']} | {x['kind']} | {'x'.join(map(str, x['shape']))} | {x['quantized']} | {x['scheme']} | "
            f"{x['weight_mse']:.3g} | {100 * x['changed_fraction']:.0f}% | {x['note'] or x['bias']} |"
        )
    for x in rep["not_deployed"]:
        lines.append(
            f"| {x['name']} | (not deployed) | {x['n_params']} params | False | fp32 | | | {x['note']} |"
        )
    return "\n".join(lines) + "\n"


def write_outputs(result: dict[str, Any], out: Path) -> None:
    """Write ``ptq.json``, ``ptq.csv``, ``ptq_table.md`` and ``sweet_spot.png`` under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "ptq.json").write_text(json.dumps(result, indent=2))
    cols = [
        "precision",
        "bits",
        "activations",
        "mean",
        "std",
        "seed_std",
        "E%",
        "episodes",
        "layers_quantized",
    ]
    with open(out / "ptq.csv", "w") as f:
        f.write(",".join(cols + ["seed_means"]) + "\n")
        for r in result["rows"]:
            vals = [f"{r[c]:.4f}" if isinstance(r[c], float) else str(r[c]) for c in cols]
            f.write(",".join(vals + [";".join(f"{v:.3f}" for v in r["seed_means"])]) + "\n")
    (out / "ptq_table.md").write_text(table_markdown(result) + "\n" + layers_markdown(result))
    plots.sweet_spot(result, out / "sweet_spot.png")
