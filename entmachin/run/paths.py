"""Where the ``entmachin`` command finds its bundled configs and puts a new run directory.

Standard library only: :mod:`entmachin.run.cli` imports it before anything heavy, and
:mod:`entmachin.run.commands` uses it too.
"""
from __future__ import annotations

import os
import time
from typing import Optional

__all__ = ["bundled_config_path", "default_run_dir"]

_CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs")


def bundled_config_path(name: str, frame: str = "PPO") -> Optional[str]:
    """The bundled config of an example environment (``frame="A2C"``: its A2C config), or None."""
    suffix = "" if frame == "PPO" else f"-{frame.lower()}"
    path = os.path.join(_CONFIGS, f"{name.lower()}{suffix}.yaml")
    return path if os.path.exists(path) else None


def default_run_dir(env_name: str) -> str:
    """``runs/<environment>-<local time>``: the run directory of ``entmachin train`` without one given."""
    return os.path.join("runs", f"{env_name.rpartition(':')[2]}-{time.strftime('%Y%m%d-%H%M%S')}")
