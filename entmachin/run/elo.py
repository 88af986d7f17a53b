"""Elo ratings: the expected score of a game and the update after it.

A rating difference of 400 points means the stronger player is expected to score 10 times as much
as the weaker (``expected(1600, 1200) = 10/11``). A game's score is 1 for a win, 0.5 for a draw and
0 for a loss (``entmachin.env.multi_agent.RESULTS``).

Self-play rates the learner and each snapshot of its pool with :func:`updated` after every game
between them (start 1200, K = 16, ML-Agents' choices: with hundreds of games per update a larger K
mostly adds noise).
"""
from __future__ import annotations

import math
from typing import Tuple

__all__ = ["INITIAL_ELO", "ELO_K", "expected", "updated"]

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
