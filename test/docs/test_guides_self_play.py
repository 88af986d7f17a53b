"""guides/self-play.md: the game refused actions for the seat not to move, the rows are (environment, seat),
the opponent function played its matches, the short self-play run kept its pool, ratings and best checkpoint,
and from_pettingzoo made one seat per agent."""
import re

import numpy as np
import torch

PAGE = "guides/self-play.md"


def test_the_seat_not_to_move_has_no_actors_and_its_actions_are_refused(page):
    ns = page(PAGE)
    assert "seat '1'" in ns["refusal"] and "no actors for 'drop'" in ns["refusal"]
    assert list(ns["seen"]) == ["0", "1"]


def test_the_rows_are_environments_then_seats(page):
    rows = page(PAGE)["rows"]
    assert rows.env.tolist() == [0, 0, 1, 1] and rows.seat == ("0", "1", "0", "1")


def test_the_opponent_function_played_its_matches(page):
    match = page(PAGE)["match"]
    assert match.games == 20 and match.wins + match.draws + match.losses == 20
    low, high = match.interval()
    assert low <= match.win_rate <= high
    assert re.fullmatch(r"win rate \d\.\d{3} \(95% CI \d\.\d{3}-\d\.\d{3}\)", match.line())
    assert match.line() == "win rate 0.700 (95% CI 0.481-0.855)"  # as the page's comment says


def test_the_self_play_run_evaluated_against_both_opponents_and_kept_its_best(page):
    import json

    ns = page(PAGE)
    run = ns["__directory__"] / "runs" / "rps"
    records = json.loads((run / "eval.json").read_text())
    assert records and all(set(r["win_rate"]) == {"random", "scripted"} for r in records)
    assert list((run / "checkpoints" / "best").glob("checkpoint_*.json"))
    assert ns["duel"].games == 20 and ns["best"].games == 20


def test_the_self_play_run_saved_its_pool_and_logged_its_ratings(page):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = page(PAGE)["__directory__"] / "runs" / "rps"
    pools = sorted((run / "checkpoints").glob("selfplay_*.pt"))
    assert pools
    torch.load(pools[-1], weights_only=True)  # the pool reads as data
    events = EventAccumulator(str(run), size_guidance={"scalars": 0})
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"selfplay/elo", "selfplay/pool_size", "eval/win_rate/random", "eval/win_rate/scripted"} <= tags


def test_from_pettingzoo_made_one_seat_per_agent(page):
    rps = page(PAGE)["rps"]
    assert rps.row_index().seat == ("player_0", "player_1") * 2
    assert np.array_equal(rps.row_index().env, [0, 0, 1, 1])
