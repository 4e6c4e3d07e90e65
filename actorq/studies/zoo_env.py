"""RL Baselines3 Zoo layouts: find a model's files, read its ``config.yml`` safely, map its env id, wrap the env.

A zoo agent directory (``rl-trained-agents/<algo>/<env>_1/``) holds ``<env>.zip``, optionally ``config.yml``
(hyperparameters, ``policy_kwargs`` as Python source text, ``env_wrapper``, ``normalize``) and
``vecnormalize.pkl`` (either beside the zip or in a ``<env>/`` subfolder), and ``evaluations.npz`` (the zoo's
periodic evaluations). Nothing here evaluates Python source or unpickles: ``config.yml`` is read with a YAML
SafeLoader that only adds the zoo's ``OrderedDict`` tag, ``policy_kwargs`` text is parsed as literals plus
dotted activation names, and ``vecnormalize.pkl`` goes through :mod:`actorq.studies.safe_pickle`.
"""

from __future__ import annotations

import ast
import difflib
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import yaml
from gymnasium import spaces
from gymnasium.envs.registration import parse_env_id

from actorq.errors import UsageError
from actorq.studies import safe_pickle
from actorq.studies.envs import EnvSpec

logger = logging.getLogger(__name__)

ZOO_ALGOS = ("a2c", "ppo", "dqn", "qrdqn", "ddpg", "td3", "sac")
# Zoo wrapper names (old zoo ``utils.wrappers``, rl_zoo3, sb3-contrib) that this loader can apply.
TIME_FEATURE_WRAPPERS = {
    "sb3_contrib.common.wrappers.TimeFeatureWrapper",
    "utils.wrappers.TimeFeatureWrapper",
    "rl_zoo3.wrappers.TimeFeatureWrapper",
}
# config.yml keys that change what the policy observes and that this loader does not reproduce.
UNSUPPORTED_CONFIG_KEYS = ("frame_stack",)


class ZooConfigError(UsageError):
    """A zoo file or setting that cannot be used safely or reproduced; the message says which and why."""


@dataclass
class ZooFiles:
    """Files of one agent."""

    zip_path: Path
    config: Path | None
    vecnormalize: Path | None
    evaluations: Path | None
    algo_hint: str | None
    env_hint: str | None


def locate(path: str | Path) -> ZooFiles:
    """Find the zip and its zoo companions from a ``.zip`` or a directory holding exactly one."""
    path = Path(path)
    if path.is_dir():
        zips = sorted(path.glob("*.zip"))
        if (path / "model.zip").exists():
            zips = [path / "model.zip"]
        if len(zips) != 1:
            found = ", ".join(z.name for z in zips) or "none"
            raise FileNotFoundError(f"{path} must hold exactly one SB3 .zip (found: {found})")
        zip_path = zips[0]
    elif path.suffix == ".zip" and path.exists():
        zip_path = path
    else:
        raise FileNotFoundError(f"no SB3 policy at {path} (give a .zip or a directory holding one)")
    folder = zip_path.parent
    env_hint = zip_path.stem if re.fullmatch(r"[\w.:/-]+-v\d+", zip_path.stem) else None
    if env_hint is None and re.fullmatch(r"[\w.-]+-v\d+(_\d+)?", folder.name):
        env_hint = re.sub(r"_\d+$", "", folder.name)

    def find(name: str) -> Path | None:
        # The zoo keeps config.yml / vecnormalize.pkl either beside the zip or in an <env>/ subfolder.
        cands = [folder / name] + ([folder / env_hint / name] if env_hint else [])
        return next((c for c in cands if c.is_file()), None)

    algo_hint = folder.parent.name.lower() if folder.parent.name.lower() in ZOO_ALGOS else None
    return ZooFiles(
        zip_path, find("config.yml"), find("vecnormalize.pkl"), find("evaluations.npz"), algo_hint, env_hint
    )


class _ZooYamlLoader(yaml.SafeLoader):
    """SafeLoader plus the one Python tag the zoo writes (``!!python/object/apply:collections.OrderedDict``)."""


def _ordered_dict(loader: yaml.SafeLoader, node: yaml.Node) -> dict[str, Any]:
    args = loader.construct_sequence(node, deep=True)
    if len(args) != 1 or not all(isinstance(p, list) and len(p) == 2 for p in args[0]):
        raise ZooConfigError("config.yml: the OrderedDict tag does not hold a list of key/value pairs")
    return {str(k): v for k, v in args[0]}


_ZooYamlLoader.add_constructor("tag:yaml.org,2002:python/object/apply:collections.OrderedDict", _ordered_dict)


def read_config(path: Path) -> dict[str, Any]:
    """The zoo's ``config.yml`` as a dict (any other Python tag is refused)."""
    try:
        cfg = yaml.load(path.read_text(), Loader=_ZooYamlLoader)  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as e:
        raise ZooConfigError(f"{path}: not a plain zoo config ({str(e).splitlines()[0]})") from None
    if not isinstance(cfg, dict):
        raise ZooConfigError(f"{path}: expected a mapping of hyperparameters")
    return cfg


def _literal(node: ast.AST, field: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(e, field) for e in node.elts]
    if isinstance(node, ast.Dict) and all(k is not None for k in node.keys):
        return {_literal(k, field): _literal(v, field) for k, v in zip(node.keys, node.values, strict=True)}
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "dict"
        and not node.args
    ):
        return {kw.arg: _literal(kw.value, field) for kw in node.keywords if kw.arg}
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
    ):
        return -node.operand.value
    if isinstance(node, (ast.Name, ast.Attribute)):
        return ast.unparse(node)  # a dotted name such as nn.ReLU, resolved later against an allow-list
    raise ZooConfigError(f"config.yml {field}: cannot read {ast.unparse(node)!r} without running it")


def config_policy_kwargs(cfg: dict[str, Any]) -> dict[str, Any] | None:
    """``policy_kwargs`` of a zoo config: a dict, or Python source text parsed as literals (never evaluated)."""
    raw = cfg.get("policy_kwargs")
    if raw is None or isinstance(raw, dict):
        return raw
    try:
        tree = ast.parse(str(raw), mode="eval")
    except SyntaxError:
        raise ZooConfigError(f"config.yml policy_kwargs is not readable: {raw!r}") from None
    val = _literal(tree.body, "policy_kwargs")
    if not isinstance(val, dict):
        raise ZooConfigError(f"config.yml policy_kwargs is not a dict: {raw!r}")
    return val


def _time_feature_wrapper(kwargs: dict[str, Any]) -> Any:
    try:
        from sb3_contrib.common.wrappers import TimeFeatureWrapper
    except ImportError:
        raise ZooConfigError(
            "config.yml env_wrapper TimeFeatureWrapper needs the 'sb3-contrib' package, which is not installed: "
            "without the time feature the policy would see a shorter observation than it was trained on"
        ) from None
    return lambda env: TimeFeatureWrapper(env, **kwargs)


def wrapper_from_config(cfg: dict[str, Any]) -> Any:
    """A callable applying the zoo ``env_wrapper`` (TimeFeatureWrapper only), or None; other wrappers refused."""
    for key in UNSUPPORTED_CONFIG_KEYS:
        if cfg.get(key):
            raise ZooConfigError(
                f"config.yml {key}={cfg[key]!r} changes the observations and is not supported"
            )
    raw = cfg.get("env_wrapper")
    if not raw:
        return None
    items = raw if isinstance(raw, list) else [raw]
    if len(items) != 1:
        raise ZooConfigError(f"config.yml env_wrapper {raw!r}: only a single TimeFeatureWrapper is supported")
    item = items[0]
    name, kwargs = next(iter(item.items())) if isinstance(item, dict) else (item, None)
    if name not in TIME_FEATURE_WRAPPERS:
        raise ZooConfigError(
            f"config.yml env_wrapper {name!r} is not supported (supported: {sorted(TIME_FEATURE_WRAPPERS)})"
        )
    return _time_feature_wrapper(dict(kwargs or {}))


def _spaces_match(a: spaces.Space, b: spaces.Space) -> bool:
    if isinstance(a, spaces.Discrete) and isinstance(b, spaces.Discrete):
        return int(a.n) == int(b.n)
    if isinstance(a, spaces.Box) and isinstance(b, spaces.Box):
        return (
            a.shape == b.shape
            and np.allclose(a.low, b.low, rtol=1e-5, equal_nan=True)
            and np.allclose(a.high, b.high, rtol=1e-5, equal_nan=True)
        )
    return False


def _env_spaces(env_id: str, env_kwargs: dict[str, Any]) -> tuple[spaces.Space, spaces.Space] | str:
    """The spaces of ``env_id``, or why it cannot be built here."""
    try:
        env = gym.make(env_id, **env_kwargs)
    except Exception as e:  # noqa: BLE001 - gymnasium raises ImportError/DependencyNotInstalled/Error subclasses
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()


def map_env_id(
    requested: str,
    obs_space: spaces.Space | None = None,
    act_space: spaces.Space | None = None,
    env_kwargs: dict[str, Any] | None = None,
    wrapped_obs_extra: int = 0,
) -> str:
    """The installed gymnasium id to run a policy trained on ``requested`` with.

    The id itself when it can be built here with the policy's spaces; otherwise the nearest newer version of
    the same env whose observation and action spaces are the policy's.

    Args:
        requested: Env id the policy was trained on (``Hopper-v3``).
        obs_space: The policy's observation space (checked when given).
        act_space: The policy's action space (checked when given).
        env_kwargs: ``gym.make`` keyword arguments.
        wrapped_obs_extra: Extra observation entries added by a wrapper (TimeFeature: 1) to discount.

    Raises:
        ZooConfigError: no installed env fits; the message lists what exists.
    """
    env_kwargs = env_kwargs or {}
    registry = gym.envs.registry
    ns, name, version = parse_env_id(requested)
    same = sorted(
        (v, k)
        for k, s in registry.items()
        if (s.namespace, s.name) == (ns, name) and (v := s.version) is not None
    )
    if requested not in registry and not same:
        close = difflib.get_close_matches(requested, list(registry), n=8, cutoff=0.5)
        raise ZooConfigError(f"no environment {requested!r} is registered; similar ids: {close or 'none'}")
    # Only newer versions stand in for an id (v3 -> v4 -> v5): an older one predates what the policy saw.
    order = [requested] if requested in registry else []
    order += [k for v, k in same if version is None or v > version]
    if not order:
        raise ZooConfigError(
            f"no environment {requested!r} or newer version is registered; installed versions: {[k for _, k in same]}"
        )
    tried = []
    for env_id in order:
        got = _env_spaces(env_id, env_kwargs)
        if isinstance(got, str):
            tried.append(f"{env_id} ({got})")
            continue
        obs, act = got
        # Observation bounds are not used by an MLP policy and changed between gym releases (CartPole's
        # 3.4e38 became inf): the shape is what must agree. Action bounds scale the actions: all must agree.
        want = (obs.shape[0] + wrapped_obs_extra,) if isinstance(obs, spaces.Box) else None
        obs_ok = obs_space is None or (
            isinstance(obs_space, spaces.Box) and want == obs_space.shape
            if wrapped_obs_extra or isinstance(obs_space, spaces.Box)
            else _spaces_match(obs_space, obs)
        )
        if obs_ok and (act_space is None or _spaces_match(act_space, act)):
            if env_id != requested:
                logger.warning(
                    "%s is not available here; running %s (same observation/action spaces)", requested, env_id
                )
            return env_id
        tried.append(f"{env_id} (spaces {obs} / {act} differ from the policy's {obs_space} / {act_space})")
    raise ZooConfigError(
        f"no installed environment can run a policy trained on {requested!r}: tried {'; '.join(tried)}"
    )


def env_spec(
    requested: str,
    files: ZooFiles,
    cfg: dict[str, Any] | None,
    obs_space: spaces.Space | None,
    act_space: spaces.Space | None,
) -> EnvSpec:
    """The env to evaluate a zoo policy on: mapped id, zoo wrapper, frozen observation normalization."""
    cfg = cfg or {}
    wrapper = wrapper_from_config(cfg)
    env_kwargs = cfg.get("env_kwargs") or {}
    if not isinstance(env_kwargs, dict):
        raise ZooConfigError(f"config.yml env_kwargs must be a mapping, got {env_kwargs!r}")
    if cfg.get("normalize") and files.vecnormalize is None:
        raise ZooConfigError(
            f"config.yml sets normalize={cfg['normalize']!r} but there is no vecnormalize.pkl next to {files.zip_path}"
        )
    obs_norm = safe_pickle.load_vecnormalize(files.vecnormalize) if files.vecnormalize else None
    env_id = map_env_id(requested, obs_space, act_space, env_kwargs, wrapped_obs_extra=1 if wrapper else 0)
    return EnvSpec(
        env_id=env_id,
        source_id=requested if env_id != requested else None,
        wrapper=wrapper,
        env_kwargs=dict(env_kwargs),
        obs_norm=obs_norm,
    )
