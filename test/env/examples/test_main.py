import pytest

from entmachin.env.examples.__main__ import main


def test_random_rollout_prints_counts_and_returns(capsys):
    assert main(["Count", "--num-envs", "3", "--steps", "5", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "Count: 3 environments x 5 steps, random policy, seed 1" in out
    assert "entities" in out and "episodes 15: return mean" in out


def test_parallel_rollout_with_constructor_keywords(capsys):
    args = ["MineSweeper", "--num-envs", "3", "--steps", "3", "--processes", "2", "--kwargs", '{"orbital_cannon": true}']
    assert main(args) == 0
    assert "Orbital Cannon: mean   1.00" in capsys.readouterr().out


@pytest.mark.parametrize("args", [["Nope"], ["Count", "--steps", "0"], ["Count", "--kwargs", "{bad json"]])
def test_bad_arguments_exit_with_usage(args, capsys):
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_games_of_several_players_step_one_row_per_seat_here_and_in_workers(capsys):
    for extra in ([], ["--processes", "2"]):
        assert main(["ConnectFour", "--num-envs", "2", "--steps", "60", "--seed", "1", *extra]) == 0
        out = capsys.readouterr().out
        assert "ConnectFour: 2 environments x 60 steps, seats ['0', '1'] (one row each), random policy, seed 1" in out
        assert "seat 0: win" in out and "entities           Column: mean   7.00" in out


def test_continuous_and_hybrid_actions_step_here_and_in_workers(capsys):
    for name, extra in (("Vehicles", []), ("Turrets", ["--processes", "2"])):
        assert main([name, "--num-envs", "3", "--steps", "60", "--seed", "2", *extra]) == 0
        out = capsys.readouterr().out
        assert f"{name}: 3 environments x 60 steps, random policy, seed 2" in out and "return mean" in out
