"""Elo ratings: the expected score of a game and the update after it.

A rating difference of 400 points means the stronger player is expected to score 10 times as much
as the weaker (``expected(1600, 1200) = 10/11``). A game's score is 1 for a win, 0.5 for a draw and
0 for a loss (``entmachin.env.multi_agent.RESULTS``).

Self-play rates the learner and each snapshot of its pool with :func:`updated` after every game
between them (start 1200, K = 16, ML-Agents' choices: with hundreds of games per update a larger K
mostly adds noise). Online updates depend on the order of the games; :func:`fit_ratings` rates
a table of results at once, order aside (``entmachin league``).
"""
from __future__ import annotations

import math
from typing import Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

__all__ = ["INITIAL_ELO", "ELO_K", "expected", "updated", "fit_ratings"]

INITIAL_ELO = 1200.0
ELO_K = 16.0


def expected(rating: float, other: float) -> float:
    """The expected score of a player rated ``rating`` against one rated ``other``."""
    return 1.0 / (1.0 + math.pow(10.0, (other - rating) / 400.0))


def updated(rating: float, other: float, score: float, k: float = ELO_K) -> Tuple[float, float]:
    """Both ratings after a game in which the first player scored ``score`` (1 / 0.5 / 0).

    The update is zero-sum: what one player gains the other loses.
    """
    change = k * (score - expected(rating, other))
    return rating + change, other - change


def fit_ratings(results: Mapping[Tuple[str, str], Sequence[float]], players: Optional[Sequence[str]] = None, *,
                anchor: Optional[str] = None, anchor_elo: float = INITIAL_ELO, prior_draws: float = 1.0,
                tol: float = 1e-10, max_iter: int = 100_000) -> Dict[str, float]:
    """Elo ratings that fit a table of results best, whatever the order of its players and games.

    The Bradley-Terry model gives each player a strength ``g`` and ``P(i beats j) = g_i / (g_i + g_j)``,
    which is :func:`expected` with ``R = 400 log10 g``. The ratings maximise the likelihood of every game
    (a draw counts as half a win and half a loss), found by Hunter's MM iterations
    ``g_i <- S_i / sum_j N_ij / (g_i + g_j)`` (``S_i``: i's score, ``N_ij``: games of i and j). At the fit
    each player's score equals its expected score, game by game summed.

    Prior: ``prior_draws`` virtual draws of every player against the anchor. They keep a player that won
    (or lost) every game finite and link players that never met, and pull each rating towards the
    anchor's by about as much as that many real games would.

    Args:
        results: ``{(a, b): (wins, draws, losses)}``: a's results against b; ``(a, b)`` and ``(b, a)`` add up.
        players: every player (default: those ``results`` names, in order of appearance).
        anchor: the player rated ``anchor_elo`` (default: ``random`` where it plays, else the first player).

    Returns:
        Each player's rating, in the order of ``players``.

    Raises:
        ValueError: a count is negative or not finite, a pair names an unknown player or one player twice,
            a player played no game, the anchor is not a player, or ``prior_draws`` is not > 0.
    """
    names = list(players) if players is not None else list(dict.fromkeys(p for pair in results for p in pair))
    index = {name: i for i, name in enumerate(names)}
    if len(index) != len(names):
        raise ValueError(f"fit_ratings: players {names} name a player twice")
    if not prior_draws > 0:
        raise ValueError(f"fit_ratings: prior_draws must be > 0, got {prior_draws!r}")
    n = len(names)
    score = np.zeros((n, n))  # [n, n]: score[i, j] is i's wins and half its draws against j
    for (a, b), counts in results.items():
        if unknown := [p for p in (a, b) if p not in index]:
            raise ValueError(f"fit_ratings: results[{a!r}, {b!r}] names {unknown[0]!r}, not one of the players {names}")
        if a == b:
            raise ValueError(f"fit_ratings: results[{a!r}, {b!r}] pairs {a!r} with itself")
        wins, draws, losses = (float(c) for c in counts)
        if not all(math.isfinite(c) and c >= 0 for c in (wins, draws, losses)):
            raise ValueError(f"fit_ratings: results[{a!r}, {b!r}] = {tuple(counts)}; expected (wins, draws, losses) "
                             "counts >= 0")
        score[index[a], index[b]] += wins + draws / 2
        score[index[b], index[a]] += losses + draws / 2
    if idle := [name for name, games in zip(names, (score + score.T).sum(1)) if games == 0]:
        raise ValueError(f"fit_ratings: {idle[0]!r} played no game; rate players with results only")
    anchor = anchor if anchor is not None else "random" if "random" in index else names[0]
    if anchor not in index:
        raise ValueError(f"fit_ratings: anchor {anchor!r} is not one of the players {names}")
    k = index[anchor]
    score[k, :] += prior_draws / 2  # the prior's draws: half a point each way
    score[:, k] += prior_draws / 2
    score[k, k] = 0.0
    games, wins = score + score.T, score.sum(1)  # [n, n], [n]
    strength = np.ones(n)  # [n]
    for _ in range(max_iter):
        new = wins / (games / (strength[:, None] + strength[None, :])).sum(1)  # [n]
        new /= new[k]  # the likelihood ignores a common factor: fix the anchor's
        change, strength = np.max(np.abs(np.log(new / strength))), new
        if change < tol:
            break
    return {name: float(anchor_elo + 400.0 * math.log10(g)) for name, g in zip(names, strength)}
