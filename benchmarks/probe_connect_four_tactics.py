"""Can a network perceive ConnectFour's tactics? A supervised probe, no self-play.

    python benchmarks/probe_connect_four_tactics.py                                   # the bundled network
    python benchmarks/probe_connect_four_tactics.py --set env.kwargs.choose=column --set model.d_model=64

Positions come from random games; a position is kept when the player to move has exactly one winning drop,
or else exactly one drop that blocks the other player's win, and that drop is its label. The bundled
ConnectFour config's actor (with the ``--set`` changes) is trained on 20,000 such positions (8 passes,
Adam 1e-3, batch 256, one torch thread) to choose the labelled column, and tested on 2,000 others: the
share of winning and blocking drops it picks (most likely action), and the test set's negative
log-likelihood. A network that cannot pick these from labelled examples cannot learn them from a +1 / -1
at the end of a game either, so this separates what the network can see from what self-play teaches it.
Each run appends a JSON line to ``benchmarks/results/connect_four_tactics.jsonl``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

RESULTS = os.path.join(HERE, "results", "connect_four_tactics.jsonl")


def positions(env: Any, n: int, rng: np.random.Generator) -> Tuple[List[Any], np.ndarray, np.ndarray]:
    """``n`` observations of the player to move with one winning (else one blocking) drop, the drop as the
    action's index (the column; with ``choose: column`` its place among the selectable columns), and its kind."""
    from entmachin.env.examples.connect_four import COLS, _connected, drop_action

    observations, labels, kinds = [], [], []
    while len(observations) < n:
        obs = env.reset()
        while not env.over:
            me = env.turn
            legal = [c for c in range(COLS) if env.heights[c] < 6]
            wins = [c for c in legal if _connected(env.bits[me] | 1 << (7 * c + env.heights[c]))]
            blocks = [c for c in legal if _connected(env.bits[1 - me] | 1 << (7 * c + env.heights[c]))]
            target = wins or blocks
            if len(target) == 1:
                observations.append(obs[str(me)])
                labels.append(legal.index(target[0]) if env.choose == "column" else target[0])
                kinds.append("win" if wins else "block")
            c = int(rng.choice(legal))  # the game goes on at random
            obs = env.act({str(me): drop_action(env.action_space(), c), str(1 - me): {}})
    return observations, np.array(labels), np.array(kinds)


def probe(overrides: List[str], n_train: int = 20_000, n_test: int = 2_000, epochs: int = 8) -> Dict[str, Any]:
    import torch

    from entmachin.env.batch import batch_obs
    from entmachin.env.canonical import to_state
    from entmachin.ragged.tensor import RaggedTensor
    from entmachin.run.build import make_frame
    from entmachin.run.envs import EnvFactory
    from entmachin.run.config import load_config
    from entmachin.run.paths import bundled_config_path

    torch.set_num_threads(1)
    torch.manual_seed(0)
    config = load_config(bundled_config_path("ConnectFour"), overrides)
    env = EnvFactory(config.env)()
    frame, _ = make_frame(config, env.obs_space(), env.action_space(), rows_per_env=2)
    rng = np.random.default_rng(0)
    train_obs, train_y, _ = positions(env, n_train, rng)
    test_obs, test_y, test_kind = positions(env, n_test, rng)
    space, actions = env.obs_space(), env.action_space()

    def state(observations: List[Any]) -> Any:
        return to_state(batch_obs(observations, space, actions), actions)

    def labelled(y: np.ndarray) -> Dict[str, Any]:  # as the collector stores actions: {"action": {name: ragged}}
        choices = torch.as_tensor(y, dtype=torch.int64).reshape(-1, 1)
        return {"action": {"drop": RaggedTensor.from_lengths(choices, torch.ones(len(y), dtype=torch.int64))}}

    for i in range(0, n_train, 1024):  # input statistics, as acting collects them
        frame.act(state(train_obs[i:i + 1024]))
    optimizer = torch.optim.Adam(frame.actor.parameters(), lr=1e-3)
    started = time.perf_counter()
    for _ in range(epochs):
        order = rng.permutation(n_train)
        for i in range(0, n_train, 256):
            rows = order[i:i + 256]
            loss = -frame.eval_act(state([train_obs[j] for j in rows]), labelled(train_y[rows])).log_prob_sum.mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        chosen = frame.act(state(test_obs), True, collect_stats=False).action["drop"].data.reshape(-1).numpy()
        nll = -frame.eval_act(state(test_obs), labelled(test_y)).log_prob_sum.mean().item()
    right = chosen == test_y
    return {"changes": overrides, "parameters": sum(p.numel() for p in frame.actor.parameters()),
            "train": n_train, "test": n_test, "epochs": epochs,
            "win": round(float(right[test_kind == "win"].mean()), 3),
            "block": round(float(right[test_kind == "block"].mean()), 3), "test_nll": round(nll, 3),
            "seconds": round(time.perf_counter() - started, 1)}


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--train", type=int, default=20_000)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--results", default=RESULTS)
    args = parser.parse_args(argv)
    record = probe(args.overrides, args.train, max(args.train // 10, 100), args.epochs)
    with open(args.results, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    print(f"{' '.join(args.overrides) or 'the bundled network'}: picks the winning drop {record['win']:.3f}, the "
          f"blocking drop {record['block']:.3f} of the time (test NLL {record['test_nll']:.3f}; "
          f"{record['parameters']:,} parameters, {record['seconds']:.0f} s)")


if __name__ == "__main__":
    main()
