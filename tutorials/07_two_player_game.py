"""Tutorial 7: a game of two players: writing it, checking it, an opponent, self-play, matches and a league.

    python tutorials/07_two_player_game.py            # trains twice for 40,960 steps (about four minutes)
    python tutorials/07_two_player_game.py --smoke    # a tiny run: checks that everything runs

The game is ``FlagRun`` in ``tutorials/flag_run.py``: two teams of two runners take turns racing
for each other's flag on a 5 x 5 grid; a runner next to an enemy tags it back to its start. Read
that file beside this one. What you learn:

1. **A ``MultiAgentEnvironment``** has seats (``seats()``: ``["0", "1"]``), one observation
   space and one action space that every seat shares, and ``reset()`` / ``act(actions)`` that
   go *by seat*: one ``Observation`` per seat out, one action mapping per seat in. Each seat
   sees the game from its own side (FlagRun turns the grid half a turn for seat ``"1"``), so one
   policy can play both seats.
2. **Seats without actors.** The seat not to move has no actors in its masks
   (``has_actors(obs, obs_space)`` is False) and ``act`` receives an empty mapping for it. At
   the end of a game every seat's observation has ``done`` set and states its ``result``
   (``"win"``, ``"draw"`` or ``"loss"``).
3. **ValidatingEnv** wraps a game as a ``ValidatingMultiAgentEnv``: every seat's observation is
   checked against the spaces, the game must end for every seat at once, and actions must fit
   each seat's last observation. It catches actions for the seat not to move, and an
   environment that leaves out the waiting seat's observation, naming the seat.
4. **An opponent is a function** ``(observation, action_space, rng) -> actions`` that plays one
   seat from that seat's ``Observation`` (FlagRun's ``flag_rush``, its ``scripted_opponent``).
   ``play_matches`` plays two players against each other, seats alternating, and returns a
   ``MatchResult``: wins, draws, losses, and the win rate (draws count half) with its Wilson 95%
   interval.
5. **One policy for both seats, from a config.** ``env.name: flag_run:FlagRun`` trains one policy for both seats:
   ``EnvList`` gives one row per (environment, seat), and the rows are ordinary rows for the
   buffer, GAE and RogueNet. ``log.eval_opponents: [random, scripted]`` plays the policy against
   each at every evaluation (``eval/win_rate/<opponent>`` in tensorboard, ``win_rate`` in
   ``eval.json``).
6. **Matches of the checkpoint.** ``match_checkpoint`` (what ``entmachin eval RUN_DIR
   --opponent scripted`` runs) plays the trained policy against the scripted opponent;
   ``entmachin play flag_run:FlagRun --checkpoint RUN_DIR --seat 1`` lets you play seat ``"1"``
   against it yourself.
7. **Self-play with a pool of past selves.** A ``selfplay:`` section makes the learner play one
   random seat per game (``seats: random``) while frozen snapshots of its past selves, saved every
   ``save_steps`` (the latest ``window`` kept, ``max_snapshots`` in play at once), or its current
   self (``play_against_latest``) play the other; a game keeps its opponent until it ends, and only
   the learner's rows are trained on. Elo ratings (start 1200, K 16) follow the learner and every
   snapshot: ``selfplay/elo``, ``selfplay/win_rate``, ``selfplay/draw_rate`` and
   ``selfplay/pool_size`` in tensorboard. The pool is in every checkpoint (``--resume`` continues
   exactly).
8. **A league of the run's checkpoints.** ``entmachin league RUN_DIR`` plays every kept checkpoint
   (and ``random``) against every other, fits Elo ratings to all the games at once (``random`` at
   1200) and writes ``league.json`` and ``league.png`` (Elo against environment steps): a ladder
   of difficulty levels to ship, and a check that later checkpoints really are stronger.
9. **Playing the result**: ``entmachin eval RUN_DIR --opponent scripted`` and ``entmachin play``
   with ``--checkpoint`` work on a self-play run as on any other.

Result of the full run (seed 0, one torch thread; 40,960 environment steps, 92 seconds for the
whole script on a shared two-core machine): ``flag_rush`` beats ``random`` with a win rate of
0.873 (149 wins, 51 draws, no loss in 200 games). The runner's evaluations (sampled actions, 100
games each) put the policy at 0.590 against ``scripted`` after 20,480 steps and 0.545 after
40,960, and at 0.72 and 0.77 against ``random``. In section 6 its most likely actions beat
``flag_rush`` with a win rate of 0.600 (95% CI 0.531-0.665: 79 wins, 82 draws, 39 losses), where
a random player reaches 0.150 (no win in 200 games).

The same config with a pool (section 7, the same 40,960 steps; the whole script took 305 seconds
with other training beside it):
the runner's evaluations put it at 0.600 and 0.615 against ``scripted`` after 20,480 and 40,960
steps, its Elo against its pool rose from 1200 to 1332 at 21k steps and ended at 1272, and in
section 9 its most likely actions beat ``flag_rush`` 0.677 (95% CI 0.610-0.738), against 0.600 for
one policy playing both seats: here the pool wins at the same budget. The league of its five
checkpoints (50 games a pair) puts them all 150-190 points above ``random`` and within 41 points
of each other: on a run this short the ladder is flat.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # makes `flag_run` importable, for this script and for env.name
    sys.path.insert(0, HERE)

from flag_run import MOVE, MOVES, TAG, FlagRun, flag_rush  # noqa: E402

from entmachin.env import (  # noqa: E402
    CategoricalAction,
    EnvList,
    SelectEntityAction,
    ValidatingEnv,
    random_actions,
)
from entmachin.env.multi_agent import has_actors  # noqa: E402
from entmachin.run.cli import main as entmachin  # noqa: E402
from entmachin.run.matches import match_checkpoint  # noqa: E402
from entmachin.run.matches import FunctionPlayer, load_opponent, play_matches  # noqa: E402
from entmachin.run.spaces import describe_spaces  # noqa: E402

CONFIG = """\
# FlagRun, one PPO policy for both seats (self-play), with a small RogueNet.
env:
  name: flag_run:FlagRun                 # package.module:Class, importable from sys.path
model:
  d_model: 32
  n_layer: 1
  n_head: 2
  d_qk: 16
  # attention knows where runners, enemies and flags are relative to each other
  relpos_encoding: {extent: [4, 4], position_features: [x, y]}
frame:
  name: PPO
  n_epochs: 4
  batch_size: 512
  actor_learning_rate: 0.003
  critic_learning_rate: 0.003
  entropy_weight: -0.01                  # Machin's sign: a negative weight rewards entropy
  n_anneal_updates: null                 # constant learning rates (entmachin's defaults anneal)
  discount: 0.97
  gae_lambda: 0.9
  gradient_max: 0.5
rollout:
  num_envs: 32                           # 32 games, 64 rows: one per (game, seat)
  n_steps: 16
train:
  total_steps: 40960
  seed: 0
log:
  checkpoint_interval: 20480
  eval_interval: 20480
  eval_episodes: 100                     # games per opponent at each evaluation
  eval_opponents: [random, scripted]     # eval/win_rate/random, eval/win_rate/scripted
"""

POOL = """\
# The same run, but the learner plays one random seat per game against a pool of its past selves.
selfplay:
  seats: random                          # or all (every seat: no pool), or a list of seats
  save_steps: 4096                       # a snapshot of the learner every 4,096 steps
  window: 10                             # the pool: the latest 10 snapshots
  play_against_latest: 0.5               # half the games against the current policy
  swap_steps: 1024                       # the snapshots in play are drawn again (between games)
  max_snapshots: 2                       # at most 2 in play: 2 extra forward passes per step
"""
POOL_LOG = ["log.checkpoint_interval=8192", "log.keep_checkpoints=null"]  # five checkpoints for the league
SMOKE_POOL = ["selfplay.save_steps=64", "selfplay.swap_steps=32", "log.checkpoint_interval=64"]

SMOKE = ["train.total_steps=256", "rollout.num_envs=8", "rollout.n_steps=8", "frame.batch_size=64",
         "log.checkpoint_interval=128", "log.eval_interval=128", "log.eval_episodes=8"]


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", default=os.path.join("runs", "flag_run"),
                        help="where the run is written (started over if it holds one)")
    parser.add_argument("--games", type=int, default=200, help="games of each match in sections 4 and 6")
    parser.add_argument("--smoke", action="store_true", help="tiny budget: a few seconds, to check it runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.games = 20
    if args.games < 2:
        parser.error(f"--games must be >= 2 (one game in each seat), got {args.games}")
    return args


def section(title: str) -> None:
    print(f"\n{'=' * 8} {title} {'=' * (70 - len(title))}")


class OnlyTheMover(FlagRun):
    """A mistake: observations only for the seat to move, as if the waiting seat did not exist."""

    def _observe(self):  # type: ignore[override]
        by_seat = super()._observe()
        return {seat: obs for seat, obs in by_seat.items() if seat == str(self.turn % 2)}


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    """Runs the tutorial; returns the figures of sections 4 to 6."""
    args = parse_args(argv)
    previous_threads = torch.get_num_threads()
    try:
        with np.printoptions(precision=2, suppress=True):
            walk_through()
            validate()
            figures = {"scripted_vs_random": scripted_vs_random(args.games)}
            run_dir = train(args)
            figures.update(evaluate(run_dir, args.games))
            pool_dir = train_with_pool(args)
            figures.update(league_and_play(args, run_dir, pool_dir))
            return figures
    finally:
        torch.set_num_threads(previous_threads)


def describe(obs: Any, obs_space: Any) -> str:
    runners = np.asarray(obs.features["Runner"]).astype(int).tolist()
    enemies = np.asarray(obs.features["Enemy"]).astype(int).tolist()
    return (f"runners {runners}, enemies {enemies}, to_move {obs.global_features[0]:.0f}, "
            f"has_actors {has_actors(obs, obs_space)}")


def turn_line(seat: str, actions: Dict[str, Any]) -> str:
    moves = [f"{actor[1]} {MOVES[int(i)]}" for actor, i in zip(actions[MOVE].actors, actions[MOVE].indices)]
    tags = [f"{actor[1]} tags {actee}" for actor, actee in zip(actions[TAG].actors, actions[TAG].actees)]
    return f"seat {seat}: " + ", ".join(moves + tags)


def wander(observation: Any, action_space: Any, rng: np.random.Generator) -> Dict[str, Any]:
    """An opponent function too: every runner takes a random allowed move, or tags a random enemy in reach."""
    move, tag = observation.actions[MOVE], observation.actions[TAG]
    moves = [rng.choice(np.flatnonzero(row)) for row in np.asarray(move.mask).reshape(-1, len(MOVES))]
    tags = [tag.actee_ids[rng.choice(np.flatnonzero(row))] for row in np.asarray(tag.mask)[:len(tag.actor_ids)]]
    return {MOVE: CategoricalAction(list(move.actor_ids), np.array(moves, dtype=np.int64), list(MOVES)),
            TAG: SelectEntityAction(list(tag.actor_ids), tags)}


def walk_through() -> None:
    """Sections 1 and 2: the seats and spaces, each seat's view, one game of flag_rush against itself."""
    env = FlagRun()
    obs_space = env.obs_space()
    section("1. Seats, spaces, and each seat's own view")
    print(f"seats {env.seats()}; one observation space and one action space for every seat:")
    for line in describe_spaces(obs_space, env.action_space()):
        print(line)
    env.seed(0)
    obs = env.reset()
    print(f"\nreset() with seed 0 returns one Observation per seat: {sorted(obs)}")
    for seat, o in obs.items():
        print(f"  seat {seat} sees {describe(o, obs_space)}")
    print(f"true cells: seat 0's runners {env.pos[0].tolist()}, seat 1's {env.pos[1].tolist()} "
          "(seat 1's view is turned half a turn: both start at the bottom)")

    section("2. Taking turns; the results at the end")
    players = {"0": flag_rush, "1": wander}  # opponent functions: (observation, action_space, rng) -> actions
    rng = np.random.default_rng(0)
    first = {seat: players[seat](o, env.action_space(), rng) if has_actors(o, obs_space) else {}
             for seat, o in obs.items()}
    print(f"seat 0 plays flag_rush, seat 1 wander; act({{'0': {{...}}, '1': {{}}}}): {turn_line('0', first['0'])}; "
          f"seat 1 gets {first['1']}")
    obs = env.act(first)
    for seat, o in obs.items():
        print(f"  seat {seat} sees {describe(o, obs_space)}")
    turns, returns = 1, {seat: 0.0 for seat in obs}
    while not obs["0"].done:
        actions = {seat: players[seat](o, env.action_space(), rng) if has_actors(o, obs_space) else {}
                   for seat, o in obs.items()}
        mover = next(seat for seat in actions if actions[seat])
        print(f"turn {turns}: {turn_line(mover, actions[mover])}")
        obs = env.act(actions)
        turns += 1
        for seat, o in obs.items():
            returns[seat] += o.reward
    print(f"game over after {turns} turns: results {({seat: o.result for seat, o in obs.items()})}, "
          f"returns {returns}, done {[o.done for o in obs.values()]}, has_actors "
          f"{[has_actors(o, obs_space) for o in obs.values()]}")


def validate() -> None:
    """Section 3: random games under ValidatingEnv, and two mistakes it catches."""
    section("3. ValidatingEnv: every seat checked")
    checked = EnvList(lambda: ValidatingEnv(FlagRun()), 8, seed=0)
    vec_obs, rng = checked.reset(), np.random.default_rng(0)
    rows = checked.row_index()
    print(f"{type(checked.envs[0]).__name__}; 8 games, {len(rows.seat)} rows: games {rows.env.tolist()}, "
          f"seats {list(rows.seat)}")
    seat0 = np.array([seat == "0" for seat in rows.seat])
    results = []  # seat 0's result in each game that ended
    for _ in range(200):
        vec_obs = checked.act(random_actions(vec_obs, checked.action_space(), rng))
        results += vec_obs.result[vec_obs.done & seat0].tolist()  # VecObs.result: the seat's score, on done rows
    checked.close()
    print(f"200 random turns of 8 games under ValidatingEnv: no complaint; {len(results)} games ended: "
          f"{results.count(1.0)} won by seat 0, {results.count(0.0)} by seat 1, {results.count(0.5)} drawn")

    env = ValidatingEnv(FlagRun())
    env.seed(0)
    obs = env.reset()
    rng = np.random.default_rng(0)
    mine = flag_rush(obs["0"], env.action_space(), rng)
    # Seat 1 is not to move; give it a move anyway, for the runner ids seat 0 moves.
    theirs = {MOVE: CategoricalAction(mine[MOVE].actors, mine[MOVE].indices, list(MOVES))}
    try:
        env.act({"0": mine, "1": theirs})
    except ValueError as e:
        print(f"actions for the seat not to move:\n  {e}")
    try:
        env.act({"0": mine})
    except ValueError as e:
        print(f"a seat left out of act:\n  {e}")
    try:
        ValidatingEnv(OnlyTheMover()).reset()
    except ValueError as e:
        print(f"an environment that leaves out the waiting seat's observation:\n  {e}")


def scripted_vs_random(games: int) -> Dict[str, float]:
    """Section 4: the opponent function, in a match against random."""
    section("4. An opponent function, and a match")
    env_rng = np.random.default_rng(1)
    env = FlagRun()
    player = FunctionPlayer(flag_rush, env.obs_space(), env.action_space(), env_rng, "flag_rush")
    random_player = load_opponent("random", FlagRun, seed=2)  # also: "scripted", a run directory, pkg.mod:function
    result = play_matches(FlagRun, player, random_player, games, seed=0)
    print(f"flag_rush against random, {result.games} games (seats alternating): {result.wins} wins, "
          f"{result.draws} draws, {result.losses} losses; {result.line()}")
    return {"wins": result.wins, "draws": result.draws, "losses": result.losses, "win_rate": result.win_rate}


def train(args: argparse.Namespace) -> str:
    """Section 5: one policy for both seats, from a YAML file, evaluated against two opponents."""
    section("5. One policy for both seats, from a YAML file, evaluated against random and scripted")
    return train_config(CONFIG, "flag_run.yaml", args.run_dir, SMOKE if args.smoke else [])


def train_config(text: str, name: str, run_dir: str, overrides: List[str]) -> str:
    """Writes ``text`` as ``name`` beside ``run_dir``, trains it there, prints its evaluations."""
    os.makedirs(os.path.dirname(os.path.abspath(run_dir)), exist_ok=True)
    config_path = os.path.join(os.path.dirname(os.path.abspath(run_dir)), name)
    with open(config_path, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"{config_path}:\n{text}")
    argv = ["train", config_path, "--run-dir", run_dir, "--force", "--no-progress"]
    for override in overrides:
        argv += ["--set", override]
    print(f"entmachin {' '.join(argv)}")
    status = entmachin(argv)
    if status != 0:
        raise SystemExit(f"entmachin train ended with status {status}")
    with open(os.path.join(run_dir, "eval.json"), encoding="utf-8") as f:
        evals = json.load(f)
    for record in evals:
        rates = ", ".join(f"{name} {rate:.3f}" for name, rate in record["win_rate"].items())
        print(f"evaluation at {record['env_steps']:>6} steps: win rate against {rates} over {record['episodes']} games each")
    return run_dir


def train_with_pool(args: argparse.Namespace) -> str:
    """Section 7: the same config with a selfplay section; the learner's Elo along the run."""
    section("7. Self-play with a pool of past selves, and the Elo curve")
    pool_dir = args.run_dir.rstrip(os.sep) + "_pool"
    overrides = POOL_LOG + ((SMOKE + SMOKE_POOL) if args.smoke else [])
    train_config(CONFIG + POOL, "flag_run_pool.yaml", pool_dir, overrides)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(pool_dir, size_guidance={"scalars": 0})
    events.Reload()
    elo = events.Scalars("selfplay/elo")
    shown = elo[:: max(1, len(elo) // 8)] + ([elo[-1]] if (len(elo) - 1) % max(1, len(elo) // 8) else [])
    print("the learner's Elo (selfplay/elo) against its pool: "
          + ", ".join(f"{e.step:,} steps {e.value:.0f}" for e in shown))
    print(f"pool size at the end (selfplay/pool_size): {events.Scalars('selfplay/pool_size')[-1].value:.0f}")
    return pool_dir


def league_and_play(args: argparse.Namespace, run_dir: str, pool_dir: str) -> Dict[str, Any]:
    """Sections 8 and 9: the league of the pool run's checkpoints; both runs against flag_rush; playing it."""
    section("8. A league of the run's checkpoints")
    games = 10 if args.smoke else 50
    argv = ["league", pool_dir, "--games", str(games)]
    print(f"entmachin {' '.join(argv)}")
    if entmachin(argv) != 0:
        raise SystemExit("entmachin league failed")
    with open(os.path.join(pool_dir, "league.json"), encoding="utf-8") as f:
        players = json.load(f)["players"]
    checkpoints = sorted((p for p in players if p["env_steps"] is not None), key=lambda p: p["env_steps"])
    print(f"first checkpoint ({checkpoints[0]['env_steps']:,} steps) Elo {checkpoints[0]['elo']:.0f}, last "
          f"({checkpoints[-1]['env_steps']:,} steps) Elo {checkpoints[-1]['elo']:.0f}; the curve is in "
          f"{os.path.join(pool_dir, 'league.png')}")

    section("9. Playing the result")
    torch.set_num_threads(1)
    rates = {}
    for name, directory in (("one policy for both seats", run_dir), ("self-play with a pool", pool_dir)):
        result = match_checkpoint(directory, "scripted", args.games, deterministic=True, seed=12345)
        rates[name] = result.win_rate
        print(f"{name}, most likely actions, against scripted: {result.line()}")
    print(f"\nplay seat 1 against the self-play policy yourself:\n"
          f"  PYTHONPATH={os.path.relpath(HERE)} entmachin play flag_run:FlagRun --checkpoint {pool_dir} --seat 1")
    return {"league_first": checkpoints[0]["elo"], "league_last": checkpoints[-1]["elo"],
            "pool_vs_scripted": rates["self-play with a pool"]}


def evaluate(run_dir: str, games: int) -> Dict[str, Any]:
    """Section 6: the checkpoint against the scripted opponent, next to a random player; play it yourself."""
    section("6. The trained policy against flag_rush")
    torch.set_num_threads(1)
    trained = match_checkpoint(run_dir, "scripted", games, deterministic=True, seed=12345)
    print(f"trained policy (most likely actions) against scripted: {trained.wins} wins, {trained.draws} draws, "
          f"{trained.losses} losses; {trained.line()}")
    random_player = load_opponent("random", FlagRun, seed=3)
    baseline = play_matches(FlagRun, random_player, load_opponent("scripted", FlagRun, seed=4), games, seed=12345)
    print(f"random policy against scripted: {baseline.wins} wins, {baseline.draws} draws, {baseline.losses} losses; "
          f"{baseline.line()}")
    argv = ["eval", run_dir, "--opponent", "scripted", "--episodes", str(games), "--deterministic"]
    print(f"\nentmachin {' '.join(argv)}")
    status = entmachin(argv)
    if status != 0:
        raise SystemExit(f"entmachin eval ended with status {status}")
    print(f"\nplay seat 1 against it yourself (seat 0 moves first, and is the policy):\n"
          f"  PYTHONPATH={os.path.relpath(HERE)} entmachin play flag_run:FlagRun --checkpoint {run_dir} --seat 1")
    return {"trained_vs_scripted": trained.win_rate, "trained_games": trained.games,
            "random_vs_scripted": baseline.win_rate}


if __name__ == "__main__":
    main()
