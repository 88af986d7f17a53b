"""What a ConnectFour policy gets wrong against a tactical opponent: each of its moves classified.

    python benchmarks/connect_four_mistakes.py RUN_DIR[/checkpoints/best] [--games 400] [--opponent scripted]

The policy (most likely actions) plays ``--games`` games against ``scripted`` (win, else block, else random) or
the held-out ``centre`` player, half of them from each seat. Each of its moves is one of:

* ``missed win``: a drop would have won at once and it played another;
* ``missed block``: no win, the opponent threatened to win at once in one column, and it played elsewhere;
* ``under a threat``: none of those, and its drop lets the opponent win at once on top of it while a drop
  that does not was legal;
* ``sound``: none of the above.

Printed: the share of each kind over all moves, the win / draw / loss rates, and for the games it lost the
share whose first mistake was of each kind (none: it lost without one of these one-move mistakes).
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
from typing import Dict, List

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

KINDS = ("missed win", "missed block", "under a threat", "sound")


def classify(observation, column: int) -> str:
    """The kind of the move ``column`` from ``observation`` (the mover's own)."""
    from entmachin.env.examples.connect_four import COLS, ROWS, _connected, read_board

    heights, ours, other = read_board(observation)
    legal = [c for c in range(COLS) if heights[c] < ROWS]
    cell = {c: 1 << (7 * c + int(heights[c])) for c in legal}
    wins = [c for c in legal if _connected(ours | cell[c])]
    if wins:
        return "sound" if column in wins else "missed win"
    blocks = [c for c in legal if _connected(other | cell[c])]
    if blocks:
        return "sound" if column in blocks else "missed block"

    def lets_them_win(c: int) -> bool:
        return heights[c] + 1 < ROWS and _connected(other | cell[c] << 1)

    if lets_them_win(column) and any(not lets_them_win(c) for c in legal):
        return "under a threat"
    return "sound"


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a run directory, or its checkpoints/best")
    parser.add_argument("--games", type=int, default=400)
    parser.add_argument("--opponent", default="scripted", choices=["scripted", "centre"])
    parser.add_argument("--seed", type=int, default=12345)
    args = parser.parse_args(argv)
    import torch

    from entmachin.env.examples.connect_four import COLUMN_IDS, SEATS, centre_opponent
    from entmachin.run.envs import EnvFactory
    from entmachin.run.config import EnvSection
    from entmachin.run.matches import FunctionPlayer, load_opponent

    torch.set_num_threads(1)
    factory = EnvFactory(EnvSection(name="ConnectFour", kwargs={"choose": "column"}))
    agent = load_opponent(args.run, factory, args.seed)
    env = factory()
    rng = np.random.default_rng(args.seed)
    if args.opponent == "scripted":
        opponent = load_opponent("scripted", factory, args.seed)
    else:
        opponent = FunctionPlayer(centre_opponent, env.obs_space(), env.action_space(), rng, "centre")
    moves: Dict[str, int] = collections.Counter()
    results: Dict[str, int] = collections.Counter()
    first_mistake: Dict[str, int] = collections.Counter()
    for game in range(args.games):
        observations = env.reset()
        ours = SEATS[game % 2]
        mistake = None
        while True:
            mover = next((s for s in SEATS if len(observations[s].actions["drop"].actor_ids)), None)
            if mover is None:
                break
            player = agent if mover == ours else opponent
            action = player.choose([observations[mover]], [mover])[0]
            if mover == ours:
                choice = action["drop"]
                column = (COLUMN_IDS.index(int(choice.actees[0])) if hasattr(choice, "actees")
                          else int(choice.indices[0]))
                kind = classify(observations[mover], column)
                moves[kind] += 1
                if kind != "sound" and mistake is None:
                    mistake = kind
            observations = env.act({s: (action if s == mover else {}) for s in SEATS})
        result = observations[ours].result
        results[result] += 1
        if result == "loss":
            first_mistake[mistake or "none"] += 1
    total = sum(moves.values())
    print(f"{args.run} against {args.opponent}, {args.games} games (half from each seat), most likely actions")
    print("results: " + ", ".join(f"{k} {results[k] / args.games:.3f}" for k in ("win", "draw", "loss")))
    print(f"moves ({total:,}): " + ", ".join(f"{k} {moves[k] / total:.3f}" for k in KINDS))
    lost = results["loss"]
    if lost:
        print(f"lost games ({lost}), first mistake: "
              + ", ".join(f"{k} {first_mistake[k] / lost:.2f}" for k in (*KINDS[:3], "none")))


if __name__ == "__main__":
    main()
