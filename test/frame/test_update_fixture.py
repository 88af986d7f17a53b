"""Three updates of PPO, A2C and DQN on MineSweeper reproduce the recorded losses and parameters.

The fixture ``update_fixture.json`` was first recorded before the frames were restructured; a
change that alters the arithmetic of an update on purpose re-records it (``python -m
test.frame.test_update_fixture``, which adds or replaces this machine's record) and says so.

Each record names the machine it was made on: the torch build, the CPU's vendor and the kernels
torch picked for it. On a machine with a record, losses and parameters must match it bit for bit
(a SHA-256 of the parameters' bytes). Elsewhere they are compared with the first record within
tolerances: another build or CPU vendor runs other kernels (MKL takes other paths on AMD than on
Intel), which round differently in the last bits. Losses then agree to about 2e-7, relatively;
parameters less closely, since Adam's step is normalised: a last-bit difference in a gradient
near zero can move a parameter by up to the learning rate (per-tensor sums differed by up to
4e-4 between an Intel and an AMD CPU with the same torch build).
"""
import copy
import hashlib
import json
import platform
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from entmachin.env import EnvList
from entmachin.env.examples import MineSweeper
from entmachin.frame import A2C, DQN, PPO, RolloutCollector
from entmachin.model import RogueNet, RogueNetConfig

FIXTURE = Path(__file__).with_name("update_fixture.json")
SMALL = RogueNetConfig(d_model=16, n_layer=1, n_head=2, d_qk=8)


def _envs():
    return EnvList(partial(MineSweeper, orbital_cannon=True), num_envs=8, seed=3)  # rewards from the first update


def _ppo():
    net = RogueNet(_envs().obs_space(), _envs().action_space(), SMALL)
    return PPO(net, net.critic(), torch.optim.Adam, nn.MSELoss(), batch_size=32, actor_update_times=4,
               critic_update_times=4, entropy_weight=-0.01, gradient_max=0.5, gae_lambda=0.95, value_clip=0.2,
               seed=1)


def _a2c():
    envs = _envs()
    actor = RogueNet(envs.obs_space(), envs.action_space(), SMALL)
    critic = RogueNet(envs.obs_space(), envs.action_space(), SMALL).critic()
    return A2C(actor, critic, torch.optim.Adam, nn.MSELoss(), batch_size=64, actor_update_times=1,
               critic_update_times=1, entropy_weight=-0.01, gradient_max=0.5, gae_lambda=0.95, seed=1)


def _dqn():
    envs = _envs()
    net = RogueNet(envs.obs_space(), envs.action_space(), SMALL, q_head="dueling")
    return DQN(net, copy.deepcopy(net), torch.optim.Adam, nn.MSELoss(), batch_size=32, epsilon_decay=0.99,
               gradient_max=1.0, replay_size=1000, seed=1)


def run(name):
    """The losses of three updates and the parameters after them (digest and per-tensor sums)."""
    torch.manual_seed(0)
    frame = {"ppo": _ppo, "a2c": _a2c, "dqn": _dqn}[name]()
    collector = RolloutCollector(frame, _envs(), n_steps=16)
    losses = []
    for _ in range(3):
        collector.collect()
        result = frame.update()
        losses.append([float(x) for x in (result if isinstance(result, tuple) else (result,))])
    net = frame.qnet if name == "dqn" else frame.actor
    params = [p.detach().contiguous() for p in net.parameters()]
    if name == "a2c":
        params += [p.detach().contiguous() for p in frame.critic.parameters()]
    digest = hashlib.sha256(b"".join(p.numpy().tobytes() for p in params)).hexdigest()
    return {"losses": losses, "sha256": digest, "sums": [float(p.double().sum()) for p in params]}


def machine():
    """What decides the last bits of an update here: the torch build, the CPU's vendor and the
    CPU kernels torch chose (AVX2, AVX512, ...)."""
    vendor = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            vendor = next((line.split(":", 1)[1].strip() for line in f if line.startswith("vendor_id")), vendor)
    except OSError:
        pass
    return {"torch": torch.__version__, "cpu_vendor": vendor, "cpu_capability": torch.backends.cpu.get_cpu_capability()}


@pytest.mark.parametrize("name", ["ppo", "a2c", "dqn"])
def test_three_updates_match_the_fixture(name):
    records = json.loads(FIXTURE.read_text())["records"]
    here = [r for r in records if r["machine"] == machine()]
    got = run(name)
    if here:
        expected = here[0]["frames"][name]
        assert got["losses"] == expected["losses"]
        assert got["sha256"] == expected["sha256"]
        assert got["sums"] == expected["sums"]
    else:
        expected = records[0]["frames"][name]
        np.testing.assert_allclose(got["losses"], expected["losses"], rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(got["sums"], expected["sums"], rtol=1e-3, atol=1e-3)


if __name__ == "__main__":
    records = json.loads(FIXTURE.read_text())["records"] if FIXTURE.exists() else []
    records = [r for r in records if r["machine"] != machine()]
    records.append({"machine": machine(), "frames": {n: run(n) for n in ("ppo", "a2c", "dqn")}})
    FIXTURE.write_text(json.dumps({"records": records}, indent=1) + "\n")
    print(f"recorded {FIXTURE} for {machine()}", file=sys.stderr)
