"""How many files of ``entmachin/frame/`` one PPO iteration runs, and how often it changes file.

A reader following one iteration (``collector.collect()`` then ``ppo.update()``) end to end
reads every file it enters; this counts them with ``sys.setprofile``: each Python call or
return event whose code lives in ``entmachin/frame/`` names its file, ``files`` is how many
distinct files appear and ``changes`` how many times consecutive events differ in file. The
workload is MineSweeper (16 environments x 32 steps, a small RogueNet), one warm-up iteration
first, under each setting of ``SETTINGS`` (a shared or a separate critic, a tensorboard writer,
``target_kl``, entropy and clipping). Only Python frames count: torch's C++ is none of them.

::

    python benchmarks/count_update_files.py            # this checkout
    python benchmarks/count_update_files.py --json     # one JSON line per setting
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Any, Dict, List

import torch
from torch import nn

FRAME_DIR = os.sep + os.path.join("entmachin", "frame") + os.sep

SETTINGS: Dict[str, Dict[str, Any]] = {
    "shared critic": {"critic": "shared"},
    "separate critic": {"critic": "separate"},
    "shared + writer": {"critic": "shared", "writer": True},
    "separate + target_kl + clips": {"critic": "separate", "target_kl": 0.5, "value_clip": 0.2, "gradient_max": 0.5,
                                     "entropy_weight": -0.01},
}


def _frame(critic: str, writer: bool = False, **settings: Any):
    from entmachin.env import EnvList
    from entmachin.env.examples import MineSweeper
    from entmachin.frame import PPO, RolloutCollector
    from entmachin.model import RogueNet, RogueNetConfig

    torch.manual_seed(0)
    envs = EnvList(MineSweeper, num_envs=16, seed=0)
    config = RogueNetConfig(d_model=16, n_layer=1, n_head=2, d_qk=8)
    net = RogueNet(envs.obs_space(), envs.action_space(), config)
    value = net.critic() if critic == "shared" else RogueNet(envs.obs_space(), envs.action_space(), config).critic()
    ppo = PPO(net, value, torch.optim.Adam, nn.MSELoss(), batch_size=128, actor_update_times=8,
              critic_update_times=8, writer=tempfile.mkdtemp() if writer else None, seed=0, **settings)
    return ppo, RolloutCollector(ppo, envs, n_steps=32)


def count(setting: Dict[str, Any]) -> Dict[str, int]:
    """``{"files": distinct frame files entered, "changes": file changes}`` over one iteration."""
    ppo, collector = _frame(**setting)
    collector.collect()
    ppo.update()  # warm-up: caches filled, lazy imports done
    seen: List[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event in ("call", "return"):
            path = frame.f_code.co_filename
            if FRAME_DIR in path:
                seen.append(os.path.basename(path))

    sys.setprofile(profile)
    try:
        collector.collect()
        ppo.update()
    finally:
        sys.setprofile(None)
        ppo.close()
    changes = sum(1 for a, b in zip(seen, seen[1:]) if a != b)
    return {"files": len(set(seen)), "changes": changes, "file_names": sorted(set(seen))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON line per setting")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name, setting in SETTINGS.items():
        result = count(setting)
        if args.json:
            print(json.dumps({"setting": name, **result}))
        else:
            print(f"{name:32s} files {result['files']:3d}  changes {result['changes']:4d}  "
                  f"({', '.join(result['file_names'])})")


if __name__ == "__main__":
    main()
