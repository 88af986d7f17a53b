"""What every frame shares besides learning: closing its writer, save / load and Machin-style configs.

A frame class sets ``_config_cls`` (its settings record) and ``network_names`` (the attributes
holding its two networks, also their checkpoint file names and the constructor's first two
arguments); it has ``writer``, ``optimizers``, ``_schedulers``, ``_n_updates``, ``replay_buffer`` and
``training_counters()`` / ``set_training_counters()`` for :mod:`entmachin.frame.checkpoint`.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Tuple, Union

import torch

from entmachin.frame.config import frame_kwargs_from_config, generate_config

__all__ = ["FrameSurface"]


class FrameSurface:
    """``close``, ``save`` / ``load`` and ``generate_config`` / ``init_from_config`` of a frame."""

    _config_cls: type
    network_names: Tuple[str, str] = ("actor", "critic")

    @property
    def lr_schedulers(self) -> List[Any]:
        """The learning-rate schedulers, one per optimizer (empty without ``lr_scheduler``)."""
        return list(self._schedulers)

    @property
    def n_updates(self) -> int:
        """``update()`` calls so far (restored by ``load``)."""
        return self._n_updates

    def update_lr_scheduler(self) -> None:
        """Steps every learning-rate scheduler once."""
        for scheduler in self._schedulers:
            scheduler.step()

    def close(self) -> None:
        """Flushes and closes a writer the frame created from a log directory."""
        if self.writer is not None and self._owns_writer:
            self.writer.close()

    # ---------------------------------------------------------------- saving / configs

    def save(self, model_dir: str, network_map: Optional[Mapping[str, str]] = None, version: int = 0) -> None:
        """Saves models, optimizers, schedulers, normalisation statistics and RNG states.

        The version is published atomically: a process killed at any instant of a save leaves
        the previous version or the new one, complete and loadable
        (:mod:`entmachin.frame.checkpoint`). ``network_map`` names the networks' files (keys:
        ``network_names``); the replay buffer is not saved (``replay_buffer.save`` saves one).
        """
        from entmachin.frame.checkpoint import save_frame

        save_frame(self, model_dir, network_map, version)

    def load(self, model_dir: str, network_map: Optional[Mapping[str, str]] = None, version: int = -1) -> None:
        """Restores what :meth:`save` wrote (``version=-1``: the highest saved), torch's global RNG
        state included.

        Every file is read and checked before anything is assigned: on any error the frame is
        left exactly as it was. Files are read with ``torch.load(weights_only=True)``.

        Raises:
            FileNotFoundError: the directory, the version or one of its files is missing.
            CheckpointError: (a ``ValueError``) a file is not a checkpoint, is damaged, or was
                saved by another frame class or for other models / optimizers.
        """
        from entmachin.frame.checkpoint import load_frame

        load_frame(self, model_dir, network_map, version)

    @classmethod
    def generate_config(cls, config: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """Machin-style ``{"frame": ..., "frame_config": {...}}``: defaults overridden by ``config``.

        Raises:
            ValueError: ``config["frame_config"]`` has a key the frame does not know (the
                message lists the allowed keys).
        """
        return generate_config(cls.__name__, cls._config_cls, config)

    @classmethod
    def init_from_config(cls, config: Mapping[str, Any], model_device: Union[str, torch.device] = "cpu"
                         ) -> "FrameSurface":
        """Builds a frame from :meth:`generate_config`'s dict; models, optimizer, criterion and
        scheduler are import paths (bare names: ``torch.optim``, ``torch.nn``,
        ``torch.optim.lr_scheduler``); a second model entry ``"@actor.critic"`` calls that method
        of the first model (shared parameters)."""
        kwargs = frame_kwargs_from_config(cls.__name__, cls._config_cls, config, model_device)
        first, second = cls.network_names
        return cls(kwargs.pop(first), kwargs.pop(second), kwargs.pop("optimizer"), kwargs.pop("criterion"),
                   **kwargs)
