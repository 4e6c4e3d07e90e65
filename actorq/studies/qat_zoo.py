"""QAT fine-tuning of pretrained RL Baselines3 Zoo agents as cells of the ``qat-study`` grid (issue 37 item 2).

A zoo agent (one directory :func:`actorq.studies.zoo.load_policy` reads) is one trained policy, so it has no
training seeds of its own. Its cells are written in the pairs' record format, under
``<out>/records/zoo_<algo>_<env>/``, so ``actorq qat-report`` renders them unchanged:

* ``fp32_s<r>.json``: the agent's fp32 return and its PTQ W and W+A at every width
  (:func:`actorq.studies.qat_outcomes.ptq_widths`, ranges calibrated on the same 500 observations for every ``r``),
  evaluated on evaluation seed ``r``. ``r`` is an **evaluation replicate** (``"replicate": "evaluation"``):
  the spread across these records is episode noise only, not the training spread a pair's seeds carry.
* ``qat<b>_s<s>.json``: the agent fine-tuned with fake quantization by the :class:`QatRecipe` with training seed
  ``s``, deployed as integers and evaluated as a pair's QAT cell, on evaluation seed ``s`` (the episodes of
  fp32 replicate ``s``, so the report's paired E% compares like with like).

The agent's weights go into a training model built with the toolkit's hyperparameters for its algorithm and env
(its own architecture and observation pipeline), whose step counter continues the agent's, with no random-action
warm-up (``learning_starts`` 0: the agent acts and updates from the first step); SAC's
learned entropy coefficient is restored from the zip (a fresh model would start at 1.0). The replay buffer of an
off-policy agent is not in the zip: the fine-tune refills it from the first step.
"""

from __future__ import annotations

import io
import logging
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from stable_baselines3.common.base_class import BaseAlgorithm

from actorq.progress import TaskProgress
from actorq.studies import envs, qat_finetune, zoo
from actorq.studies import qat_outcomes as qo
from actorq.studies import qat_study as qs
from actorq.studies.policy_stats import action_stats, weight_ranges

logger = logging.getLogger(__name__)

REPLICATE = "evaluation"
"""What the ``seed`` of a zoo agent's fp32 record replicates (its ``replicate`` field)."""


@dataclass(frozen=True)
class ZooAgent:
    """A pretrained agent directory and what its files say it is."""

    path: str
    """The agent directory (or zip) as :func:`actorq.studies.zoo.load_policy` takes it."""
    algo: str
    """SB3 algorithm name read from the agent."""
    env_id: str
    """Env id the agent was trained on (the zoo's, e.g. Hopper-v3; evaluation may run a mapped id)."""

    @property
    def key(self) -> str:
        """The record folder name: ``zoo_<algo>_<env>``."""
        return f"zoo_{self.algo}_{self.env_id}"


def agent(path: str | Path) -> ZooAgent:
    """Read the agent at ``path`` (nothing unpickled); raises what :func:`zoo.load_policy` raises."""
    _, meta = zoo.load_policy(path)
    return ZooAgent(str(path), meta["algo"], str(meta["env_id"]))


def _entropy_coef(zip_path: str | Path) -> torch.Tensor | None:
    """SAC's learned ``log_ent_coef`` from the zip's ``pytorch_variables.pth`` (weights only), or None."""
    with zipfile.ZipFile(zip_path) as zf:
        if "pytorch_variables.pth" not in zf.namelist():
            return None
        found = torch.load(
            io.BytesIO(zf.read("pytorch_variables.pth")), map_location="cpu", weights_only=True
        )
    value = found.get("log_ent_coef") if isinstance(found, dict) else None
    return value if isinstance(value, torch.Tensor) else None


def training_model(path: str | Path, seed: int) -> tuple[BaseAlgorithm, dict[str, Any]]:
    """A seeded training model holding the agent's policy (and SAC's entropy coefficient), ready to fine-tune."""
    loaded, meta = zoo.load_policy(path)
    model = zoo.make_model(meta["algo"], meta["env"], seed=seed, policy_kwargs=loaded.policy_kwargs)
    model.policy.load_state_dict(loaded.policy.state_dict())
    model.num_timesteps = int(meta.get("num_timesteps") or 10**6)
    if hasattr(model, "learning_starts"):
        model.learning_starts = 0  # a trained agent acts from the first step: no random-action warm-up
    log_ent = _entropy_coef(meta["path"]) if getattr(model, "log_ent_coef", None) is not None else None
    if log_ent is not None:
        with torch.no_grad():
            model.log_ent_coef.copy_(log_ent.reshape(model.log_ent_coef.shape))
        logger.info("%s: entropy coefficient %.4g restored from the zip", path, float(log_ent.exp().item()))
    return model, meta


def _head(ag: ZooAgent, meta: dict[str, Any], steps: int, seed: int, episodes: int) -> dict[str, Any]:
    return {
        "pair": ag.key, "algo": ag.algo, "env_id": ag.env_id, "env_run": envs.env_label(meta["env"]),
        "agent": ag.path, "steps": steps, "seed": seed, "episodes": episodes,
    }  # fmt: skip


def run_fp32_replicate(ag: ZooAgent, replicate: int, bits: list[int], episodes: int) -> dict[str, Any]:
    """The agent's fp32 return and PTQ W / W+A at every width of ``bits``, on evaluation seed ``replicate``."""
    model, meta = zoo.load_policy(ag.path)
    spec = meta["env"]
    fp32 = qo.evaluate(model, spec, episodes, replicate)
    calib = envs.record_observations(model, spec, qo.CALIB_STEPS, seed=qo.CHECK_OBS_SEED)
    res, act_ranges = qo.ptq_widths(model, spec, bits, episodes, calib, replicate)
    steps = int(meta.get("num_timesteps") or 0)
    return {
        "kind": "fp32", **_head(ag, meta, steps, replicate, episodes), "replicate": REPLICATE,
        "train_seconds": 0.0, "curve": [], "fp32": fp32, **res, "weight_ranges": weight_ranges(model),
        "activation_ranges": act_ranges, "action_stats": action_stats(model, calib),
    }  # fmt: skip


def run_qat_cell(
    ag: ZooAgent, bits: int, seed: int, episodes: int, recipe: qat_finetune.QatRecipe | None = None
) -> dict[str, Any]:
    """Fine-tune the agent with fake quantization (training seed ``seed``), deploy it as integers, evaluate."""
    recipe = recipe or qat_finetune.QatRecipe()
    model, meta = training_model(ag.path, seed)
    spec = meta["env"]
    curve = qs.CurveCallback(recipe.finetune_steps)
    model, info = qat_finetune.finetune_qat(model, spec, bits, recipe, callbacks=[curve])
    sched = {k: info[k] for k in qs.FINETUNE_FIELDS}
    return {
        "kind": "qat", **_head(ag, meta, info["finetune_start"], seed, episodes), "replicate": "training",
        "bits": bits, "act_bits": info["act_bits"], **sched, "train_seconds": info["train_seconds"],
        "curve": curve.curve, **qo.qat_outcome(model, spec, episodes, replicate=seed),
        "activation_ranges": info["activation_ranges"],
    }  # fmt: skip


def run_control_cell(
    ag: ZooAgent, seed: int, episodes: int, recipe: qat_finetune.QatRecipe | None = None
) -> dict[str, Any]:
    """The fine-tune control of :func:`run_qat_cell`: the same fine-tune of the agent (training seed ``seed``)
    with ``quantize=False``, evaluated on evaluation seed ``seed`` like the QAT cell of that seed."""
    recipe = recipe or qat_finetune.QatRecipe()
    model, meta = training_model(ag.path, seed)
    spec = meta["env"]
    curve = qs.CurveCallback(recipe.finetune_steps)
    model, info = qat_finetune.finetune_qat(model, spec, 0, recipe, callbacks=[curve], quantize=False)
    return {
        "kind": qo.CONTROL_KIND, **_head(ag, meta, info["finetune_start"], seed, episodes),
        "replicate": "training", **{k: info[k] for k in qs.FINETUNE_FIELDS},
        "train_seconds": info["train_seconds"], "curve": curve.curve,
        **qo.control_outcome(model, spec, episodes, replicate=seed),
    }  # fmt: skip


def _complete(path: Path, ag: ZooAgent, replicate: int, bits: list[int]) -> bool:
    """Add the PTQ widths of ``bits`` an fp32 replicate record lacks (no training: recomputed from the agent)."""

    def load(_missing: list[int]) -> tuple[BaseAlgorithm, envs.EnvSpec]:
        model, meta = zoo.load_policy(ag.path)
        return model, meta["env"]

    return bool(qs.complete_ptq(path, bits, load, replicate))


def run_zoo_grid(
    out: str | Path,
    agents: list[ZooAgent],
    bits: list[int],
    seeds: int = qs.SEEDS,
    episodes: int = qs.EPISODES,
    shard: tuple[int, int] = (0, 1),
    recipe: qat_finetune.QatRecipe | None = None,
) -> list[Path]:
    """Every missing zoo cell of ``shard``, in :func:`qat_study.cells` order (fp32 replicates first, then the
    fine-tune controls, then QAT per width in ``bits`` order, seeds inner); resumable like :func:`qat_study.run_grid`. Returns the records
    written (fp32 records completed with missing widths included)."""
    out = Path(out)
    written = []
    todo = list(qs.shard_cells(qs.cells(agents, bits, seeds), shard))
    done = sum(qs.record_path(out, *cell).exists() for cell in todo)
    with TaskProgress("QAT study zoo cells", len(todo), done=done) as progress:
        for ag, b, seed in todo:
            path = qs.record_path(out, ag, b, seed)
            if path.exists():
                if b is None and _complete(path, ag, seed, bits):
                    written.append(path)
                continue
            progress.start(f"{ag.key} {path.stem}")
            t0 = time.perf_counter()
            if b is None:
                rec = run_fp32_replicate(ag, seed, bits, episodes)
            elif b == qs.CONTROL:
                rec = run_control_cell(ag, seed, episodes, recipe)
            else:
                rec = run_qat_cell(ag, int(b), seed, episodes, recipe)
            rec["cell_seconds"] = round(time.perf_counter() - t0, 1)
            qs.write_record(path, rec)
            written.append(path)
            logger.info("cell %s done in %.0f s", path.relative_to(out), rec["cell_seconds"])
            progress.advance()
    return written
