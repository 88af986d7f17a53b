"""save / load: round trips, weights_only files, versions, errors, and exact resume in a new process."""
import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from torch import nn

from entmachin.env import EnvList
from entmachin.frame.ppo import PPO
from entmachin.frame.collector import RolloutCollector
from entmachin.model import RogueNet, RogueNetConfig
from test.frame._frames import Sparse, dense_episode, dense_frame, entity_frame, entity_states

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def trained(**kwargs):
    frame = dense_frame(**kwargs)
    frame.store_episode(dense_episode(np.random.default_rng(0), 8))
    frame.update()
    return frame


def test_round_trip_restores_models_optimizers_and_rng(tmp_path):
    frame = trained(n_anneal_updates=10)
    frame.save(str(tmp_path))
    expected_rng = torch.get_rng_state()
    other = dense_frame(n_anneal_updates=10, seed=5)
    torch.manual_seed(123)
    other.load(str(tmp_path))
    for a, b in zip(frame.actor.state_dict().values(), other.actor.state_dict().values()):
        assert torch.equal(a, b)
    assert other.actor_optim.state_dict()["state"][0]["step"] == frame.actor_optim.state_dict()["state"][0]["step"]
    assert other.n_updates == 1 and torch.equal(torch.get_rng_state(), expected_rng)
    assert other._rng.bit_generator.state == frame._rng.bit_generator.state
    names = sorted(os.listdir(tmp_path))
    assert [re.sub(r"\.[0-9a-f]{12}\.", ".*.", n) for n in names] == [
        "actor_0.*.pt", "checkpoint_0.json", "critic_0.*.pt", "frame_state_0.*.pt"]
    for name in names:  # plain tensors and containers: loadable without unpickling code
        if name.endswith(".pt"):
            torch.load(os.path.join(tmp_path, name), weights_only=True)


def test_versions_and_network_map(tmp_path):
    frame = trained()
    frame.save(str(tmp_path), network_map={"actor": "policy"}, version=3)
    frame.update_lr_scheduler()
    frame.store_episode(dense_episode(np.random.default_rng(1), 4))
    frame.update()
    frame.save(str(tmp_path), network_map={"actor": "policy"}, version=7)
    other = dense_frame()
    other.load(str(tmp_path), network_map={"actor": "policy"})  # -1: the highest version
    assert other.n_updates == 2
    other.load(str(tmp_path), network_map={"actor": "policy"}, version=3)
    assert other.n_updates == 1


def test_models_act_in_eval_mode_from_construction_so_a_resumed_frame_acts_alike(tmp_path):
    def make():
        torch.manual_seed(0)
        envs = EnvList(Sparse, 4, seed=0)
        config = RogueNetConfig(d_model=8, n_layer=1, n_head=1, d_qk=8, resid_pdrop=0.5, embd_pdrop=0.5)
        net = RogueNet(envs.obs_space(), envs.action_space(), config)
        return PPO(net, net.critic(), torch.optim.Adam, nn.MSELoss(), seed=0, batch_size=8)

    frame = make()
    assert not frame.actor.training and not frame.critic.training  # dropout off while acting
    RolloutCollector(frame, EnvList(Sparse, 4, seed=1), n_steps=5).collect()
    frame.update()
    assert not frame.actor.training and not frame.critic.training
    frame.save(str(tmp_path))
    resumed = make()
    resumed.load(str(tmp_path))
    _, states = entity_states(Sparse, 4, 1, seed=3)
    rng = torch.get_rng_state()
    a = frame.act(states[0], collect_stats=False)
    torch.set_rng_state(rng)
    b = resumed.act(states[0], collect_stats=False)
    assert all(torch.equal(a.log_prob[k].data, b.log_prob[k].data) for k in a.log_prob)


def test_input_statistics_are_saved(tmp_path):
    envs = EnvList(Sparse, 3, seed=0)
    frame = entity_frame(envs)
    RolloutCollector(frame, envs, n_steps=3).collect()
    frame.update()
    frame.save(str(tmp_path))
    other = entity_frame(envs)
    other.load(str(tmp_path))
    stats = {k: v for k, v in frame.actor.state_dict().items() if k.endswith(("count", "mean", "squares_sum"))}
    assert stats and all(torch.equal(v, other.actor.state_dict()[k]) for k, v in stats.items())
    assert any(int(v) > 0 for k, v in stats.items() if k.endswith("count"))


def test_load_errors(tmp_path):
    frame = trained()
    with pytest.raises(FileNotFoundError, match=r"PPO.load: '.*nowhere' is not a directory"):
        frame.load(str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match=r"PPO.load: '.*' holds no checkpoint_<version>.json, the manifest "
                       r"every save publishes; nothing was saved there"):
        frame.load(str(tmp_path))
    frame.save(str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"holds no version 4; saved versions are \[0\]"):
        frame.load(str(tmp_path), version=4)
    with pytest.raises(ValueError, match=r"PPO.load: version must be an int >= -1 \(the highest saved\), got -2"):
        frame.load(str(tmp_path), version=-2)
    with pytest.raises(ValueError, match=r"PPO.save: version must be an int >= 0, got -1"):
        frame.save(str(tmp_path), version=-1)
    with pytest.raises(TypeError, match=r"PPO.save: network_map must map 'actor' / 'critic' to file names, got \['a'\]"):
        frame.save(str(tmp_path), network_map=["a"])
    with pytest.raises(ValueError, match=r"network_map has unknown key 'value'; allowed keys are \['actor', 'critic'\]"):
        frame.save(str(tmp_path), network_map={"value": "v"})
    from entmachin.frame.a2c import A2C

    with pytest.raises(ValueError, match=r"A2C.load: .* holds a 'PPO' save; expected a 'A2C' save"):
        dense_frame(A2C).load(str(tmp_path))
    lr_frame = dense_frame(lr_scheduler=torch.optim.lr_scheduler.StepLR, lr_scheduler_args=((1,), (1,)))
    with pytest.raises(ValueError, match=r"holds 2 optimizer\(s\) and 0 scheduler\(s\); this frame has 2 and 2"):
        lr_frame.load(str(tmp_path))
    critic_file = json.loads((tmp_path / "checkpoint_0.json").read_text())["files"]["critic"]["file"]
    os.remove(tmp_path / critic_file)
    with pytest.raises(FileNotFoundError, match=r"critic_0\.[0-9a-f]{12}\.pt' does not exist, but .*checkpoint_0.json' "
                       r"names it as 'critic'"):
        frame.load(str(tmp_path))


RESUME_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import torch
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(0)
    from entmachin.env import EnvList
    from entmachin.frame.collector import RolloutCollector
    from test.frame._frames import Sparse, entity_frame

    mode, directory, k, m = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    frame = entity_frame(EnvList(Sparse, 4, seed=0), n_anneal_updates=20, entropy_weight=-0.01,
                         actor_update_times=4, critic_update_times=4, batch_size=8)

    def one_update(i):
        envs = EnvList(Sparse, 4, seed=1000 + i)  # re-created with the same seed on resume
        RolloutCollector(frame, envs, n_steps=5).collect()
        stats = frame.update()
        return [stats[0], stats[1], frame.last_update.approx_kl, frame.last_update.entropy]

    losses = []
    if mode == "first":
        for i in range(k):
            one_update(i)
        frame.save(directory)
        losses = [one_update(i) for i in range(k, k + m)]
    else:
        frame.load(directory)
        losses = [one_update(i) for i in range(k, k + m)]
    print(json.dumps(losses))
    """
)


@pytest.mark.slow
def test_resume_in_a_new_process_repeats_the_uninterrupted_run(tmp_path):
    def run(mode):
        out = subprocess.run(
            [sys.executable, "-c", RESUME_SCRIPT, mode, str(tmp_path), "3", "3"],
            cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])

    uninterrupted = run("first")
    resumed = run("resume")
    assert resumed == uninterrupted
    assert len({tuple(x) for x in uninterrupted}) == 3  # the updates really differ
