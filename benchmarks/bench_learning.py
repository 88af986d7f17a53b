"""The learning table: each bundled config's final return per seed, against entity-gym's published results.

    python benchmarks/bench_learning.py                      # every job not yet in the results file
    python benchmarks/bench_learning.py --env Count --seeds 0  # a subset
    python benchmarks/bench_learning.py --table-only           # print the table of what was run

Each (environment, frame, seed) is one job: ``entmachin``'s runner trains the bundled config
(``entmachin train ENV [--frame A2C] --set train.seed=S``) and the job appends one JSON line to
the results file (default ``benchmarks/results/learning.jsonl``): the evaluations along the
way, the final evaluation sampled and deterministic, the random policy's return and the wall
time. Each record carries the bundled config it trained (``settings``, plain data) and its fingerprint
(``config``), so jobs already in the file are skipped only while their config is unchanged: edit a
bundled config and its rows run again, and the table shows only records of the configs as they are now.
The table fills over several sittings.

Which edits count is decided once, by the fields' declarations (``entmachin.run.fingerprint``, whose
docstring states the rule): execution settings (``model.compile``, ``rollout.overlap``, processes,
device, threads, intervals, logging) never count; a field added later counts only where it differs from
what runs did before it (its declared ``before``); fields the run does not read never count; everything
else does, learning rates, network, rollout sizes, environment and evaluation settings alike. The seed,
the budget, ``train.init_from`` and ``bc.data`` are left out because a record states them itself. A
record is current when today's rule gives its ``settings`` the fingerprint it gives the bundled config
now, and the code revisions it stored (``revisions``: a code change that alters what a feature's configs
learn bumps ``entmachin.run.fingerprint.REVISIONS``) are today's, so a change of the rule applies to old
records too; records from before ``settings`` existed got
theirs from the git history (``benchmarks/refingerprint_records.py``). ``CURRENT_SEEDS`` is how many
current seeds each bundled config's row must have; ``AWAITING`` names the rows that have fewer, and why
(a quick test holds both).
``--budget-scale`` shrinks every budget (the smoke test runs 0.01).

A target is met when the median seed's final return (the better of sampled and deterministic
evaluation) reaches it within the budget. For a game of several players (one policy playing every
seat) the figure is the win rate against the ``random`` opponent (draws count half) instead of the
return: the runner's evaluations against ``log.eval_opponents`` sampled, the final checkpoint's
most likely actions, and a random player's own rate.

"Steps to target" is the median seed's first evaluation on the way (ten per run, the runs' own
evaluations: sampled, or most likely actions where the config says so) whose figure reaches the row's
target, and whether that is within half the budget.

A game whose config sets ``log.best`` (the run keeps ``checkpoints/best``, chosen by its own evaluations)
reports what that choice is worth without the winner's curse: after the run, its best checkpoint and its
final one each play ``FRESH_GAMES`` (1,000) games against every opponent of ``log.eval_opponents``, on
games none of the run's evaluations played (seed ``seeds(config)["fresh"]``, ``train.seed + 3,000,017``;
the run's evaluations use ``train.seed + 1,000,003``), with the run's ``log.eval_deterministic``. The
record's ``best`` (its steps, the figure that chose it, and these win rates) and ``final`` (the same for the
final checkpoint) stand beside each other in the opponents table; where every seed of a row has them,
the row's median and "met" are the best checkpoint's fresh win rate. Older records lack them ("-"). Both
checkpoints also play the game's ``HELD_OUT`` opponent (one training never meets nor picks the best
checkpoint by), sampling their actions, on the same fresh games.

``--record RUN_DIR ...`` adds the records of runs already trained with ``entmachin train ENV --set
train.seed=S`` (the bundled config and its ``train.total_steps``), for seeds run side by side.

Learning from data (a second table): behaviour cloning runs (``frame.name: BC``, recorded with
``--record`` like any run) are compared with the return of the demonstrator in their dataset
(``DATA_TARGETS``: at least 90% of it); PPO runs warm-started from a clone (``train.init_from``)
with the same config's runs from scratch, by the environment steps at which an evaluation first
reaches ``WARM_GOAL`` (at most half).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

# (env, frame) -> (budget in environment steps, target return or None: report only, what is compared)
TARGETS: Dict[Tuple[str, str], Tuple[int, Optional[float], str]] = {
    ("MultiArmedBandit", "PPO"): (32_000, 1.0, "1.0 within 32k"),
    ("Count", "PPO"): (2_048, 1.0, "1.0 within 2k"),
    ("NotHotdog", "PPO"): (32_000, 1.0, "1.0 within 32k"),
    ("Xor", "PPO"): (500_000, 1.0, "1.0 within 500k"),
    ("CherryPick", "PPO"): (250_000, 0.99, "> 0.99 within 250k"),
    ("MoveToOrigin", "PPO"): (1_000_000, 0.99, "> 0.99 within 1M"),
    ("FloorIsLava", "PPO"): (32_000, 0.99, "> 0.99 within 32k (relative positions)"),
    ("PickMatchingBalls", "PPO"): (500_000, 0.99, "> 0.99 within 500k"),
    ("MineSweeper", "PPO"): (1_000_000, None, "return within 1M, steps to 90% of it"),
    ("MultiSnake", "PPO"): (1_000_000, None, "return within 1M, steps to 90% of it"),
    ("Minefield", "PPO"): (3_000_000, 0.99, "> 0.99 within 3M (positions in the vehicle's frame)"),
    ("RockPaperScissors", "PPO"): (8_192, None, "return within 8k (optimum 1.0; the policy cannot see the throw)"),
    ("ConnectFour", "PPO"): (1_000_000, 0.95, "win rate vs random >= 0.95 within 1M (self-play, a pool of past "
                                            "selves)"),
    ("Skirmish", "PPO"): (200_000, 0.95, "win rate vs random >= 0.95 within 1M (self-play, a pool of past selves)"),
    ("RockPaperScissorsDuel", "PPO"): (65_536, 0.1, "exploitability <= 0.1 from a policy throwing rock >= 0.8 "
                                                  "(self-play; lower is better)"),
    ("Vehicles", "PPO"): (100_000, 0.86, ">= 90% of the scripted driver's 0.958 within 100k (continuous steering)"),
    ("Turrets", "PPO"): (100_000, 0.5, ">= 0.5 within 100k: random 0.04; scripted aim or trigger alone, the other "
                                       "random, 0.27 / 0.36 (continuous aim + discrete trigger)"),
    ("Pendulum-v1", "PPO"): (300_000, -250.0, ">= -250 within 300k (gymnasium, model.kind: mlp)"),
    ("Recall", "PPO"): (20_480, 0.95, ">= 0.95 within 20k (model.memory; a feed-forward policy is held to 0.25)"),
    ("Conveyor", "PPO"): (32_768, 0.95, ">= 0.95 within 32k (model.memory.per_entity; a feed-forward policy is held "
                                       "to 0.5)"),
    ("Count", "A2C"): (4_096, 1.0, "PPO's target within twice its budget"),
    ("NotHotdog", "A2C"): (64_000, 1.0, "PPO's target within twice its budget"),
    ("MultiArmedBandit", "A2C"): (64_000, 1.0, "PPO's target within twice its budget"),
    ("MineSweeper", "A2C"): (1_000_000, None, ">= 80% of PPO's return at the same budget"),
}

LOWER_IS_BETTER = {("RockPaperScissorsDuel", "PPO")}
# Games: win rates against the other opponents of log.eval_opponents, (env, frame, opponent) -> (target, what)
OPPONENT_TARGETS: Dict[Tuple[str, str, str], Tuple[Optional[float], str]] = {
    ("ConnectFour", "PPO", "scripted"): (0.60, "win rate vs scripted (wins, blocks) >= 0.60 within the bundled "
                                                "budget (at most 3M)"),
    ("Skirmish", "PPO", "scripted"): (0.60, "win rate vs scripted (charges, hits the nearest) >= 0.60 within the "
                                             "bundled budget (at most 3M)"),
}
# Games: an opponent of the game's own that training never plays nor chooses the best checkpoint by (the learner
# must be strong, not tuned to its evaluation opponent); the best and final checkpoints play it on fresh games.
HELD_OUT: Dict[str, str] = {"ConnectFour": "entmachin.env.examples.connect_four:centre_opponent",
                            "Skirmish": "entmachin.env.examples.skirmish:focus_opponent"}
ROCK_START = 0.8  # RockPaperScissorsDuel's learner starts throwing rock with at least this probability
# Behaviour cloning, (env, the demonstrator) -> the share of the demonstrator's return the median seed reaches.
DATA_TARGETS: Dict[Tuple[str, str], float] = {
    ("MineSweeper", "a trained agent"): 0.9, ("MineSweeper", "a moderate agent (0.4-0.6)"): 0.9,
    ("MoveToOrigin", "its scripted expert"): 0.9,
}
WARM_GOAL = {"MineSweeper": 0.95}  # PPO from a clone: steps to this return, at most half of PPO from scratch
FRESH_GAMES = 1_000  # games the best and final checkpoints of a game with log.best are re-evaluated on


# A bundled config's row is kept true by this many current seeds (test/test_benchmarks.py checks it).
CURRENT_SEEDS = 3
# Rows of TARGETS with fewer current seeds than CURRENT_SEEDS, and why; each waits for its jobs to run.
AWAITING: Dict[Tuple[str, str], str] = {}


def bundled_data(env: str, frame: str) -> Dict[str, Any]:
    """The bundled config of ``(env, frame)`` as plain data."""
    from entmachin.run.cli import bundled_config_path
    from entmachin.run.config import config_to_dict, load_config

    path = bundled_config_path(env, frame)
    if path is None:
        raise SystemExit(f"bench_learning: {env} has no bundled {frame} config")
    return config_to_dict(load_config(path))


def config_fingerprint(env: str, frame: str) -> str:
    """The fingerprint of the bundled config of ``(env, frame)``."""
    return fingerprint(bundled_data(env, frame))


# What a record states itself, beside its config's fingerprint: the seed, the budget, the run it started
# from, the dataset it cloned.
_RECORDED = {"train": ("seed", "total_steps", "init_from"), "bc": ("data",)}
_CONTINUOUS: Dict[str, bool] = {}


def continuous_actions(env: Dict[str, Any]) -> bool:
    """Whether the environment of plain ``env`` section data has a continuous action (built once per section)."""
    key = json.dumps(env, sort_keys=True)
    if key not in _CONTINUOUS:
        from entmachin.env.action import ContinuousActionSpace, GlobalContinuousActionSpace
        from entmachin.run.envs import EnvFactory
        from entmachin.run.config import EnvSection

        _, action_space = EnvFactory(EnvSection(**env)).spaces()
        _CONTINUOUS[key] = any(isinstance(space, (ContinuousActionSpace, GlobalContinuousActionSpace))
                               for space in action_space.values())
    return _CONTINUOUS[key]


def fingerprint(data: Dict[str, Any], continuous: Optional[bool] = None,
                revised: Optional[Dict[str, int]] = None) -> str:
    """A short hash of what plain config ``data`` decides about learning (``entmachin.run.fingerprint``'s
    rule), the fields in ``_RECORDED`` left out; ``continuous``: whether the environment has a continuous
    action (None: build the environment of ``data`` to see); ``revised``: the code revisions a record was
    made with (None: today's, ``entmachin.run.fingerprint.revisions``)."""
    from entmachin.run.fingerprint import fingerprint as digest, learning_settings, revisions

    if continuous is None:
        continuous = continuous_actions(data["env"])
    kept = learning_settings(data, continuous_actions=continuous)
    for section, names in _RECORDED.items():
        for name in names:
            kept.get(section, {}).pop(name, None)
    return digest(kept, revisions(data) if revised is None else revised)


def settings_of(data: Dict[str, Any]) -> Dict[str, Any]:
    """What a record keeps of the config it trained: the plain data and today's code revisions of the
    features it uses."""
    from entmachin.run.fingerprint import revisions

    return {"config": fingerprint(data), "settings": data, "revisions": revisions(data)}


def run_job(env: str, frame: str, seed: int, budget: int, runs_dir: str,
            fresh_games: int = FRESH_GAMES) -> Dict[str, Any]:
    """Trains one bundled config and returns its results record."""
    from entmachin.run.cli import bundled_config_path
    from entmachin.run.config import config_to_dict, load_config

    path = bundled_config_path(env, frame)
    if path is None:
        raise SystemExit(f"bench_learning: {env} has no bundled {frame} config")
    data = config_to_dict(load_config(path))
    record = {"env": env, "frame": frame, "seed": seed, "budget": budget, **settings_of(data)}
    extra = []
    if (env, frame) in LOWER_IS_BETTER:  # RockPaperScissorsDuel: self-play from a rock thrower
        start = os.path.join(runs_dir, f"{env}-{frame}-{seed}-start")
        record["start_rock"] = rock_thrower(data, start, seed)
        extra = [f"train.init_from={start}"]
    return {**record, **train_and_evaluate(data, seed, budget, os.path.join(runs_dir, f"{env}-{frame}-{seed}"),
                                           extra, fresh_games)}


def rock_thrower(data: Dict[str, Any], run_dir: str, seed: int) -> float:
    """Writes a run directory whose policy throws rock with probability >= ``ROCK_START`` (the bundled
    config's networks, the throw head's weights zeroed and its rock bias raised); returns that probability."""
    from entmachin.frame.checkpoint import save_frame
    from entmachin.run.build import make_frame
    from entmachin.run.envs import EnvFactory
    from entmachin.run.config import apply_overrides, config_from_dict
    from entmachin.run.logs import write_config

    import torch

    config = config_from_dict(apply_overrides(data, [f"train.seed={seed}", "log.run_dir=null"]))
    torch.manual_seed(seed)
    factory = EnvFactory(config.env)
    frame, _ = make_frame(config, *factory.spaces())
    head = frame.actor.heads[0].proj
    with torch.no_grad():
        head.weight.zero_()
        head.bias.copy_(torch.tensor([2.5, 0.0, 0.0]))  # rock, paper, scissors: e^2.5 / (e^2.5 + 2) = 0.86
    os.makedirs(run_dir, exist_ok=True)
    write_config(run_dir, config)
    save_frame(frame, os.path.join(run_dir, "checkpoints"), None, 0)
    rock = float(throw_distribution(frame, factory)[0])
    assert rock >= ROCK_START, rock
    return rock


def throw_distribution(frame: Any, factory: Any) -> Any:
    """RockPaperScissorsDuel: the policy's probabilities of rock, paper and scissors (it sees the same
    observation in every game), scored exactly with the actor's log-probabilities."""
    import numpy as np
    import torch

    from entmachin.env import batch_obs, to_state
    from entmachin.ragged.arrays import ragged_from_arrays

    env = factory()
    obs = env.reset()["0"]
    obs_space, action_space = env.obs_space(), env.action_space()
    state = to_state(batch_obs([obs] * 3, obs_space, action_space), action_space)
    throws = ragged_from_arrays(np.arange(3, dtype=np.int64).reshape(-1, 1), np.ones(3, dtype=np.int64))
    with torch.no_grad():
        out = frame.eval_act(state, {"action": {"throw": throws}})
    return np.exp(out.log_prob["throw"].data.float().cpu().numpy().reshape(3))


def exploitability(probs: Any) -> float:
    """The best response's expected gain against a rock-paper-scissors policy ``(rock, paper, scissors)``."""
    rock, paper, scissors = (float(p) for p in probs)
    return max(scissors - paper, rock - scissors, paper - rock)  # playing rock, paper, scissors


def train_and_evaluate(data: Dict[str, Any], seed: int, budget: int, run_dir: str,
                       extra: List[str] = (), fresh_games: int = FRESH_GAMES) -> Dict[str, Any]:
    """Trains the run config ``data`` (plain data) with ``seed`` for ``budget`` steps (ten evaluations on
    the way); the final evaluation sampled and deterministic, a random policy's figure, the wall time."""
    from entmachin.run.config import apply_overrides, config_from_dict
    from entmachin.run.runner import Runner

    interval = max(budget // 10, 1)
    # A run that keeps every checkpoint (a self-play game's, for ``entmachin league``) keeps its own interval;
    # the others keep only the final one.
    every = data["log"]["keep_checkpoints"] is None
    config = config_from_dict(apply_overrides(data, [
        f"train.seed={seed}", f"train.total_steps={budget}", f"log.eval_interval={interval}",
        *([] if every else [f"log.checkpoint_interval={budget * 2}"]), "log.run_dir=null", *extra]))
    started = time.perf_counter()
    runner = Runner(config, run_dir, force=True, progress=False)
    result = runner.train()
    wall = time.perf_counter() - started
    return evaluate_run(config, run_dir, result.env_steps, runner.state.evals, wall, fresh_games)


def fresh_figures(config: Any, run_dir: str, final: Any, factory: Any, games: int) -> Dict[str, Any]:
    """A game with ``log.best``: its best checkpoint and its final one (``final``, loaded) against each of
    ``log.eval_opponents`` on ``games`` games none of its evaluations played, and against the game's
    :data:`HELD_OUT` opponent, sampling (the module doc)."""
    from entmachin.frame.checkpoint import latest_version
    from entmachin.frame.checkpoint_files import read_blob, read_manifest
    from entmachin.run.best import best_dir, best_version
    from entmachin.run.build import seeds
    from entmachin.run.evaluation import load_trained
    from entmachin.run.matches import match

    import torch

    seed, deterministic = seeds(config)["fresh"], config.log.eval_deterministic
    checkpoints = os.path.join(run_dir, "checkpoints")
    best, _, _ = load_trained(run_dir, factory, "best")
    directory, steps = best_dir(checkpoints), best_version(checkpoints)
    chosen_by = json.loads(read_blob(directory, read_manifest(directory, steps), "runner"))["best"]

    def rate(frame: Any, opponent: str, sampled_only: bool = False) -> float:
        torch.manual_seed(seed)  # sampled actions: both checkpoints draw alike
        return match(frame, factory, opponent, games, deterministic and not sampled_only, seed).win_rate

    checkpoint = {"best": best, "final": final}
    out = {"fresh": {"seed": seed, "games": games, "deterministic": deterministic},
           "best": {"env_steps": steps, "chosen_by": chosen_by},
           "final": {"env_steps": latest_version(checkpoints)}}
    for which, frame in checkpoint.items():
        out[which]["win_rate"] = {opponent: rate(frame, opponent) for opponent in config.log.eval_opponents}
    if config.env.name in HELD_OUT:
        # sampling: a near-certain policy playing its most likely actions replays few distinct games against an
        # opponent that mostly plays its own most likely ones too
        spec = HELD_OUT[config.env.name]
        out["held_out"] = {"opponent": spec, "games": games, "sampled": True,
                           "win_rate": {which: rate(frame, spec, True) for which, frame in checkpoint.items()}}
    return out


def evaluate_run(config: Any, run_dir: str, env_steps: int, evals: List[Dict[str, Any]], wall: float,
                 fresh_games: int = FRESH_GAMES) -> Dict[str, Any]:
    """The record of a trained run: its evaluations, the final checkpoint's deterministic figure and a random
    policy's (returns; for a game, win rates against ``random``); for a game with ``log.best``, its best and
    final checkpoints on ``fresh_games`` fresh games (:func:`fresh_figures`)."""
    from entmachin.frame import evaluate
    from entmachin.run.build import seeds
    from entmachin.run.envs import EnvFactory
    from entmachin.run.evaluation import load_trained, random_policy_return
    from entmachin.run.matches import RandomPlayer, match, play_matches

    factory, eval_seed = EnvFactory(config.env), seeds(config)["eval"]
    trained, _, _ = load_trained(run_dir)
    game = "random" in config.log.eval_opponents
    if (config.env.name, config.frame.name) in LOWER_IS_BETTER:
        probs = throw_distribution(trained, factory)
        gap = exploitability(probs)
        return {"env_steps": env_steps, "sampled": gap, "deterministic": gap, "random": 0.0,
                "throws": [round(float(p), 4) for p in probs], "evals": [], "wall_s": round(wall, 1),
                "loadavg": os.getloadavg()[0], "figure": "exploitability"}
    others = {}
    for opponent in (o for o in config.log.eval_opponents if o != "random"):
        others[opponent] = {
            "sampled": evals[-1]["win_rate"][opponent],
            "deterministic": match(trained, factory, opponent, config.log.eval_episodes, True, eval_seed).win_rate,
            "evals": [[e["env_steps"], e["win_rate"][opponent]] for e in evals]}
    if game:
        figure = [e["win_rate"]["random"] for e in evals]
        deterministic = match(trained, factory, "random", config.log.eval_episodes, True, eval_seed).win_rate
        obs_space, action_space = factory.spaces()
        import numpy as np

        random = play_matches(factory, RandomPlayer(obs_space, action_space, np.random.default_rng(eval_seed)),
                              RandomPlayer(obs_space, action_space, np.random.default_rng(eval_seed + 1)),
                              config.log.eval_episodes, eval_seed).win_rate
    else:
        figure = [e["mean"] for e in evals]
        deterministic = evaluate(trained, factory, config.log.eval_episodes, deterministic=True, seed=eval_seed).mean
        random = random_policy_return(factory, config.log.eval_episodes, eval_seed).mean
    fresh = fresh_figures(config, run_dir, trained, factory, fresh_games) \
        if game and config.log.best is not None else {}
    return {"env_steps": env_steps, "sampled": figure[-1], "deterministic": deterministic, "random": random,
            "evals": [[e["env_steps"], f] for e, f in zip(evals, figure)], "wall_s": round(wall, 1),
            "loadavg": os.getloadavg()[0], **({"figure": "win rate vs random"} if game else {}),
            **({"opponents": others} if others else {}), **fresh}


def record_runs(run_dirs: List[str], fresh_games: int = FRESH_GAMES) -> List[Dict[str, Any]]:
    """Records of runs already trained with a bundled config (``--record``); the wall time is the span of the
    run's tensorboard events."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from entmachin.run.config import config_to_dict
    from entmachin.run.logs import load_run_config

    records = []
    for run_dir in run_dirs:
        config = load_run_config(run_dir)
        frame = config.frame.name
        data = config_to_dict(config)
        with open(os.path.join(run_dir, "eval.json"), encoding="utf-8") as f:
            evals = json.load(f)
        events = EventAccumulator(run_dir, size_guidance={"scalars": 0})
        events.Reload()
        times = [e.wall_time for tag in events.Tags()["scalars"] for e in events.Scalars(tag)]
        record = {"env": config.env.name, "frame": frame, "seed": config.train.seed,
                  "budget": config.train.total_steps, **settings_of(data)}
        if frame == "BC":
            record["data"] = demonstrator(config.bc.data)
        if config.train.init_from is not None:
            record["init_from"] = os.path.abspath(config.train.init_from)
        records.append({**record, **evaluate_run(config, run_dir, evals[-1]["env_steps"], evals,
                                                 max(times) - min(times), fresh_games)})
    return records


def demonstrator(directory: str) -> Dict[str, Any]:
    """What a BC run learned from: the dataset's recording and its demonstrator's mean return (its episodes'
    summed rewards, per seat)."""
    import numpy as np

    from entmachin.data import Dataset

    dataset = Dataset(directory)
    rows = dataset.read()
    keys = [f"{e}/{s}" for e, s in zip(rows.episode.tolist(), rows.seat)]
    totals: Dict[str, float] = {}
    for key, reward in zip(keys, rows.reward.tolist()):
        totals[key] = totals.get(key, 0.0) + reward
    return {"path": os.path.abspath(directory), "policy": dataset.recorded.get("policy"),
            "checkpoint": dataset.recorded.get("checkpoint"), "episodes": len(np.unique(rows.episode)),
            "rows": len(rows), "return": float(np.mean(list(totals.values())))}


def read_results(path: str) -> List[Dict[str, Any]]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def steps_to_90(record: Dict[str, Any]) -> Optional[int]:
    """Environment steps at the first evaluation reaching 90% of the final sampled return."""
    goal = 0.9 * record["sampled"]
    return next((step for step, mean in record["evals"] if mean >= goal), None) if goal > 0 else None


def steps_to_target(record: Dict[str, Any], target: float, lower: bool = False) -> Optional[int]:
    """Environment steps at the first evaluation on the way whose figure reaches ``target`` (at most it,
    when lower is better); None: none did."""
    return next((step for step, figure in record["evals"]
                 if (figure <= target + 1e-9 if lower else figure >= target - 1e-9)), None)


def median_steps(steps: List[Optional[int]]) -> Optional[int]:
    """The median seed's steps (with an even count the faster of the middle two; a seed that never got there
    counts as the slowest); None: the median seed never did."""
    return sorted(steps, key=lambda s: float("inf") if s is None else s)[(len(steps) - 1) // 2]


def current(records: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The records trained with the bundled configs as they are now: today's rule gives a record's
    ``settings`` and ``revisions`` the fingerprint it gives the bundled config (a record without
    ``settings`` is not; one without ``revisions`` was made at revision 1 of every feature)."""
    prints: Dict[Tuple[str, str], Tuple[str, bool]] = {}
    kept = []
    for r in records:
        key = (r["env"], r["frame"])
        if key not in prints:
            data = bundled_data(*key)
            continuous = continuous_actions(data["env"])
            prints[key] = (fingerprint(data, continuous), continuous)
        now, continuous = prints[key]
        if r.get("settings") is not None and fingerprint(r["settings"], continuous, r.get("revisions", {})) == now:
            kept.append(r)
    return kept


def _met(median: float, target: Optional[float], lower: bool = False) -> str:
    """"yes" / "no": whether the median reaches the target (at most it, when lower is better); "n/a" without one."""
    if target is None:
        return "n/a"
    return "yes" if (median <= target + 1e-9 if lower else median >= target - 1e-9) else "no"


def table(records: List[Dict[str, Any]]) -> str:
    lines = ["| env | frame | budget | target | seeds | sampled | deterministic | random | median | steps to 90% "
             "| steps to target (median seed) | wall s | met |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (env, frame), (budget, target, words) in TARGETS.items():
        rows = sorted((r for r in records if r["env"] == env and r["frame"] == frame and "warm" not in r),
                      key=lambda r: r["seed"])
        if not rows:
            continue
        lower = (env, frame) in LOWER_IS_BETTER
        best = [(min if lower else max)(r["sampled"], r["deterministic"]) for r in rows]
        median = statistics.median(best)
        met = _met(median, target, lower)
        to90 = [steps_to_90(r) for r in rows]
        seeds = ",".join(str(r["seed"]) for r in rows)
        sampled = " / ".join(f"{r['sampled']:.3f}" for r in rows)
        deterministic = " / ".join(f"{r['deterministic']:.3f}" for r in rows)
        reached = " / ".join("-" if s is None else f"{s:,}" for s in to90)
        random = statistics.mean(r["random"] for r in rows)
        wall = statistics.median(r["wall_s"] for r in rows)
        to_target = "-"
        if target is not None and all(r["evals"] for r in rows):
            steps = median_steps([steps_to_target(r, target, lower) for r in rows])
            to_target = "never" if steps is None else \
                f"{steps:,} ({'within' if steps <= rows[0]['budget'] / 2 else 'past'} half)"
        lines.append(f"| {env} | {frame} | {rows[0]['budget']:,} | {words} | {seeds} | {sampled} | {deterministic} | "
                     f"{random:.3f} | {median:.3f} | {reached} | {to_target} | {wall:.0f} | {met} |")
    lines += ["", "| env | frame | opponent | target | seeds | sampled | deterministic | best: steps, fresh games "
              "| final: fresh games | held out: best / final | median | met |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (env, frame, opponent), (target, words) in OPPONENT_TARGETS.items():
        rows = sorted((r for r in records if r["env"] == env and r["frame"] == frame
                       and opponent in r.get("opponents", {})), key=lambda r: r["seed"])
        if not rows:
            continue
        figures = [r["opponents"][opponent] for r in rows]
        fresh = all(opponent in r.get("best", {}).get("win_rate", {}) for r in rows)
        median = statistics.median(r["best"]["win_rate"][opponent] for r in rows) if fresh else \
            statistics.median(max(f["sampled"], f["deterministic"]) for f in figures)
        met = _met(median, target)
        best = " / ".join(f"{r['best']['env_steps']:,}: {r['best']['win_rate'][opponent]:.3f}"
                          if opponent in r.get("best", {}).get("win_rate", {}) else "-" for r in rows)
        final = " / ".join(f"{r['final']['win_rate'][opponent]:.3f}"
                           if opponent in r.get("final", {}).get("win_rate", {}) else "-" for r in rows)
        held = " / ".join(f"{r['held_out']['win_rate']['best']:.3f}, {r['held_out']['win_rate']['final']:.3f}"
                          if "held_out" in r else "-" for r in rows)
        lines.append(f"| {env} | {frame} | {opponent} | {words} | {','.join(str(r['seed']) for r in rows)} | "
                     + " / ".join(f"{f['sampled']:.3f}" for f in figures) + " | "
                     + " / ".join(f"{f['deterministic']:.3f}" for f in figures)
                     + f" | {best} | {final} | {held} | {median:.3f}{' (best, fresh)' if fresh else ''} | {met} |")
    return "\n".join(lines + ["", data_table(records)])


def _steps_to(record: Dict[str, Any], goal: float) -> Optional[int]:
    return next((step for step, mean in record["evals"] if mean >= goal - 1e-9), None)


def data_table(records: List[Dict[str, Any]]) -> str:
    """Behaviour cloning against its demonstrators, and PPO from a clone against PPO from scratch."""
    lines = ["| env | demonstrator | its return | samples | seeds | sampled | deterministic | median | share | target "
             "| met |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for (env, label), share in DATA_TARGETS.items():
        rows = sorted((r for r in records if r["env"] == env and r["frame"] == "BC"
                       and r.get("data", {}).get("label") == label), key=lambda r: r["seed"])
        if not rows:
            continue
        demo = statistics.median(r["data"]["return"] for r in rows)
        median = statistics.median(max(r["sampled"], r["deterministic"]) for r in rows)
        lines.append(f"| {env} | {label} | {demo:.3f} | {rows[0]['budget']:,} | "
                     f"{','.join(str(r['seed']) for r in rows)} | "
                     + " / ".join(f"{r['sampled']:.3f}" for r in rows) + " | "
                     + " / ".join(f"{r['deterministic']:.3f}" for r in rows)
                     + f" | {median:.3f} | {median / demo:.2f} | >= {share:.2f} | {_met(median / demo, share)} |")
    lines += ["", "| env | goal | from scratch: steps (seeds) | from a clone: steps (seeds) | medians | ratio | target "
              "| met |", "|---|---|---|---|---|---|---|---|"]
    for env, goal in WARM_GOAL.items():
        runs = [r for r in records if r["env"] == env and r["frame"] == "PPO" and r.get("warm") is not None]
        scratch = sorted((r for r in runs if r["warm"] == "scratch"), key=lambda r: r["seed"])
        warm = sorted((r for r in runs if r["warm"] == "clone"), key=lambda r: r["seed"])
        if not scratch or not warm:
            continue
        to_scratch = [_steps_to(r, goal) for r in scratch]
        to_warm = [_steps_to(r, goal) for r in warm]
        never = float("inf")
        a = statistics.median(never if s is None else s for s in to_scratch)
        b = statistics.median(never if s is None else s for s in to_warm)
        words = " / ".join("-" if s is None else f"{s:,}" for s in to_scratch)
        warm_words = " / ".join("-" if s is None else f"{s:,}" for s in to_warm)
        lines.append(f"| {env} | {goal} | {words} | {warm_words} | {a:,.0f} / {b:,.0f} | {b / a:.2f} | <= 0.50 | "
                     f"{_met(b / a, 0.5, lower=True)} |")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", action="append", default=None, help="only these environments (repeatable)")
    parser.add_argument("--frame", action="append", default=None, choices=["PPO", "A2C"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--budget-scale", type=float, default=1.0, help="multiply every budget (smoke: 0.01)")
    parser.add_argument("--results", default=os.path.join(HERE, "results", "learning.jsonl"))
    parser.add_argument("--runs-dir", default=None, help="keep the run directories here (default: a temp dir)")
    parser.add_argument("--table-only", action="store_true")
    parser.add_argument("--fresh-games", type=int, default=FRESH_GAMES,
                        help="games with log.best: the best and final checkpoints' games against each opponent")
    parser.add_argument("--record", nargs="+", default=None, metavar="RUN_DIR",
                        help="add the records of runs already trained with a bundled config (entmachin train ENV "
                             "--set train.seed=S), then print the table")
    parser.add_argument("--label", default=None,
                        help="with --record: BC runs' demonstrator (a DATA_TARGETS label), or 'scratch' / 'clone' "
                             "for PPO runs compared by steps to WARM_GOAL")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    import torch

    torch.set_num_threads(1)
    done = current(read_results(args.results))
    if args.record:
        for record in record_runs(args.record, args.fresh_games):
            if args.label in ("scratch", "clone"):
                record["warm"] = args.label
            elif args.label is not None:
                record.setdefault("data", {})["label"] = args.label
            with open(args.results, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
            done.append(record)
    elif not args.table_only:
        runs_dir = args.runs_dir or tempfile.mkdtemp(prefix="entmachin-learning-")
        os.makedirs(os.path.dirname(os.path.abspath(args.results)), exist_ok=True)
        for (env, frame), (budget, _, _) in TARGETS.items():
            if (args.env and env not in args.env) or (args.frame and frame not in args.frame):
                continue
            scaled = max(int(budget * args.budget_scale), 1)
            for seed in args.seeds:
                if any(r["env"] == env and r["frame"] == frame and r["seed"] == seed and r["budget"] == scaled
                       for r in done):
                    continue
                print(f"running {env} {frame} seed {seed} for {scaled:,} steps", flush=True)
                record = run_job(env, frame, seed, scaled, runs_dir, args.fresh_games)
                with open(args.results, "a", encoding="utf-8") as f:
                    f.write(json.dumps(record) + "\n")
                done.append(record)
        if args.runs_dir is None:
            shutil.rmtree(runs_dir, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.2f}; one torch thread per job")
    print(table(done))


if __name__ == "__main__":
    main()
