"""DQNPer update speed: on a MineSweeper replay of 100k rows, and against Machin 0.4.2 on CartPole.

(a) MineSweeper. ``MineSweeper(orbital_cannon=True)`` (the speed workload's environment, so the
select-entity Q-head takes part), the bundled ``minesweeper-dqn.yaml`` model (RogueNet d_model 32,
one layer, relative positions, dueling Q-heads) and its frame settings (16-step returns, soft
target updates, gradient clipping), but batch 256 (the config's is 128). ``--distinct-rows`` rows are collected by a
uniformly random policy (epsilon 1) from 128 environments and stored again and again until the
prioritized buffer holds ``--rows`` rows (the speed of an update depends on the rows' shapes, not
on their being distinct). Timed: ``update()`` = sample 256 rows by priority, both networks'
forward passes (online on ``state`` and ``next_state``, target on ``next_state``), the loss, the
backward pass, the optimizer step, the priorities and the soft target update. The buffer's share
is the time inside ``sample_batch`` and ``update_priority``.

(b) CartPole against Machin 0.4.2's ``DQNPer``: the same 4-16-16-2 ReLU Q-network (entmachin's
``MLPQNet``, Machin's example ``QNet``), Machin's defaults on both sides (batch 100, Adam at 1e-3,
``nn.MSELoss`` switched to per-row, soft target update 0.005, double Q), the same
``--cartpole-rows`` prerecorded CartPole-sized transitions stored in both. Timed: windows of
``--updates`` ``update()`` calls (``--ms-updates`` on MineSweeper). A third side, "plain floor",
is the same double-DQN update written by hand with uniform sampling and no checks: no DQNPer
can be faster, so its ratio to Machin bounds what any DQNPer can reach here.

The sides alternate window by window (Machin runs in its own interpreter, kept running, see
``_competitor.CompetitorWorker``); every figure is the median of ``--repeats`` windows. One torch
thread. The machine's load average is printed with the figures::

    python benchmarks/bench_dqn.py --machin-python /tmp/machin-venv/bin/python

Without ``--machin-python`` the Machin column reads "skipped". ``--device cuda`` puts every
side's networks (Machin's too) and the plain floor's tensors on the card (the buffers stay where
the frames keep them); times are then wall clock after ``torch.cuda.synchronize()``.
"""
import argparse
import copy
import json
import os
import statistics
import sys
import time
from typing import Any, Callable, Dict, List

import numpy as np
import torch
from torch import nn

from _device import add_device_argument, checked_device, clock, describe
from bench_frame_machin import N_ACTIONS, STATE_DIM, prerecorded_episodes

HERE = os.path.dirname(os.path.abspath(__file__))


# ----------------------------------------------------------------------------- CartPole (both sides)

def _cartpole_episodes(n_rows: int, length: int, seed: int) -> List[List[Dict[str, Any]]]:
    """About ``n_rows`` rows of bench_frame_machin's prerecorded episodes, the same on both sides."""
    return prerecorded_episodes(max(1, n_rows // length), length, seed)


class _MachinQNet(nn.Module):
    """Machin's example Q-network, 4-16-16-2 with ReLU: ``forward(state) -> [B, 2]``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(STATE_DIM, 16), nn.Linear(16, 16), nn.Linear(16, N_ACTIONS)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(state)))))  # [B, 2]


def _cartpole_frame(side: str, args: argparse.Namespace) -> Any:
    torch.manual_seed(0)
    if side == "machin":
        from machin.frame.algorithms import DQNPer

        qnet = _MachinQNet().to(args.device)
        frame = DQNPer(qnet, copy.deepcopy(qnet), torch.optim.Adam, nn.MSELoss(reduction="sum"))
    else:
        from entmachin.frame import DQNPer
        from entmachin.model import MLPQNet

        qnet = MLPQNet(STATE_DIM, N_ACTIONS, d_hidden=(16, 16), activation="relu").to(args.device)
        frame = DQNPer(qnet, copy.deepcopy(qnet), torch.optim.Adam, nn.MSELoss(reduction="none"), seed=0)
    for episode in _cartpole_episodes(args.cartpole_rows, args.length, seed=0):
        frame.store_episode(episode)
    return frame


class _PlainUpdate:
    """The floor: the same double-DQN update written by hand with no framework and no priorities.

    Uniform sampling from tensors instead of a prioritized buffer, no checks of any kind, the
    same network, batch 100, Adam at 1e-3, discount 0.99 and soft target update 0.005. A
    prioritized update does strictly more work, so no DQNPer can beat this rate here.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        torch.manual_seed(0)
        rows = [t for episode in _cartpole_episodes(args.cartpole_rows, args.length, seed=0) for t in episode]
        device = torch.device(args.device)
        self.state = torch.cat([t["state"]["state"] for t in rows]).to(device)  # [N, 4]
        self.action = torch.cat([torch.as_tensor(t["action"]["action"]).reshape(1, 1)
                                 for t in rows]).long().to(device)  # [N, 1]
        self.reward = torch.tensor([float(t["reward"]) for t in rows], device=device)  # [N]
        self.next_state = torch.cat([t["next_state"]["state"] for t in rows]).to(device)  # [N, 4]
        self.terminal = torch.tensor([bool(t["terminal"]) for t in rows], device=device)  # [N]
        self.qnet = _MachinQNet().to(device)
        self.target = copy.deepcopy(self.qnet)
        self.optimizer = torch.optim.Adam(self.qnet.parameters(), lr=1e-3)
        self.pairs = (list(self.target.parameters()), list(self.qnet.parameters()))
        self.rng = np.random.default_rng(0)

    def update(self) -> None:
        index = torch.from_numpy(self.rng.integers(0, self.state.shape[0], 100)).to(self.state.device)  # [100]
        q = self.qnet(self.state[index]).gather(1, self.action[index])[:, 0]  # [100]
        with torch.no_grad():
            next_state = self.next_state[index]
            best = self.target(next_state).gather(1, self.qnet(next_state).argmax(1, keepdim=True))[:, 0]  # [100]
            target = self.reward[index] + torch.where(self.terminal[index], 0.0, 0.99 * best)  # [100]
        loss = ((q - target) ** 2).sum()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        with torch.no_grad():
            torch._foreach_lerp_(self.pairs[0], self.pairs[1], 0.005)


def _window(frame: Any, n_updates: int, device: str) -> float:
    now = clock(torch.device(device))
    start = now()
    for _ in range(n_updates):
        frame.update()
    return now() - start


def _machin_worker(args: argparse.Namespace) -> None:
    """Machin's side: builds its frame, then answers ``{"op": "window"}`` with the window's seconds."""
    import machin

    try:
        frame = _cartpole_frame("machin", args)
        frame.update()  # warm-up, as on entmachin's side
        print(json.dumps({"machin": machin.__version__, "torch": torch.__version__}), flush=True)
        for line in sys.stdin:
            request = json.loads(line)
            if request["op"] == "quit":
                return
            print(json.dumps({"seconds": _window(frame, request["updates"], args.device)}), flush=True)
    except Exception:  # the benchmark's side reads the traceback
        import traceback

        print(json.dumps({"error": traceback.format_exc()}), flush=True)


def compare_with_machin(args: argparse.Namespace) -> Dict[str, Any]:
    """Updates/s of both sides on CartPole, alternating window by window; Machin None when skipped."""
    from _competitor import CompetitorWorker

    ours = _cartpole_frame("entmachin", args)
    ours.update()
    worker = None
    if args.machin_python:
        worker = CompetitorWorker(args.machin_python, __file__,
                                  ["--machin-worker", "--cartpole-rows", str(args.cartpole_rows),
                                   "--length", str(args.length), "--device", args.device], "Machin")
    plain = _PlainUpdate(args)
    plain.update()
    t_ours: List[float] = []
    t_theirs: List[float] = []
    t_plain: List[float] = []
    try:
        for i in range(args.repeats):
            if worker is not None and i % 2:
                t_theirs.append(worker.request(op="window", updates=args.updates)["seconds"])
            t_ours.append(_window(ours, args.updates, args.device))
            t_plain.append(_window(plain, args.updates, args.device))
            if worker is not None and not i % 2:
                t_theirs.append(worker.request(op="window", updates=args.updates)["seconds"])
    finally:
        if worker is not None:
            worker.close()
    rate_ours = args.updates / statistics.median(t_ours)
    rate_theirs = args.updates / statistics.median(t_theirs) if t_theirs else None
    return {"ours": rate_ours, "theirs": rate_theirs, "plain": args.updates / statistics.median(t_plain),
            "hello": worker.hello if worker is not None else None}


# ----------------------------------------------------------------------------- MineSweeper (entmachin)

class _Timed:
    """Wraps a bound method and adds its wall time (on ``now``) to ``total``."""

    def __init__(self, method: Callable[..., Any], now: Callable[[], float]) -> None:
        self.method, self.now, self.total = method, now, 0.0

    def __call__(self, *a: Any, **k: Any) -> Any:
        start = self.now()
        try:
            return self.method(*a, **k)
        finally:
            self.total += self.now() - start


def minesweeper_replay(args: argparse.Namespace) -> Any:
    """A DQNPer frame on the bundled DQN config's RogueNet whose buffer holds ``args.rows`` rows."""
    from entmachin.env import EnvList
    from entmachin.env.examples import MineSweeper
    from entmachin.frame import DQNPer, RolloutCollector
    from entmachin.model import RelposEncodingConfig, RogueNet, RogueNetConfig

    torch.manual_seed(0)
    envs = EnvList(lambda: MineSweeper(orbital_cannon=True), args.n_envs, seed=0)
    config = RogueNetConfig(d_model=32, n_layer=1, n_head=2, d_qk=16,
                            relpos_encoding=RelposEncodingConfig(extent=(5, 5), position_features=("x", "y")))
    net = RogueNet(envs.obs_space(), envs.action_space(), config, q_head="dueling").to(args.device)
    frame = DQNPer(net, copy.deepcopy(net), torch.optim.Adam, nn.MSELoss(reduction="none"), batch_size=args.batch_size,
                   learning_rate=1e-3, n_step=16, update_rate=0.02, gradient_max=10.0, replay_size=args.rows,
                   epsilon=1.0, epsilon_decay=1.0, seed=0)
    recorded: List[Any] = []
    store = frame.store_rollout

    def record(steps: Any) -> None:
        recorded.append(steps)
        store(steps)

    frame.store_rollout = record  # type: ignore[method-assign]
    collector = RolloutCollector(frame, envs, n_steps=args.n_steps)
    while frame.replay_buffer.size() < min(args.distinct_rows, args.rows):
        collector.collect()
    envs.close()
    frame.store_rollout = store  # type: ignore[method-assign]
    while frame.replay_buffer.size() < args.rows:
        for steps in recorded:
            store(steps)
    return frame


def time_minesweeper(args: argparse.Namespace, frame: Any) -> Dict[str, float]:
    """Updates/s and the buffer's share of the update time, medians over windows."""
    buffer = frame.replay_buffer
    now = clock(torch.device(args.device))
    sample, priority = _Timed(buffer.sample_batch, now), _Timed(buffer.update_priority, now)
    buffer.sample_batch, buffer.update_priority = sample, priority
    frame.update()  # warm-up
    rates, shares = [], []
    for _ in range(args.repeats):
        sample.total = priority.total = 0.0
        seconds = _window(frame, args.ms_updates, args.device)
        rates.append(args.ms_updates / seconds)
        shares.append((sample.total + priority.total) / seconds)
    return {"rate": statistics.median(rates), "share": statistics.median(shares),
            "sample_ms": 1e3 * sample.total / args.ms_updates, "priority_ms": 1e3 * priority.total / args.ms_updates}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--machin-python", default=None, help="interpreter of a venv with machin==0.4.2")
    parser.add_argument("--rows", type=int, default=100_000, help="rows in the MineSweeper replay")
    parser.add_argument("--distinct-rows", type=int, default=8192, help="rows collected (then stored again)")
    parser.add_argument("--n-envs", type=int, default=128, help="MineSweeper environments collecting")
    parser.add_argument("--n-steps", type=int, default=16, help="steps per collected rollout")
    parser.add_argument("--batch-size", type=int, default=256, help="MineSweeper rows per update")
    parser.add_argument("--cartpole-rows", type=int, default=20_000, help="CartPole transitions stored")
    parser.add_argument("--length", type=int, default=200, help="steps per prerecorded CartPole episode")
    parser.add_argument("--updates", type=int, default=100, help="update() calls per timed CartPole window")
    parser.add_argument("--ms-updates", type=int, default=20, help="update() calls per timed MineSweeper window")
    parser.add_argument("--repeats", type=int, default=5, help="timed windows per side (median)")
    parser.add_argument("--machin-worker", action="store_true", help=argparse.SUPPRESS)
    add_device_argument(parser)
    args = parser.parse_args()
    device = checked_device(args.device)
    torch.set_num_threads(1)
    if args.machin_worker:
        _machin_worker(args)
        return
    sys.path.insert(0, os.path.dirname(HERE))  # this checkout's entmachin

    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min); {os.cpu_count()} cores; "
          f"{describe(device)}, torch threads 1; medians of {args.repeats} windows ({args.ms_updates} MineSweeper / {args.updates} CartPole "
          "updates each)")
    started = time.perf_counter()
    frame = minesweeper_replay(args)
    filled = time.perf_counter() - started
    ms = time_minesweeper(args, frame)
    print(f"\n(a) DQNPer on MineSweeper(orbital_cannon=True): {frame.replay_buffer.size():,} rows "
          f"({min(args.distinct_rows, args.rows):,} distinct, filled in {filled:.1f} s), batch {args.batch_size}, "
          "minesweeper-dqn.yaml's model")
    print(f"    updates/s {ms['rate']:,.1f}   buffer share {100 * ms['share']:.1f}% (goal < 20%): "
          f"sample_batch {ms['sample_ms']:.2f} ms, update_priority {ms['priority_ms']:.2f} ms per update (last window)")
    del frame

    cp = compare_with_machin(args)
    print(f"\n(b) DQNPer on CartPole, 4-16-16-2 ReLU, Machin's defaults, {args.cartpole_rows:,} rows stored")
    print(f"{'side':<12} {'updates/s':>10}")
    print(f"{'entmachin':<12} {cp['ours']:>10,.0f}")
    print(f"{'plain floor':<12} {cp['plain']:>10,.0f}   (hand-written, uniform sampling, no checks: no DQNPer is faster)")
    if cp["theirs"] is None:
        print(f"{'machin':<12} {'skipped':>10}")
        print("machin: skipped (pass --machin-python PATH to measure it)")
    else:
        print(f"{'machin':<12} {cp['theirs']:>10,.0f}   (machin {cp['hello']['machin']}, torch {cp['hello']['torch']})")
        print(f"ratio: {cp['ours'] / cp['theirs']:.1f}x (target >= 5x); the plain floor / machin: "
              f"{cp['plain'] / cp['theirs']:.1f}x; entmachin / the plain floor: {cp['ours'] / cp['plain']:.0%}")
    print(f"load average at the end {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    sys.exit(main())
