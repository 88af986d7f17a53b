"""entmachin: reinforcement learning over entity observations.

Observations are variable-sized sets of typed entities and every value between the environment
and the network is ragged. The package is layered, each layer importing only those below it::

    run          the ``entmachin`` command: YAML runs, tensorboard, checkpoints, eval, play, export,
      |          record, tune, league
      v
    distributed  data-parallel updates across torchrun ranks (torch.distributed collectives)
      |
      v
    frame        A2C, PPO, DQN, DQNPer and BC (behaviour cloning) frames (Machin's keywords),
      |          safe_call, GAE, save / load
      v
    buffer   transitions and replay buffers over ragged data      model   RogueNet, DenseNet, MLPs
      |                                                             |
      v                                                             v
    env      entity-gym-compatible environments, VecEnv / VecObs, worker processes
      |
      v
    ragged   ragged arrays (numpy), RaggedTensor, arrdict

Beside the layers stand ``data`` (datasets of recorded episodes, with pyarrow: ``entmachin record``
writes them, behaviour cloning reads them) and ``deploy`` (an exported policy run with numpy and
onnxruntime); both import ``env`` and ``ragged``'s numpy side, never torch, and no layer below ``run``
imports them.

``docs/architecture.md`` describes the layers, the contracts between them and the path of one
PPO iteration through the files. ``import entmachin`` loads no layer: its exported names, and the
layers (``data`` and ``deploy`` too) as attributes, resolve on first use, so environment worker
processes never load torch through it.

Example:
    >>> import entmachin
    >>> envs = entmachin.EnvList(entmachin.env.examples.MineSweeper, 16, seed=0)
    >>> net = entmachin.RogueNet(envs.obs_space(), envs.action_space())
    >>> ppo = entmachin.PPO(net, net.critic(), torch.optim.Adam, torch.nn.MSELoss())
"""
from __future__ import annotations

import importlib
from typing import Any, List

__version__ = "0.1.0"

# Exported name -> the layer that defines it.
_EXPORTS = {
    "Environment": "env", "ObsSpace": "env", "Observation": "env", "VecObs": "env", "EnvList": "env",
    "ParallelEnvList": "env", "to_state": "env",
    "Transition": "buffer", "TransitionBase": "buffer", "Buffer": "buffer", "PrioritizedBuffer": "buffer",
    "RogueNet": "model", "RogueNetConfig": "model", "MLPActor": "model", "MLPCritic": "model",
    "A2C": "frame", "PPO": "frame", "RolloutCollector": "frame", "safe_call": "frame", "evaluate": "frame",
}
_LAYERS = ("ragged", "env", "buffer", "model", "frame", "distributed", "run", "data", "deploy")

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"entmachin.{_EXPORTS[name]}"), name)
        globals()[name] = value
        return value
    if name in _LAYERS:
        return importlib.import_module(f"entmachin.{name}")
    raise AttributeError(f"module 'entmachin' has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted({*globals(), *_EXPORTS, *_LAYERS})
