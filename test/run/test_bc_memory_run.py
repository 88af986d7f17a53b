"""``frame.name: BC`` with ``model.memory``: the config's rules, a run on recorded episodes, and data refused."""
import numpy as np
import pytest

pytest.importorskip("pyarrow")

from entmachin.data import Dataset  # noqa: E402
from entmachin.run import train  # noqa: E402
from entmachin.run.cloning import episode_order  # noqa: E402
from entmachin.run.config import ConfigError, config_from_dict  # noqa: E402
from entmachin.run.logs import RunError  # noqa: E402
from entmachin.run.record import record  # noqa: E402

DEMONSTRATOR = "test.frame.test_bc_memory:demonstrate"


def _config(data, **frame):
    return {"env": {"name": "Recall"},
            "model": {"n_layer": 1, "d_model": 16, "critic": "shared", "memory": {"kind": "gru", "size": 16}},
            "frame": {"name": "BC", "batch_size": 40, "actor_learning_rate": 0.01, "critic_learning_rate": 0.01,
                      **frame},
            "bc": {"data": data, "rows_per_update": 100, "validation": 0.1},
            "train": {"total_steps": 200},
            "log": {"eval_interval": 200, "checkpoint_interval": 200, "eval_episodes": 4}}


@pytest.fixture(scope="module")
def recall_data(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("data") / "recall")
    record("Recall", DEMONSTRATOR, 40, out, num_envs=1, progress=False)
    return out


def test_bc_takes_memory_and_refuses_burn_in():
    config = config_from_dict(_config("DIR", sequence_length=3))
    assert config.frame.name == "BC" and config.frame.settings.sequence_length == 3
    with pytest.raises((ConfigError, ValueError), match="frame.burn_in"):
        config_from_dict(_config("DIR", burn_in=2))
    with pytest.raises(ConfigError, match="model.critic: separate"):
        config_from_dict({**_config("DIR"), "model": {**_config("DIR")["model"], "critic": "separate"}})


def test_a_bc_run_with_memory_trains_on_whole_episodes(recall_data, tmp_path):
    frame = train(config_from_dict(_config(recall_data, sequence_length=2)), progress=False,
                  run_dir=str(tmp_path / "run"))
    assert frame.actor.memory_size == 16 and frame.last_update.minibatches > 0
    assert frame.n_updates == 2  # 100 rows of whole 5-step episodes an update


def test_a_sequence_longer_than_every_episode_is_refused(recall_data, tmp_path):
    with pytest.raises(RunError, match="frame.sequence_length: 9, but the longest training episode .* has 5"):
        train(config_from_dict(_config(recall_data, sequence_length=9)), progress=False, run_dir=str(tmp_path / "r"))


def test_an_episode_with_missing_steps_is_refused(recall_data):
    rows = Dataset(recall_data).read()
    acting = np.flatnonzero(~rows.final)
    order, ids = episode_order(rows, acting[::-1].copy(), "here")  # any order in: episode order out
    assert np.all(np.diff(ids) >= 0) and rows.step[order][:5].tolist() == [0, 1, 2, 3, 4]
    gap = acting[acting != np.flatnonzero((rows.episode == 3) & (rows.step == 2))[0]]
    with pytest.raises(RunError, match="episode 3 .* has step 3 where step 2 should be"):
        episode_order(rows, gap, "here")


def test_recording_a_policy_with_memory_carries_each_rows_state_through_its_episodes(tmp_path, monkeypatch):
    """The recorded probabilities of a network whose memory moves its choices are those of a step-by-step
    replay of each episode from its start, carrying the state (three rows recorded together)."""
    import torch

    from entmachin.env.examples import Recall
    from entmachin.frame import PPO
    from entmachin.model.config import MemoryConfig, RogueNetConfig
    from entmachin.model.rogue_net import RogueNet
    from entmachin.run import evaluation

    torch.manual_seed(0)
    e = Recall()
    net = RogueNet(e.obs_space(), e.action_space(), RogueNetConfig(d_model=16, n_layer=1, memory=MemoryConfig(size=8)))
    torch.nn.init.normal_(net.memory.out.weight)
    frame = PPO(net, net.critic(), torch.optim.Adam, torch.nn.MSELoss())
    monkeypatch.setattr(evaluation, "load_trained", lambda *args: (frame, None, None))
    out = str(tmp_path / "data")
    record("Recall", str(tmp_path), 6, out, num_envs=3, progress=False)
    rows = Dataset(out).read()
    order, ids = episode_order(rows, np.flatnonzero(~rows.final), "test")
    state, compared = torch.zeros(1, 8), 0
    for place, r in enumerate(order):
        one = rows.take(np.array([r]))
        start = torch.tensor([[place == 0 or ids[place] != ids[place - 1]]])
        with torch.no_grad():
            tables, _, after = net.probabilities_values_and_memory(
                one.state()["entities"], one.state()["action_masks"], None, state, start)
        state = after.memory
        if tables["choose"].data.shape[0]:
            recorded = one.probs["choose"][0].as_array()[:, 0]
            np.testing.assert_allclose(tables["choose"].data[0].numpy(), recorded, atol=1e-5)
            compared += 1
    assert compared == 6


def _per_entity(data, env, **kwargs):
    config = _config(data, sequence_length=2)
    return {**config, "env": {"name": env, "kwargs": kwargs},
            "model": {**config["model"], "memory": {"size": 8, "per_entity": True}}}


def test_a_bc_run_with_per_entity_memory_numbers_the_recorded_ids(tmp_path):
    """Conveyor's demonstrator recorded with its items' ids: a BC run keeps a state per item."""
    out = str(tmp_path / "conveyor")
    record("Conveyor", "test.frame.test_bc_entity_memory:demonstrate", 20, out, num_envs=1, progress=False)
    frame = train(config_from_dict(_per_entity(out, "Conveyor")), progress=False, run_dir=str(tmp_path / "run"))
    assert frame.actor.entity_memory_size == 8 and frame.n_updates == 2


def test_a_recording_without_the_ids_per_entity_memory_needs_is_refused_by_name(tmp_path):
    """Connect Four gives its pieces no ids: its recordings keep none, which per-entity memory needs."""
    out = str(tmp_path / "c4")
    record("ConnectFour", "random", 4, out, num_envs=2, progress=False)
    with pytest.raises(RunError, match=r"bc.data: .*c4: the rows keep no ids of 'Mine' entities \(ids/Mine\)"):
        train(config_from_dict(_per_entity(out, "ConnectFour", choose="column")), progress=False, run_dir=str(tmp_path / "r"))
