"""Hyperparameters of the DQN frames (Machin 0.4.2's ``DQN`` keywords plus entmachin's own)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, Literal, Optional, Tuple, Union

import torch

from entmachin.frame.config import SettingsChecks
from entmachin.ragged.device import check_device

__all__ = ["DQNConfig", "DQNPerConfig"]

MODES = ("vanilla", "fixed_target", "double")


@dataclass(frozen=True, kw_only=True)
class DQNConfig(SettingsChecks):
    """The scalar settings of a DQN frame; see ``DQN`` for what each one means.

    Raises:
        TypeError / ValueError: a setting of the wrong type or outside its range, or both
            ``update_rate`` and ``update_steps`` (Machin's rule: one target update scheme).
    """

    model_roles: ClassVar[Tuple[str, str]] = ("qnet", "qnet_target")
    object_defaults: ClassVar[Dict[str, Any]] = {
        "models": ["entmachin.model.MLPQNet", "entmachin.model.MLPQNet"],
        "lr_scheduler_args": None, "lr_scheduler_kwargs": None,
    }

    batch_size: int = 100
    epsilon_decay: float = 0.9999
    update_rate: Optional[float] = 0.005
    update_steps: Optional[int] = None
    learning_rate: float = 0.001
    discount: float = 0.99
    gradient_max: float = math.inf
    replay_size: int = 500000
    replay_device: Union[str, torch.device] = "cpu"
    mode: Literal["vanilla", "fixed_target", "double"] = "double"
    visualize: bool = False
    visualize_dir: str = ""
    epsilon: float = 1.0
    epsilon_min: float = 0.0
    n_step: int = 1
    actor_reduction: Literal["sum", "mean"] = "sum"
    seed: Optional[int] = None

    def __post_init__(self) -> None:
        self._int("batch_size", 1)
        self._real("epsilon_decay", 0.0, 1.0)
        self._real("update_rate", 0.0, 1.0, open_low=True, optional=True)
        self._int("update_steps", 1, optional=True)
        if (self.update_rate is None) == (self.update_steps is None):
            raise ValueError(f"{self._where('update_rate')} / update_steps: give exactly one target update scheme "
                             f"(Machin's rule), got update_rate={self.update_rate!r}, update_steps="
                             f"{self.update_steps!r}; pass update_rate=None with update_steps")
        self._real("learning_rate", 0.0, open_low=True)
        self._real("discount", 0.0, 1.0)
        self._real("gradient_max", 0.0, open_low=True, allow_inf=True)
        self._int("replay_size", 1)
        check_device(self.replay_device, self._where("replay_device"))
        if self.mode not in MODES:
            raise ValueError(f"{self._where('mode')} must be one of {list(MODES)}, got {self.mode!r}")
        self._bool("visualize")
        if not isinstance(self.visualize_dir, str):
            raise TypeError(f"{self._where('visualize_dir')} must be a str, got {self.visualize_dir!r}")
        self._real("epsilon", 0.0, 1.0)
        self._real("epsilon_min", 0.0, 1.0)
        self._int("n_step", 1)
        if self.actor_reduction not in ("sum", "mean"):
            raise ValueError(f"{self._where('actor_reduction')} must be 'sum' or 'mean', got {self.actor_reduction!r}")
        self._int("seed", 0, optional=True)


@dataclass(frozen=True, kw_only=True)
class DQNPerConfig(DQNConfig):
    """The settings of a DQNPer frame: DQN's (its buffer's own settings belong to the buffer)."""
