"""ActorQ: quantized actors for distributed reinforcement learning, and the QuaRL quantization study toolkit."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

__version__ = "0.1.0"


class _GymAsGymnasium(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import gym`` (and ``gym.<sub>``) gives gymnasium's modules where the unmaintained ``gym`` is not installed.

    Acme 0.4's TF networks import ``acme.wrappers``, whose Gym adapter imports ``gym`` for its annotations; ActorQ
    never uses that adapter, and gymnasium is the maintained drop-in replacement with the same names. The finder is
    last on ``sys.meta_path``, so an installed ``gym`` is always found first and nothing changes for it.
    """

    def find_spec(self, name, path=None, target=None):
        if name != "gym" and not name.startswith("gym."):
            return None
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec):
        return importlib.import_module("gymnasium" + spec.name[len("gym") :])

    def exec_module(self, module) -> None:
        """Nothing to run: the module is gymnasium's, already imported."""


if not any(isinstance(f, _GymAsGymnasium) for f in sys.meta_path):
    sys.meta_path.append(_GymAsGymnasium())
