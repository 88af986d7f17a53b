"""The fingerprint of what a run config decides about learning (entmachin.run.fingerprint)."""
import pytest

from entmachin.run.config import config_from_dict, config_to_dict
from entmachin.run.fingerprint import ABSENT, fingerprint, learning_settings


def _print(data, continuous=False):
    return fingerprint(learning_settings(data, continuous_actions=continuous))


def _data(**sections):
    return config_to_dict(config_from_dict({"env": {"name": "Count"}, **sections}))


def test_execution_settings_leave_the_fingerprint_as_it_is():
    base = _print(_data())
    for sections in ({"model": {"compile": True}}, {"rollout": {"overlap": False, "processes": 2}},
                     {"train": {"device": "cuda", "threads": 4}}, {"log": {"run_dir": "x", "eval_interval": 7}},
                     {"distributed": {"timeout": 5.0}}, {"env": {"name": "Count", "check_finite": False}},
                     {"frame": {"visualize": True}}):
        assert _print(_data(**sections)) == base, sections


@pytest.mark.parametrize("sections", [
    {"frame": {"actor_learning_rate": 0.01}}, {"frame": {"n_epochs": 2}}, {"rollout": {"n_steps": 8}},
    {"rollout": {"num_envs": 64}}, {"model": {"d_model": 64}}, {"env": {"name": "Count", "max_episode_steps": 9}},
    {"log": {"eval_episodes": 5}}, {"log": {"eval_deterministic": True}},
])
def test_what_changes_learning_or_its_figures_changes_the_fingerprint(sections):
    assert _print(_data(**sections)) != _print(_data())


def test_a_field_from_before_runs_were_recorded_counts_only_away_from_its_before_value():
    """Data from before ``rollout.overlap``, ``model.kind`` or ``log.eval_opponents`` existed reads as what those
    runs did; the same field set to something else counts."""
    now = _data()
    old = {section: dict(values) for section, values in now.items()}
    for section, name in (("rollout", "overlap"), ("model", "compile"), ("model", "kind"), ("model", "d_hidden"),
                          ("log", "eval_opponents"), ("log", "eval_max_steps"), ("selfplay", None), ("bc", None)):
        if name is None:
            old.pop(section)
        else:
            old[section].pop(name)
    assert _print(old) == _print(now)
    assert _print(_data(log={"eval_max_steps": 50})) != _print(now)


def test_a_missing_field_that_declares_no_before_value_counts_as_absent():
    old = _data()
    del old["frame"]["value_clip"]
    assert learning_settings(old, continuous_actions=False)["frame"]["value_clip"] == ABSENT
    assert _print(old) != _print(_data())


def test_fields_the_run_does_not_read_are_left_out():
    base = _data()
    assert _print(_data(model={"q_head": "dueling"})) == _print(base)  # PPO reads no Q-head
    assert _print(_data(bc={"rows_per_update": 512})) == _print(base)  # not behaviour cloning
    assert _print(_data(selfplay={"window": 3})) == _print(base)  # seats: all, no pool
    assert _print(_data(model={"continuous": "beta"})) == _print(base)  # no continuous action
    assert _print(_data(model={"continuous": "beta"}), True) != _print(base, True)


def test_a_code_revision_of_a_feature_stales_the_configs_that_use_it_only():
    from entmachin.run.fingerprint import REVISIONS, revisions

    pool = _data(selfplay={"seats": "random"})
    assert revisions(pool) == {"selfplay": REVISIONS["selfplay"][0]} and REVISIONS["selfplay"][0] >= 2
    assert revisions(_data()) == {}  # one policy for every seat: no pool, nothing revised
    settings = learning_settings(pool, continuous_actions=False)
    old, now = fingerprint(settings, {}), fingerprint(settings, revisions(pool))
    assert old != now and fingerprint(settings, {"selfplay": 1}) == old  # a record without revisions: revision 1
    plain = learning_settings(_data(), continuous_actions=False)
    assert fingerprint(plain, revisions(_data())) == fingerprint(plain)
    assert _print(_data(selfplay={"seats": "random", "sampling": "uniform"})) == _print(pool)  # `before` keeps it
    assert _print(_data(selfplay={"seats": "random", "sampling": "pfsp"})) != _print(pool)
