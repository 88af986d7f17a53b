"""PPO frame speed on Machin's own workload: entmachin against Machin 0.4.2, in the same run.

Workload (as in the frame issue): actor 4-16-16-2, critic 4-32-32-1 (ReLU), 100 prerecorded
CartPole-sized episodes of 200 steps (state ``[1, 4]``, action ``[1, 1]``, reward 1.0, the last
step terminal). Timed: ``store_episode`` for every episode, then one ``update()``, with Machin's
default keywords (``nn.MSELoss(reduction="sum")``, Adam) and one torch thread. The figure is
transitions stored per second of that whole window; both sides use the same episodes.

Machin runs in its own interpreter (``--machin-python``, a venv with ``machin==0.4.2``), as a
subprocess of this script::

    python benchmarks/bench_frame_machin.py --machin-python /tmp/machin-venv/bin/python

Without ``--machin-python`` the Machin column reads "skipped". ``--device cuda`` puts both
sides' actor and critic on the card (episodes are stored from the CPU, as a user's loop stores
them, and each frame moves its minibatches); times are then wall clock after
``torch.cuda.synchronize()``.
"""

import argparse
import json
import sys
from typing import Any, Dict, List, Optional

import numpy as np
import torch
from torch import nn
from _competitor import best_alternating, run_competitor
from _device import add_device_argument, checked_device, clock, describe

STATE_DIM, N_ACTIONS = 4, 2


def prerecorded_episodes(n_episodes: int, length: int, seed: int) -> List[List[Dict[str, Any]]]:
    """``n_episodes`` prerecorded CartPole-sized episodes of ``length`` steps (state ``[1, 4]``,
    action ``[1, 1]``): the same on both sides for one seed (``bench_dqn.py`` stores them too)."""
    rng = np.random.default_rng(seed)
    episodes = []
    for _ in range(n_episodes):
        states = torch.from_numpy(rng.standard_normal((length + 1, 1, STATE_DIM)).astype(np.float32))  # [T+1, 1, 4]
        actions = torch.from_numpy(rng.integers(0, N_ACTIONS, (length, 1, 1)))  # [T, 1, 1]
        episodes.append([
            {"state": {"state": states[t].clone()}, "action": {"action": actions[t].clone()},
             "next_state": {"state": states[t + 1].clone()}, "reward": 1.0, "terminal": t == length - 1}
            for t in range(length)
        ])
    return episodes


class _MachinActor(nn.Module):
    """Machin's example actor: ``forward(state, action=None) -> (action, log_prob, entropy)``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(STATE_DIM, 16), nn.Linear(16, 16), nn.Linear(16, N_ACTIONS)

    def forward(self, state: torch.Tensor, action: Optional[torch.Tensor] = None) -> Any:
        probs = torch.softmax(self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(state))))), dim=1)  # [B, 2]
        dist = torch.distributions.Categorical(probs=probs)
        action = action if action is not None else dist.sample()
        return action, dist.log_prob(action.flatten()), dist.entropy()


class _MachinCritic(nn.Module):
    """Machin's example critic: ``[B, 4] -> [B, 1]``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(STATE_DIM, 32), nn.Linear(32, 32), nn.Linear(32, 1)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(state)))))


def _frame(side: str, device: torch.device) -> Any:
    torch.manual_seed(0)
    if side == "machin":
        from machin.frame.algorithms import PPO

        return PPO(_MachinActor().to(device), _MachinCritic().to(device), torch.optim.Adam,
                   nn.MSELoss(reduction="sum"))
    from entmachin.frame import PPO
    from entmachin.model import MLPActor, MLPCritic

    actor = MLPActor(STATE_DIM, N_ACTIONS, d_hidden=(16, 16), activation="relu").to(device)
    critic = MLPCritic(STATE_DIM, d_hidden=(32, 32), activation="relu").to(device)
    return PPO(actor, critic, torch.optim.Adam, nn.MSELoss(reduction="sum"), seed=0)


def _measure(side: str, args: argparse.Namespace) -> Dict[str, float]:
    """One window on a fresh frame: transitions/s, and the seconds spent storing and updating."""
    device = checked_device(args.device)
    now = clock(device)
    episodes = prerecorded_episodes(args.episodes, args.length, seed=0)
    frame = _frame(side, device)
    start = now()
    for episode in episodes:
        frame.store_episode(episode)
    stored = now()
    frame.update()
    end = now()
    n = args.episodes * args.length
    return {"rate": n / (end - start), "store_s": stored - start, "update_s": end - stored}


def _machin(args: argparse.Namespace) -> Optional[Dict[str, float]]:
    if not args.machin_python:
        return None
    worker_args = ["--machin-worker", "--episodes", str(args.episodes), "--length", str(args.length),
                   "--device", args.device]
    return run_competitor(args.machin_python, __file__, worker_args, "Machin")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--machin-python", default=None, help="interpreter of a venv with machin==0.4.2")
    parser.add_argument("--episodes", type=int, default=100, help="prerecorded episodes")
    parser.add_argument("--length", type=int, default=200, help="steps per episode")
    parser.add_argument("--repeats", type=int, default=3, help="windows of each side, alternating; the best is kept")
    parser.add_argument("--machin-worker", action="store_true", help=argparse.SUPPRESS)
    add_device_argument(parser)
    args = parser.parse_args()
    device = checked_device(args.device)
    torch.set_num_threads(1)
    if args.machin_worker:
        print(json.dumps(_measure("machin", args)))
        return

    # alternate the two sides, keep the best window of each
    ours, theirs = best_alternating(lambda: _measure("entmachin", args), lambda: _machin(args), args.repeats)
    n = args.episodes * args.length
    print(f"PPO, Machin's workload: {args.episodes} episodes x {args.length} steps = {n} transitions, "
          f"actor 4-16-16-2, critic 4-32-32-1, Machin's defaults, {describe(device)}, torch threads 1, "
          f"best of {args.repeats}")
    print(f"{'side':<12} {'transitions/s':>14} {'store s':>9} {'update s':>9}")
    for side, figures in (("entmachin", ours), ("machin", theirs)):
        if figures is None:
            print(f"{side:<12} {'skipped':>14}")
        else:
            print(f"{side:<12} {figures['rate']:>14,.0f} {figures['store_s']:>9.3f} {figures['update_s']:>9.3f}")
    if theirs is None:
        print("machin: skipped (pass --machin-python PATH to measure it)")
    else:
        print(f"ratio: {ours['rate'] / theirs['rate']:.1f}x (target >= 20x)")


if __name__ == "__main__":
    sys.exit(main())
