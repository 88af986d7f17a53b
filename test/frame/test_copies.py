"""How many times an entity's features are copied between the VecObs and update()'s minibatches.

Every entity of the test environment carries a unique id as its feature value. The test counts,
per id, the new storage that holds it: every torch operator's output (a dispatch mode sees all
of them; views and uninitialised allocations are not copies) and every copy made of a
``RaggedArray`` (its conversion to arrays, concatenation and row selection). Not counted: the
environment building its ``VecObs`` (the origin), the models' own forwards (computation, not
storage of the rollout) and update()'s minibatch gathers (``Rollout.minibatch``, and the batched
gathers of the old log-probabilities).
"""
import contextlib
import functools

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

import entmachin.frame.a2c as losses_module
import entmachin.ragged.tensor as tensor_module
import entmachin.ragged.trees as trees_module
from entmachin.env import CategoricalActionMask, CategoricalActionSpace, Entity, EnvList, Environment, Observation, ObsSpace
from entmachin.frame import PPO, RolloutCollector
from entmachin.frame.rollout import Rollout
from entmachin.model import RogueNet, RogueNetConfig

BASE = 3_000_000.25  # ids are BASE + k: exact in float32, and no model output lands on them by chance
N_ENVS, N_STEPS = 4, 6


class Tagged(Environment):
    """1-3 entities ``A`` per step, each an actor of ``move``, whose one feature is a fresh id.

    Episodes end (terminal, never truncated) at random, as MineSweeper's do.
    """

    next_id = 0  # ids are unique across every Tagged environment of the process

    def __init__(self):
        self.rng = np.random.default_rng(Tagged.next_id)

    def obs_space(self):
        return ObsSpace(entities={"A": Entity(["id"])})

    def action_space(self):
        return {"move": CategoricalActionSpace(["left", "right"])}

    def reset(self):
        return self._observe(False)

    def act(self, actions):
        return self._observe(bool(self.rng.random() < 0.3))

    def _observe(self, done):
        n = int(self.rng.integers(1, 4))
        ids = np.arange(Tagged.next_id, Tagged.next_id + n)
        Tagged.next_id += n
        return Observation(
            entities={"A": ((BASE + ids).astype(np.float32).reshape(n, 1), [("A", i) for i in range(n)])},
            actions={"move": CategoricalActionMask(actor_types=["A"])},
            reward=1.0, done=done,
        )


class Copies(TorchDispatchMode):
    """Counts, per id, the torch storage written with it (outside the excluded regions)."""

    _NOT_COPIES = {torch.ops.aten.empty.memory_format, torch.ops.aten.empty_strided.default,
                   torch.ops.aten.new_empty.default, torch.ops.aten.empty_like.default}

    def __init__(self):
        super().__init__()
        self.counts = {}
        self.paused = 0

    def count(self, values):
        flat = np.asarray(values, dtype=np.float64).reshape(-1)
        flat = flat[(flat >= BASE) & (flat < BASE + 1e6)]
        ids = flat[flat % 1 == 0.25] - BASE
        for k in ids.astype(np.int64):
            self.counts[int(k)] = self.counts.get(int(k), 0) + 1

    @contextlib.contextmanager
    def pause(self):
        self.paused += 1
        try:
            yield
        finally:
            self.paused -= 1

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not self.paused and not func.is_view and func not in self._NOT_COPIES:
            for value in tree_flatten(out)[0]:
                if isinstance(value, torch.Tensor) and value.dtype == torch.float32 and value.numel():
                    with self.pause():
                        self.count(value.detach().numpy())
        return out


def _paused(mode, fn):
    @functools.wraps(fn)  # keeps the signature safe_call reads
    def wrapped(*args, **kwargs):
        with mode.pause():
            return fn(*args, **kwargs)
    return wrapped


def _counted(mode, fn, result_values):
    def wrapped(*args, **kwargs):
        result = fn(*args, **kwargs)
        if not mode.paused:
            mode.count(result_values(result))
        return result
    return wrapped


def test_entity_features_are_copied_twice_between_the_vec_obs_and_the_minibatches(monkeypatch):
    Tagged.next_id = 0
    envs = EnvList(Tagged, N_ENVS, seed=0)
    torch.manual_seed(0)
    net = RogueNet(envs.obs_space(), envs.action_space(), RogueNetConfig(d_model=8, n_layer=1, n_head=1))
    critic = net.critic()
    ppo = PPO(net, critic, torch.optim.Adam, torch.nn.MSELoss(), batch_size=8, actor_update_times=3,
              critic_update_times=3, seed=0)
    collector = RolloutCollector(ppo, envs, n_steps=N_STEPS)
    mode = Copies()
    # Copies of ragged arrays (the only ways to copy one on these paths are these functions).
    from_array = tensor_module.RaggedTensor.from_ragged_array
    monkeypatch.setattr(tensor_module.RaggedTensor, "from_ragged_array", _counted(mode, from_array, lambda r: r.data.numpy()))
    monkeypatch.setattr(trees_module, "concat", _counted(mode, trees_module.concat, lambda r: r.as_array()))
    monkeypatch.setattr(trees_module, "take_sequences", _counted(mode, trees_module.take_sequences, lambda r: r.as_array()))
    # Not counted: the environments (they make the VecObs), the models' forwards, minibatch gathers.
    monkeypatch.setattr(envs, "reset", _paused(mode, envs.reset))
    monkeypatch.setattr(envs, "act", _paused(mode, envs.act))
    monkeypatch.setattr(net, "forward", _paused(mode, net.forward))
    monkeypatch.setattr(net, "forward_with_value", _paused(mode, net.forward_with_value))
    monkeypatch.setattr(critic, "forward", _paused(mode, critic.forward))
    monkeypatch.setattr(Rollout, "minibatch", _paused(mode, Rollout.minibatch))
    monkeypatch.setattr(losses_module, "old_log_probs", _paused(mode, losses_module.old_log_probs))
    import entmachin.frame.a2c as a2c_module
    monkeypatch.setattr(a2c_module, "old_log_probs", losses_module.old_log_probs)

    stored, first_steps = set(), set()
    with mode:
        for rollout in range(2):
            collector.collect()
            held = ppo.replay_buffer.held()
            assert held is not None  # the rollout is kept by reference, as update() reads it
            entities = held["state"]["entities"]["A"]
            ids = (entities.data.reshape(-1).to(torch.float64) - BASE).long().tolist()
            stored.update(ids)
            if rollout:  # its first step was the previous rollout's last next_state
                first_steps.update(ids[:int(entities.offsets[N_ENVS])])
            ppo.update()
    counts = {k: mode.counts.get(k, 0) for k in stored}
    assert len(stored) > 30 and mode.counts
    # Every stored entity: converted to torch once (what the actor read), concatenated once
    # (what update() reads). The last step's non-terminal rows bootstrap: their states are
    # also in that concatenation, as the critic's input, before the next rollout stores them.
    assert {k: c for k, c in counts.items() if k not in first_steps and c != 2} == {}
    assert {k: c for k, c in counts.items() if k in first_steps and c not in (2, 3)} == {}
    assert sum(counts.values()) / len(counts) <= 2 + 1 / N_STEPS
