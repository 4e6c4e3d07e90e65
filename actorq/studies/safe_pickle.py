"""Read the observation statistics of a zoo ``vecnormalize.pkl`` without running a general unpickler.

SB3 saves ``VecNormalize`` with plain ``pickle.dump``: loading it with ``pickle.load`` imports and calls whatever
the file names, so a hostile file runs code. :class:`RestrictedUnpickler` resolves only:

- numpy's array reconstruction (``ndarray``, ``dtype``, ``_reconstruct``, ``scalar``): data, not behaviour;
- a few plain builtins (``complex``, ``set``, ``frozenset``, ``bytearray``, ``OrderedDict``);
- the class names a ``VecNormalize`` pickle legitimately contains (``VecNormalize``, ``RunningMeanStd``, gym /
  gymnasium spaces, numpy RNG constructors), each replaced by an inert :class:`Record` that only stores the
  arguments and state it is given: the real classes are never imported or called.

Every other global (``os.system``, ``builtins.eval``, ``subprocess.Popen``, ...) raises
:class:`UnsafePickleError` before anything is called.
"""

from __future__ import annotations

import collections
import io
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from actorq.errors import UsageError

_NUMPY_GLOBALS: dict[tuple[str, str], Any] = {
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("numpy.core.multiarray", "_reconstruct"): np.core.multiarray._reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): np.core.multiarray._reconstruct,
    ("numpy.core.multiarray", "scalar"): np.core.multiarray.scalar,
    ("numpy._core.multiarray", "scalar"): np.core.multiarray.scalar,
}
_BUILTINS = {"complex": complex, "set": set, "frozenset": frozenset, "bytearray": bytearray}
_PLAIN_GLOBALS = {("collections", "OrderedDict"): collections.OrderedDict}
# Names a VecNormalize pickle contains whose content is read as data (their code never runs).
RECORD_NAMES = {
    "stable_baselines3.common.vec_env.vec_normalize.VecNormalize",
    "stable_baselines3.common.running_mean_std.RunningMeanStd",
    *(f"{pkg}.spaces.{mod}.{cls}" for pkg in ("gym", "gymnasium")
      for mod, cls in (("box", "Box"), ("discrete", "Discrete"), ("multi_discrete", "MultiDiscrete"),
                       ("multi_binary", "MultiBinary"), ("dict", "Dict"))),
    *(f"numpy.random._pickle.{f}" for f in ("__generator_ctor", "__randomstate_ctor", "__bit_generator_ctor")),
}  # fmt: skip


class UnsafePickleError(UsageError, pickle.UnpicklingError):
    """The pickle refers to something outside the allow-list; nothing it names was called."""


class Record:
    """Inert stand-in for an allow-listed class: keeps constructor arguments and pickled state, runs nothing."""

    pickled_name = "?"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs, self.state = args, kwargs, None

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def attrs(self) -> dict[str, Any]:
        """The pickled ``__dict__`` (for ``(dict, slots)`` states, both merged)."""
        st = self.state
        if isinstance(st, tuple) and len(st) == 2:
            return {**(st[0] or {}), **(st[1] or {})}
        return dict(st) if isinstance(st, dict) else {}

    def __repr__(self) -> str:
        return f"Record({self.pickled_name})"


class RestrictedUnpickler(pickle.Unpickler):
    """``pickle.Unpickler`` whose ``find_class`` admits only the allow-list above."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _NUMPY_GLOBALS:
            return _NUMPY_GLOBALS[(module, name)]
        if (module, name) in _PLAIN_GLOBALS:
            return _PLAIN_GLOBALS[(module, name)]
        if module == "builtins" and name in _BUILTINS:
            return _BUILTINS[name]
        full = f"{module}.{name}"
        if full in RECORD_NAMES:
            return type(name, (Record,), {"pickled_name": full})
        raise UnsafePickleError(
            f"refusing to load {full}: only numpy arrays, plain values and VecNormalize statistics are allowed"
        )

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError("refusing a pickle with persistent ids")


def restricted_loads(data: bytes) -> Any:
    """Unpickle ``data`` with :class:`RestrictedUnpickler`."""
    return RestrictedUnpickler(io.BytesIO(data)).load()


@dataclass(frozen=True, eq=False)
class ObsNormalization:
    """Observation normalization of a ``VecNormalize``: ``clip((obs - mean) / sqrt(var + epsilon), +-clip_obs)``."""

    mean: np.ndarray
    """Running mean of the observations seen in training."""
    var: np.ndarray
    """Running variance of the observations seen in training."""
    clip_obs: float
    """Normalized observations are clipped to [-clip_obs, clip_obs]."""
    epsilon: float
    """Added to the variance before the square root."""

    def apply(self, obs: np.ndarray) -> np.ndarray:
        """Normalize like SB3's ``VecNormalize.normalize_obs``."""
        z = (obs - self.mean) / np.sqrt(self.var + self.epsilon)
        return np.clip(z, -self.clip_obs, self.clip_obs).astype(np.float32)


def _number(attrs: dict[str, Any], key: str, path: Path) -> float:
    try:
        return float(attrs[key])
    except (KeyError, TypeError, ValueError):
        raise UnsafePickleError(f"{path}: VecNormalize has no numeric {key!r}") from None


def load_vecnormalize(path: str | Path) -> ObsNormalization | None:
    """Observation statistics of a zoo ``vecnormalize.pkl`` (None when it does not normalize observations).

    Raises:
        UnsafePickleError: the file names anything outside the allow-list, or is not a VecNormalize pickle.
    """
    path = Path(path)
    try:
        obj = restricted_loads(path.read_bytes())
    except UnsafePickleError as e:
        raise UnsafePickleError(f"{path}: {e}") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as e:
        raise UnsafePickleError(
            f"{path}: not a readable VecNormalize pickle ({type(e).__name__}: {e})"
        ) from None
    if not isinstance(obj, Record) or not obj.pickled_name.endswith(".VecNormalize"):
        raise UnsafePickleError(f"{path}: expected a pickled VecNormalize, found {type(obj).__name__}")
    attrs = obj.attrs()
    if not attrs.get("norm_obs", True):
        return None
    rms = attrs.get("obs_rms")
    if not isinstance(rms, Record):
        raise UnsafePickleError(f"{path}: VecNormalize.obs_rms is not a RunningMeanStd (dict observations?)")
    stats = rms.attrs()
    mean, var = stats.get("mean"), stats.get("var")
    if not isinstance(mean, np.ndarray) or not isinstance(var, np.ndarray) or mean.shape != var.shape:
        raise UnsafePickleError(f"{path}: obs_rms.mean/var are not matching arrays")
    if not (np.isfinite(mean).all() and np.isfinite(var).all() and (var >= 0).all()):
        raise UnsafePickleError(f"{path}: obs_rms.mean/var are not finite non-negative statistics")
    return ObsNormalization(
        mean=mean.astype(np.float64),
        var=var.astype(np.float64),
        clip_obs=_number(attrs, "clip_obs", path),
        epsilon=_number(attrs, "epsilon", path),
    )
