"""Reading a Stable-Baselines3 ``model.zip`` as plain data: its ``data`` JSON, the weights-only ``policy.pth``,
and the spaces rebuilt from the readable attributes SB3 writes beside each pickled field. Nothing is unpickled:
:mod:`actorq.studies.sb3_zip` rebuilds the model from what this reads.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from actorq.errors import UsageError


class ZipLoadError(UsageError):
    """The zip cannot be loaded safely or is not a supported MlpPolicy model; the message says why."""


def read_zip(path: Path) -> tuple[dict[str, Any], dict[str, torch.Tensor], str]:
    """The ``data`` JSON, the ``policy.pth`` state dict (weights only) and the SB3 version string."""
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise ZipLoadError(f"{path} is not a readable zip file ({e})") from None
    with zf:
        names = set(zf.namelist())
        for member in ("data", "policy.pth"):
            if member not in names:
                raise ZipLoadError(f"{path} has no {member!r} member: not a Stable-Baselines3 model zip")
        try:
            data = json.loads(zf.read("data"))
        except json.JSONDecodeError as e:
            raise ZipLoadError(f"{path}: 'data' is not JSON ({e})") from None
        try:
            state = torch.load(io.BytesIO(zf.read("policy.pth")), map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - torch raises UnpicklingError/RuntimeError for refused content
            raise ZipLoadError(f"{path}: policy.pth is not a plain tensor state dict ({e})") from None
        version = (
            zf.read("_stable_baselines3_version").decode().strip()
            if "_stable_baselines3_version" in names
            else "?"
        )
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ZipLoadError(f"{path}: policy.pth is not a state dict of tensors")
    return data, state, version


def plain_fields(value: Any) -> dict[str, Any]:
    """The readable attributes of a JSON field (SB3 writes them beside ``:serialized:``)."""
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if not k.startswith(":")}


def parse_array(text: Any, shape: tuple[int, ...], field: str) -> np.ndarray:
    """An array printed by numpy (``'[-1. -1. -8.]'``, ``'-2.0'``) back to numbers of ``shape``."""
    if isinstance(text, (int, float)):
        return np.full(shape, float(text))
    if not isinstance(text, str) or "..." in text:
        raise ZipLoadError(f"field {field} is not stored as a readable array (only in pickled form)")
    try:
        vals = np.array([float(t) for t in text.replace("[", " ").replace("]", " ").split()], np.float64)
    except ValueError:
        raise ZipLoadError(f"field {field} is not a readable array: {text[:80]!r}") from None
    n = int(np.prod(shape))
    if vals.size == 1 and n != 1:
        vals = np.full(n, vals[0])
    if vals.size != n:
        raise ZipLoadError(f"field {field} has {vals.size} values, its shape {shape} needs {n}")
    return vals.reshape(shape)


def _readable(attrs: dict[str, Any], key: str) -> Any:
    value = attrs.get(key)
    if isinstance(value, str) and "..." in value and isinstance(attrs.get(f"{key}_repr"), str):
        return attrs[f"{key}_repr"]
    return value


def parse_space(data: dict[str, Any], name: str) -> spaces.Space:
    """Rebuild ``observation_space``/``action_space`` (Box or Discrete) from its readable attributes."""
    raw = data.get(name)
    if raw is None:
        raise ZipLoadError(f"the zip's data has no {name!r} field")
    kind = str(raw.get(":type:", "")) if isinstance(raw, dict) else ""
    attrs = plain_fields(raw)
    if kind.endswith(".Discrete'>"):
        if "n" not in attrs:
            raise ZipLoadError(f"field {name}.n is only stored in pickled form")
        return spaces.Discrete(int(attrs["n"]), start=int(attrs.get("start", 0)))
    if kind.endswith(".Box'>"):
        shape = attrs.get("_shape", attrs.get("shape"))
        if shape is None or "dtype" not in attrs:
            raise ZipLoadError(f"fields {name}.shape/dtype are only stored in pickled form")
        shape = tuple(int(s) for s in shape)
        dtype = np.dtype(attrs["dtype"])
        # Large arrays (images) are printed with "...": SB3 also writes low_repr/high_repr, a scalar when uniform.
        low = parse_array(_readable(attrs, "low"), shape, f"{name}.low")
        high = parse_array(_readable(attrs, "high"), shape, f"{name}.high")
        return spaces.Box(low.astype(dtype), high.astype(dtype), shape=shape, dtype=dtype)
    raise ZipLoadError(
        f"{name} is {kind or 'missing its type'}: only Box and Discrete spaces (MlpPolicy) are supported"
    )
