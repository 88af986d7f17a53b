"""Elo ratings fitted to a table of results: they recover known ratings, ignore order, stay finite."""
import numpy as np
import pytest

from entmachin.run.elo import INITIAL_ELO, expected, fit_ratings

TRUE = {"random": 1200.0, "early": 1350.0, "weak": 1050.0, "late": 1500.0, "best": 1800.0}


def simulated(ratings, games, rng):
    """``games`` games of every pair, drawn from the Elo model with some draws (expected scores kept)."""
    names, table = list(ratings), {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            p = expected(ratings[a], ratings[b])
            draw = 0.4 * min(p, 1 - p)
            table[a, b] = tuple(int(c) for c in rng.multinomial(games, [p - draw / 2, draw, 1 - p - draw / 2]))
    return table


def test_many_simulated_games_recover_the_rating_differences():
    fitted = fit_ratings(simulated(TRUE, 4000, np.random.default_rng(0)))
    assert fitted["random"] == INITIAL_ELO  # random is the anchor wherever it plays
    for name, rating in TRUE.items():
        assert fitted[name] == pytest.approx(rating, abs=25), (name, fitted)


def test_at_the_fit_every_score_is_its_expected_score():
    """The likelihood's stationary point, computed with the Elo formula (prior draws against the anchor included)."""
    table = simulated(TRUE, 50, np.random.default_rng(1))
    fitted = fit_ratings(table)
    for name in TRUE:
        score = expected_score = 0.0
        for (a, b), (wins, draws, losses) in table.items():
            if name in (a, b):
                mine = (wins + draws / 2) if name == a else (losses + draws / 2)
                other = b if name == a else a
                score += mine
                expected_score += (wins + draws + losses) * expected(fitted[name], fitted[other])
        for other in (TRUE if name == "random" else ["random"]):  # the prior: one draw of each player with random
            if other != name:
                score += 0.5
                expected_score += expected(fitted[name], fitted[other])
        assert score == pytest.approx(expected_score, abs=1e-6), name


def test_the_fit_ignores_the_order_of_players_and_games_and_the_sides_of_a_pair():
    table = simulated(TRUE, 30, np.random.default_rng(2))
    fitted = fit_ratings(table, list(TRUE))
    rng = np.random.default_rng(3)
    for _ in range(3):
        keys = [list(table)[i] for i in rng.permutation(len(table))]
        turned = {}
        for a, b in keys:  # half the pairs seen from the other side, as (losses, draws, wins)
            wins, draws, losses = table[a, b]
            if rng.random() < 0.5:
                turned[b, a] = (losses, draws, wins)
            else:
                turned[a, b] = (wins, draws, losses)
        players = [list(TRUE)[i] for i in rng.permutation(len(TRUE))]
        again = fit_ratings(turned, players)
        assert list(again) == players
        assert again == pytest.approx(fitted, abs=1e-6)
    split = dict(table)  # a pair's games given in two entries add up
    wins, draws, losses = split.pop(("random", "best"))
    split["random", "best"], split["best", "random"] = (wins, draws, 0), (losses, 0, 0)
    assert fit_ratings(split, list(TRUE)) == pytest.approx(fitted, abs=1e-6)


def test_a_player_that_won_every_game_is_rated_finite_and_highest():
    table = {("champion", "random"): (20, 0, 0), ("champion", "middle"): (20, 0, 0), ("middle", "random"): (12, 2, 6)}
    fitted = fit_ratings(table)
    assert np.isfinite(list(fitted.values())).all()
    assert max(fitted, key=fitted.get) == "champion"
    assert fitted["random"] == INITIAL_ELO and fitted["middle"] > INITIAL_ELO
    assert fit_ratings({("a", "b"): (3, 0, 1)})["a"] == INITIAL_ELO  # without random, the first player anchors
    assert fit_ratings({("a", "b"): (3, 0, 1)}, anchor="b", anchor_elo=1000)["b"] == 1000


def test_bad_tables_are_refused_naming_what_is_wrong():
    with pytest.raises(ValueError, match=r"results\['a', 'b'\] = \(3, -1, 0\)"):
        fit_ratings({("a", "b"): (3, -1, 0)})
    with pytest.raises(ValueError, match="names 'c', not one of the players"):
        fit_ratings({("a", "c"): (1, 0, 0)}, ["a", "b"])
    with pytest.raises(ValueError, match="'b' played no game"):
        fit_ratings({("a", "c"): (1, 0, 0), ("b", "c"): (0, 0, 0)})
    with pytest.raises(ValueError, match="'d' played no game"):
        fit_ratings({("a", "c"): (1, 0, 0)}, ["a", "c", "d"])
    with pytest.raises(ValueError, match="pairs 'a' with itself"):
        fit_ratings({("a", "a"): (1, 0, 0)})
    with pytest.raises(ValueError, match="anchor 'z'"):
        fit_ratings({("a", "b"): (1, 0, 0)}, anchor="z")
    with pytest.raises(ValueError, match="prior_draws"):
        fit_ratings({("a", "b"): (1, 0, 0)}, prior_draws=0)
