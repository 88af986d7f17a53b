"""``entmachin league``: every kept checkpoint of some runs of one game plays every other, rated by Elo.

The players are each checkpoint of each run, named ``<run directory's name>@<env steps>``, and
``random``. Every pair plays ``games`` games, seats alternating (:func:`entmachin.run.matches.play_matches`),
both sides sampling their actions unless ``deterministic``. :func:`entmachin.run.elo.fit_ratings` rates
the whole table at once, ``random`` at 1200: the rating an untrained policy, and a learner starting
self-play, are given, so the scales compare. A run keeps only its latest ``log.keep_checkpoints``
checkpoints (5 by default; null keeps all), so train with more to see a longer history. With
``best`` each run's best checkpoint (``log.best``, :mod:`entmachin.run.best`) plays too, as
``<run>@best`` (``best: true`` in ``league.json``; left out of the plot's lines).

Everything is seeded from ``seed`` (default: the first run's evaluation seed, ``seeds(config)["eval"]``),
each pair from its own stream, so the same command gives the same table. The table goes to
``league.json`` and the ratings against environment steps to ``league.png``, in ``out``.
"""
from __future__ import annotations

import itertools
import json
import logging
import os
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from entmachin.env.multi_agent import is_multi_agent
from entmachin.frame.checkpoint_files import manifest_versions
from entmachin.run.best import BEST, best_version
from entmachin.run.build import seeds
from entmachin.run.envs import EnvFactory
from entmachin.run.elo import INITIAL_ELO, fit_ratings
from entmachin.run.evaluation import eval_envs, load_trained, run_dir_of
from entmachin.files import atomic_write
from entmachin.run.logs import RunError, load_run_config
from entmachin.run.matches import MatchResult, PolicyPlayer, RandomPlayer, play_matches
from entmachin.run.spaces import space_differences, spaces_record

__all__ = ["LeaguePlayer", "LeaguePair", "LeagueResult", "league"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class LeaguePlayer(MatchResult):
    """One player's rating and results against every other (``run`` and ``env_steps`` are None for
    ``random``); its ``win_rate`` is the share of points it won."""

    name: str
    run: Optional[str]
    env_steps: Optional[int]
    elo: float
    best: bool = False


@dataclass(frozen=True)
class LeaguePair:
    """The games of one pair: ``first``'s wins, draws and losses against ``second``."""

    first: str
    second: str
    wins: int
    draws: int
    losses: int


@dataclass(frozen=True)
class LeagueResult:
    """A league's players, best first, the results of every pair, and its settings."""

    players: Tuple[LeaguePlayer, ...]
    pairs: Tuple[LeaguePair, ...]
    runs: Tuple[str, ...]
    env: str
    games: int
    seed: int
    deterministic: bool
    out: str

    def table(self) -> List[str]:
        """The Elo table as lines of text, best first."""
        width = max(len("player"), *(len(p.name) for p in self.players))
        lines = [f"{'player':<{width}}  {'env steps':>10}  {'Elo':>6}  {'games':>6}  {'score':>6}"]
        for p in self.players:
            steps = "-" if p.env_steps is None else str(p.env_steps)
            lines.append(f"{p.name:<{width}}  {steps:>10}  {p.elo:>6.0f}  {p.games:>6}  {100 * p.win_rate:>5.1f}%")
        return lines

    def record(self) -> Dict[str, Any]:
        """What ``league.json`` holds."""
        return {"settings": {"runs": list(self.runs), "env": self.env, "games": self.games, "seed": self.seed,
                             "deterministic": self.deterministic},
                "players": [{**asdict(p), "elo": round(p.elo, 1)} for p in self.players],
                "pairs": [asdict(pair) for pair in self.pairs]}


@dataclass(frozen=True)
class _Run:
    path: str
    label: str
    config: Any
    versions: Tuple[int, ...]
    best: Optional[int] = None  # the best checkpoint's steps, where the league plays it


def league(run_dirs: Sequence[str], games: int = 50, seed: Optional[int] = None, deterministic: bool = False,
           out: Optional[str] = None, best: bool = False) -> LeagueResult:
    """Plays every checkpoint of ``run_dirs`` (``best``: and each run's best checkpoint) and ``random``
    against each other; writes ``league.json`` and ``league.png`` in ``out`` (default: the first run
    directory). See the module doc.

    Raises:
        RunError: no run, a directory that is not a run or holds no checkpoint, a run given twice,
            runs of other environments or spaces, a game of one player, ``games`` < 1 or ``seed`` < 0;
            with ``best``, a run without a best checkpoint.
        CheckpointError: a damaged checkpoint.
    """
    if isinstance(games, bool) or not isinstance(games, int) or games < 1:
        raise RunError(f"--games: expected an int >= 1, got {games!r}")
    runs = _runs(run_dirs, best)
    factory = _one_game(runs)
    seed = seeds(runs[0].config)["eval"] if seed is None else seed
    if seed < 0:
        raise RunError(f"--seed: expected an int >= 0, got {seed}")
    obs_space, action_space = factory.spaces()
    frames: Dict[str, Any] = {"random": None}
    steps: Dict[str, Tuple[Optional[str], Optional[int]]] = {"random": (None, None)}
    for run in runs:
        for version in run.versions:
            name = f"{run.label}@{version}"
            frames[name], _, _ = load_trained(run.path, factory, version)
            steps[name] = (run.path, version)
        if run.best is not None:
            frames[f"{run.label}@{BEST}"], _, _ = load_trained(run.path, factory, BEST)
            steps[f"{run.label}@{BEST}"] = (run.path, run.best)
    results: Dict[Tuple[str, str], Tuple[int, int, int]] = {}
    for k, pair in enumerate(itertools.combinations(frames, 2)):
        env_seed, torch_seed, rng_seed = np.random.SeedSequence([seed, k]).generate_state(3)
        torch.manual_seed(int(torch_seed))  # the policies sample with torch's generator
        rng = np.random.default_rng(rng_seed)
        first, second = (RandomPlayer(obs_space, action_space, rng) if frames[name] is None else
                         PolicyPlayer(frames[name], obs_space, action_space, deterministic, name) for name in pair)
        result = play_matches(factory, first, second, games, int(env_seed), num_envs=eval_envs(games))
        results[pair] = (result.wins, result.draws, result.losses)
    ratings = fit_ratings(results, list(frames), anchor="random", anchor_elo=INITIAL_ELO)
    totals = {name: np.zeros(3, dtype=int) for name in frames}  # wins, draws, losses
    for (a, b), counts in results.items():
        totals[a] += counts
        totals[b] += counts[::-1]
    players = sorted((LeaguePlayer(name=name, run=steps[name][0], env_steps=steps[name][1], elo=ratings[name],
                                   wins=int(totals[name][0]), draws=int(totals[name][1]), losses=int(totals[name][2]),
                                   best=name.endswith(f"@{BEST}"))
                      for name in frames),
                     key=lambda p: -p.elo)
    outcome = LeagueResult(tuple(players), tuple(LeaguePair(a, b, *counts) for (a, b), counts in results.items()),
                           tuple(run.path for run in runs), factory.name, games, seed, deterministic,
                           out or runs[0].path)
    _write(outcome)
    return outcome


def _runs(run_dirs: Sequence[str], best: bool = False) -> List[_Run]:
    """Each run's directory, label, config and checkpoint versions (warning of a run with one), and with
    ``best`` its best checkpoint's steps."""
    if not run_dirs:
        raise RunError("a league needs at least one run directory")
    if named := [path for path in run_dirs if os.path.normpath(path) != run_dir_of(path)
                 and os.path.basename(os.path.normpath(path)) == BEST]:
        raise RunError(f"{named[0]!r}: a league takes run directories (every checkpoint of each); --best adds each "
                       "run's best checkpoint")
    paths = [run_dir_of(path) for path in run_dirs]
    if twice := [path for path in paths if paths.count(path) > 1]:
        raise RunError(f"{twice[0]!r} is named twice; name each run once")
    labels = [os.path.basename(os.path.abspath(path)) for path in paths]
    if len(set(labels)) < len(labels):  # runs of one name in other places: name them by their paths
        root = os.path.commonpath([os.path.abspath(path) for path in paths])
        labels = [os.path.relpath(os.path.abspath(path), root) for path in paths]
    runs = []
    for path, label in zip(paths, labels):
        config = load_run_config(path)
        checkpoints = os.path.join(path, "checkpoints")
        versions = tuple(manifest_versions(checkpoints)) if os.path.isdir(checkpoints) else ()
        if not versions:
            raise RunError(f"{path!r} holds no checkpoint; train it first (entmachin train --run-dir {path})")
        if len(versions) == 1:
            logger.warning("%s has one checkpoint (version %d): its Elo is one point. A run keeps its latest "
                           "log.keep_checkpoints checkpoints (%s here; null keeps all)", path, versions[0],
                           "null" if config.log.keep_checkpoints is None else config.log.keep_checkpoints)
        best_steps = best_version(checkpoints) if best else None
        if best and best_steps is None:
            raise RunError(f"--best: {path!r} has no best checkpoint ({os.path.join(checkpoints, BEST)!r} holds none; "
                           f"log.best is {config.log.best or 'null'}); leave --best out or name runs that keep one")
        runs.append(_Run(path, label, config, versions, best_steps))
    return runs


def _one_game(runs: Sequence[_Run]) -> EnvFactory:
    """The environment every run trains on, a game of several players (else RunError naming the run)."""
    first = runs[0]
    factory = EnvFactory(first.config.env)
    env = factory()
    try:
        if not is_multi_agent(env):
            raise RunError(f"{first.path!r} trains {factory.name}, which has one player; a league needs a game of "
                           "several")
    finally:
        env.close()
    spaces = spaces_record(*factory.spaces())
    for run in runs[1:]:
        if run.config.env.name != first.config.env.name:
            raise RunError(f"{run.path!r} trains {run.config.env.name}, {first.path!r} trains "
                           f"{first.config.env.name}; a league's runs play one game")
        if differences := space_differences(spaces, spaces_record(*EnvFactory(run.config.env).spaces())):
            raise RunError(f"{run.path!r} trains {run.config.env.name} with other spaces than {first.path!r}: "
                           + "; ".join(differences))
    return factory


def _write(outcome: LeagueResult) -> None:
    """``league.json`` and ``league.png`` in ``outcome.out``: one line per run, labelled as its players are."""
    from entmachin.run.plot import plot_league  # matplotlib only when a league is written

    os.makedirs(outcome.out, exist_ok=True)
    atomic_write(os.path.join(outcome.out, "league.json"), json.dumps(outcome.record(), indent=1).encode())
    lines: Dict[str, List[Tuple[int, float]]] = {}
    for p in sorted((p for p in outcome.players if p.run is not None and not p.best),
                    key=lambda p: (outcome.runs.index(p.run), p.env_steps)):  # the runs in the order named
        lines.setdefault(p.name.rsplit("@", 1)[0], []).append((p.env_steps, p.elo))
    random_elo = next(p.elo for p in outcome.players if p.run is None)
    plot_league(os.path.join(outcome.out, "league.png"), lines, random_elo)
