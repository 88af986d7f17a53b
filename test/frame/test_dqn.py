"""DQN / DQNPer on dense states: n-step returns and targets against plain loops, the three modes,
priorities, masks, bad input, save / load and configs."""
import copy

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from entmachin.buffer import Buffer, PrioritizedBuffer
from entmachin.frame import NonFiniteUpdateError
from entmachin.frame import DQN, DQNPer
from entmachin.frame import q_tables as qt
from entmachin.model import MLPQNet
from entmachin.model.inputs import DeferredChecks

D = 3


def make(cls=DQN, n_actions=2, **kwargs):
    torch.manual_seed(0)
    q = MLPQNet(D, n_actions, d_hidden=(8,))
    kwargs.setdefault("seed", 0)
    return cls(q, copy.deepcopy(q), torch.optim.Adam, nn.MSELoss(reduction="sum"), **kwargs)


def episode(rng, length=5, terminal=True, n_actions=2):
    out = []
    for t in range(length):
        out.append({"state": {"state": torch.from_numpy(rng.standard_normal((1, D)).astype(np.float32))},
                    "action": {"action": torch.from_numpy(rng.integers(0, n_actions, (1, 1)))},
                    "next_state": {"state": torch.from_numpy(rng.standard_normal((1, D)).astype(np.float32))},
                    "reward": float(rng.standard_normal()), "terminal": terminal and t == length - 1})
    return out


def all_rows(frame):
    n = frame.replay_buffer.size()
    _, rows = Buffer.sample_batch(frame.replay_buffer, n, sample_method="all",
                                  sample_attrs=["state", "action", "reward", "next_state", "terminal", "discount"])
    return rows


# ----------------------------------------------------------------------------- n-step returns


def reference_n_step(reward, terminal, truncated, n_step, discount):
    """(return, no bootstrap, discount**k, (kind, t, b) of the bootstrap state) by a plain loop."""
    n_steps, n_envs = reward.shape
    out = []
    for t in range(n_steps):
        for b in range(n_envs):
            ret, scale, j = 0.0, 1.0, t
            while True:
                ret += scale * reward[j, b]
                scale *= discount
                if terminal[j, b]:
                    out.append((ret, True, scale, None))
                    break
                if truncated[j, b] or j == n_steps - 1:
                    out.append((ret, False, scale, ("next_state", j, b)))
                    break
                if j - t + 1 == n_step:
                    out.append((ret, False, scale, ("state", j + 1, b)))
                    break
                j += 1
    return out


@pytest.mark.parametrize("seed", range(6))
def test_n_step_returns_match_a_plain_loop(seed):
    rng = np.random.default_rng(seed)
    n_steps, n_envs, n_step = int(rng.integers(1, 7)), int(rng.integers(1, 4)), int(rng.integers(1, 5))
    reward = rng.standard_normal((n_steps, n_envs))
    terminal = rng.random((n_steps, n_envs)) < 0.2
    truncated = (rng.random((n_steps, n_envs)) < 0.2) & ~terminal
    needs = truncated.copy()
    needs[-1] |= ~terminal[-1]
    bootstrap = np.flatnonzero(needs)
    got = qt.n_step_returns(reward, terminal, truncated, bootstrap, n_step, 0.9)
    n_rows = n_steps * n_envs
    for r, (ret, ended, scale, source) in enumerate(reference_n_step(reward, terminal, truncated, n_step, 0.9)):
        assert got.reward[r] == pytest.approx(ret) and got.terminal[r] == ended
        if ended:
            continue
        assert got.discount[r] == pytest.approx(scale)
        kind, t, b = source
        flat = t * n_envs + b
        expected = n_rows + int(np.flatnonzero(bootstrap == flat)[0]) if kind == "next_state" else flat
        assert got.next_index[r] == expected


def test_store_episode_keeps_n_step_rows_and_gathers_next_states():
    rng = np.random.default_rng(0)
    frame = make(n_step=2, discount=0.5)
    ep = episode(rng, 4, terminal=True)
    frame.store_episode(ep)
    state, _, reward, next_state, terminal, discount = all_rows(frame)
    rewards = [t["reward"] for t in ep]
    assert reward[:, 0].tolist() == pytest.approx([rewards[0] + 0.5 * rewards[1], rewards[1] + 0.5 * rewards[2],
                                                   rewards[2] + 0.5 * rewards[3], rewards[3]])
    assert terminal[:, 0].tolist() == [False, False, True, True]
    assert discount[:, 0].tolist() == pytest.approx([0.25, 0.25, 0.25, 0.5])
    assert torch.equal(next_state.state[0], ep[2]["state"]["state"][0])  # two steps on
    assert torch.equal(next_state.state[1], ep[3]["state"]["state"][0])


# ------------------------------------------------------------------------------- targets


def random_tables(rng, n_rows, width, n_actions=2):
    """Random ragged tables: actors per row (some none), masks with at least one allowed choice."""
    tables, chosen = [], []
    for a in range(n_actions):
        counts = rng.integers(0, 3, n_rows)
        row = torch.from_numpy(np.repeat(np.arange(n_rows), counts))
        n = row.shape[0]
        allowed = torch.from_numpy(rng.random((n, width)) < 0.6)
        allowed[torch.arange(n), torch.from_numpy(rng.integers(0, width, n))] = True
        q = torch.from_numpy(rng.standard_normal((n, width)).astype(np.float32)).masked_fill(~allowed, float("-inf"))
        tables.append(qt.QTable(f"a{a}", q, allowed, row))
        picks = [int(rng.choice(np.flatnonzero(allowed[i].numpy()))) for i in range(n)]
        chosen.append(torch.tensor(picks, dtype=torch.int64))
    return tables, chosen


@pytest.mark.parametrize("reduction", ["sum", "mean"])
@pytest.mark.parametrize("seed", range(4))
def test_row_values_match_a_plain_loop(seed, reduction):
    rng = np.random.default_rng(seed)
    n_rows = 5
    tables, chosen = random_tables(rng, n_rows, 4)
    online, _ = random_tables(np.random.default_rng(seed), n_rows, 4)  # same layout and masks
    online = [t._replace(q=torch.randn_like(t.q).masked_fill(~t.allowed, float("-inf"))) for t in online]
    taken = qt.taken_values(tables, chosen, n_rows, reduction)
    best = qt.best_values(tables, n_rows, reduction)
    double = qt.best_values(tables, n_rows, reduction, online)
    for b in range(n_rows):
        want_taken = want_best = want_double = 0.0
        for table, picks, chooser in zip(tables, chosen, online):
            mine = [i for i in range(len(table.row)) if int(table.row[i]) == b]
            if not mine:
                continue
            div = len(mine) if reduction == "mean" else 1
            want_taken += sum(float(table.q[i, picks[i]]) for i in mine) / div
            want_best += sum(max(float(v) for v, ok in zip(table.q[i], table.allowed[i]) if ok) for i in mine) / div
            want_double += sum(float(table.q[i, int(np.argmax(chooser.q[i].numpy()))]) for i in mine) / div
        assert float(taken[b]) == pytest.approx(want_taken, abs=1e-5)
        assert float(best[b]) == pytest.approx(want_best, abs=1e-5)
        assert float(double[b]) == pytest.approx(want_double, abs=1e-5)


@pytest.mark.parametrize("mode", ["vanilla", "fixed_target", "double"])
def test_update_loss_is_the_mode_target(mode):
    rng = np.random.default_rng(1)
    frame = make(mode=mode, batch_size=9, discount=0.9, n_step=1)
    with torch.no_grad():
        for p in frame.qnet_target.parameters():
            p.add_(0.3)  # the target network differs from the online one
    frame.store_episode(episode(rng, 5, terminal=True))
    frame.store_episode(episode(rng, 4, terminal=False))
    state, action, reward, next_state, terminal, discount = all_rows(frame)
    with torch.no_grad():
        q = frame.qnet(state.state).gather(1, action.action.long())[:, 0]
        online_next, target_next = frame.qnet(next_state.state), frame.qnet_target(next_state.state)
        best = {"vanilla": online_next.max(1).values, "fixed_target": target_next.max(1).values,
                "double": target_next.gather(1, online_next.argmax(1, keepdim=True))[:, 0]}[mode]
        y = reward[:, 0] + torch.where(terminal[:, 0], 0.0, 0.9 * best)
    assert frame.update() == pytest.approx(float(((q - y) ** 2).sum()), rel=1e-5)
    assert frame.n_updates == 1


def test_target_network_soft_and_hard_updates():
    rng = np.random.default_rng(2)
    soft = make(batch_size=4, update_rate=0.5)
    soft.store_episode(episode(rng, 6))
    before = [p.clone() for p in soft.qnet_target.parameters()]
    soft.update()
    for old, new, online in zip(before, soft.qnet_target.parameters(), soft.qnet.parameters()):
        assert torch.allclose(new, 0.5 * old + 0.5 * online)
    hard = make(batch_size=4, update_rate=None, update_steps=2)
    hard.store_episode(episode(rng, 6))
    hard.update()
    assert not torch.equal(hard.qnet.q.weight, hard.qnet_target.q.weight)
    hard.update()
    assert torch.equal(hard.qnet.q.weight, hard.qnet_target.q.weight)


def test_priorities_are_abs_td_errors_plus_epsilon_after_an_update():
    rng = np.random.default_rng(3)
    buffer = PrioritizedBuffer(100, alpha=1.0, epsilon=0.01, seed=0)
    frame = make(DQNPer, batch_size=8, replay_buffer=buffer, mode="fixed_target", discount=0.9)
    frame.store_episode(episode(rng, 10))
    state, action, reward, next_state, terminal, _ = all_rows(frame)
    with torch.no_grad():
        q = frame.qnet(state.state).gather(1, action.action.long())[:, 0]
        y = reward[:, 0] + torch.where(terminal[:, 0], 0.0, 0.9 * frame.qnet_target(next_state.state).max(1).values)
    expected = (y - q).abs().numpy() + 0.01
    frame.update()
    leaves = buffer._tree.leaves[:10]
    changed = leaves != 1.0  # rows never sampled keep the initial priority
    assert changed.sum() >= 4
    np.testing.assert_allclose(leaves[changed], expected[changed], rtol=1e-5)
    assert 0 < frame.last_update.importance_weight <= 1


# --------------------------------------------------------------------------------- masks


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.floats(0.0, 1.0))
def test_masked_choices_are_never_chosen(seed, epsilon):
    rng = np.random.default_rng(seed)
    mask = torch.from_numpy(rng.random((6, 4)) < 0.5)
    mask[torch.arange(6), torch.from_numpy(rng.integers(0, 4, 6))] = True
    frame = make(n_actions=4, epsilon=epsilon, seed=seed % 1000)
    state = {"state": torch.from_numpy(rng.standard_normal((6, D)).astype(np.float32)), "mask": mask}
    for chosen in (frame.act_discrete_with_noise(state), frame.act_discrete(state)):
        assert chosen.shape == (6, 1)
        assert mask.gather(1, chosen).all()


def test_epsilon_decays_to_its_floor():
    frame = make(epsilon=0.5, epsilon_decay=0.5, epsilon_min=0.2)
    state = {"state": torch.zeros(1, D)}
    frame.act_discrete_with_noise(state)
    assert frame.epsilon == 0.25
    frame.act_discrete_with_noise(state)
    assert frame.epsilon == 0.2
    frame.act(state, collect_stats=False)
    assert frame.epsilon == 0.2


def test_act_decays_epsilon_once_per_row_and_act_discrete_with_noise_once_per_call():
    """The collector's act() reads epsilon_decay per environment step; Machin's method per call."""
    frame = make(epsilon=1.0, epsilon_decay=0.5)
    four_rows = {"state": torch.zeros(4, D)}
    frame.act_discrete_with_noise(four_rows)
    assert frame.epsilon == 0.5
    frame.act(four_rows)
    assert frame.epsilon == 0.5 / 16
    frame.act(four_rows, deterministic=True)
    frame.act(four_rows, collect_stats=False)
    assert frame.epsilon == 0.5 / 16
    assert frame.decay_epsilon(2) == 0.5 / 64


# ----------------------------------------------------------------------------- bad input


class Fixed(nn.Module):
    """Returns ``value`` (a callable of the state) whatever the mask says."""

    def __init__(self, value):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(()))
        self.value = value

    def forward(self, state):
        return self.value(state) + self.w


def test_wrong_q_shapes_raise():
    frame = DQN(Fixed(lambda s: torch.zeros(s.shape[0], 2, 1)), Fixed(lambda s: torch.zeros(s.shape[0], 2, 1)),
                torch.optim.Adam, nn.MSELoss())
    with pytest.raises(ValueError, match=r"DQN.act_discrete: the Q-network returned shape \(2, 2, 1\); expected "
                                         r"\[B, n_actions\] with B = 2"):
        frame.act_discrete({"state": torch.zeros(2, D)})
    frame = DQN(Fixed(lambda s: torch.zeros(1, 2)), Fixed(lambda s: torch.zeros(1, 2)), torch.optim.Adam, nn.MSELoss())
    with pytest.raises(ValueError, match=r"returned shape \(1, 2\); expected \[B, n_actions\] with B = 3"):
        frame.act_discrete({"state": torch.zeros(3, D)})


def test_a_q_network_that_ignores_the_mask_raises():
    frame = DQN(Fixed(lambda s: torch.zeros(s.shape[0], 2)), Fixed(lambda s: torch.zeros(s.shape[0], 2)),
                torch.optim.Adam, nn.MSELoss())
    state = {"state": torch.zeros(2, D), "mask": torch.tensor([[True, True], [False, True]])}
    with pytest.raises(ValueError, match=r"output ignores the mask: action 'action' actor 1 \(row 1\) has a finite "
                                         r"value for a choice its mask forbids"):
        frame.act_discrete_with_noise(state)
    assert frame.epsilon == 1.0  # nothing decayed


def test_update_before_batch_size_rows_raises_and_changes_nothing():
    frame = make(batch_size=10)
    frame.store_episode(episode(np.random.default_rng(0), 4))
    with pytest.raises(RuntimeError, match=r"DQN.update: the replay buffer holds 4 rows, fewer than batch_size=10"):
        frame.update()
    assert frame.n_updates == 0


def test_dqnper_refuses_a_uniform_buffer():
    with pytest.raises(TypeError, match=r"DQNPer: replay_buffer must be a PrioritizedBuffer .* got Buffer"):
        make(DQNPer, replay_buffer=Buffer(10))


def test_non_finite_td_errors_skip_the_step_and_the_third_update_raises():
    """The frames' one failure rule: a skipped step changes nothing; three in a row raise."""
    big = Fixed(lambda s: torch.full((s.shape[0], 2), 3e38))
    buffer = PrioritizedBuffer(50, seed=0)
    frame = DQNPer(big, copy.deepcopy(big), torch.optim.SGD, nn.MSELoss(), batch_size=4, replay_buffer=buffer)
    ep = episode(np.random.default_rng(0), 6, terminal=False)
    for t in ep:
        t["reward"] = 1e38
    frame.store_episode(ep)
    leaves = buffer._tree.leaves[:6].copy()
    for _ in range(2):
        with pytest.warns(RuntimeWarning, match=r"DQNPer.update: non-finite TD errors, TD loss; skipped this qnet step"):
            frame.update()
    assert frame.n_updates == 2 and frame.last_update.skipped_steps == 1 and float(big.w.detach()) == 0.0
    np.testing.assert_array_equal(buffer._tree.leaves[:6], leaves)  # no priority changed
    with pytest.warns(RuntimeWarning), pytest.raises(NonFiniteUpdateError, match=r"DQNPer.update: 3 updates in a row "
                                                                                  r"skipped every qnet step"):
        frame.update()
    assert float(big.w.detach()) == 0.0


def test_nan_q_values_raise_naming_the_network():
    nan = Fixed(lambda s: torch.full((s.shape[0], 2), float("nan")))
    frame = DQN(nan, copy.deepcopy(nan), torch.optim.Adam, nn.MSELoss())
    with pytest.raises(ValueError, match=r"the Q-network returned NaN or infinity for an allowed choice"):
        frame.act_discrete({"state": torch.zeros(1, D)})


def test_bad_settings_raise():
    with pytest.raises(ValueError, match=r"DQN: update_rate / update_steps: give exactly one target update scheme"):
        make(update_steps=5)
    with pytest.raises(ValueError, match=r"DQN: mode must be one of \['vanilla', 'fixed_target', 'double'\]"):
        make(mode="triple")
    q = MLPQNet(D, 2)
    with pytest.raises(ValueError, match=r"qnet_target must be a second network"):
        DQN(q, q, torch.optim.Adam, nn.MSELoss())
    with pytest.raises(ValueError, match=r"DQN: qnet_target must have qnet's structure"):
        DQN(q, MLPQNet(D, 3), torch.optim.Adam, nn.MSELoss())
    with pytest.raises(ValueError, match=r"stored action 'action' holds|\['action'\]\['action'\] is \[5\]"):
        make().store_episode([{**episode(np.random.default_rng(0), 1)[0], "action": {"action": torch.tensor([[5]])}}])


# --------------------------------------------------------------------------- save / configs


def test_save_load_round_trip(tmp_path):
    rng = np.random.default_rng(4)
    frame = make(batch_size=4)
    frame.store_episode(episode(rng, 6))
    frame.act_discrete_with_noise({"state": torch.zeros(1, D)})
    frame.update()
    frame.save(str(tmp_path), version=1)
    other = make(batch_size=4)
    other.load(str(tmp_path))
    assert other.n_updates == 1 and other.epsilon == frame.epsilon
    for a, b in zip(frame.qnet_target.parameters(), other.qnet_target.parameters()):
        assert torch.equal(a, b)


def test_generate_config_and_init_from_config():
    config = DQNPer.generate_config({"frame_config": {"model_args": [[D, 2], [D, 2]], "batch_size": 16,
                                                      "mode": "vanilla"}})
    assert config["frame"] == "DQNPer" and config["frame_config"]["models"][0] == "entmachin.model.MLPQNet"
    frame = DQNPer.init_from_config(config)
    assert isinstance(frame.qnet, MLPQNet) and frame.config.mode == "vanilla" and frame.config.batch_size == 16
    assert isinstance(frame.replay_buffer, PrioritizedBuffer)
    with pytest.raises(ValueError, match=r"frame_config.entropy_weight: unknown key for DQN"):
        DQN.generate_config({"frame_config": {"entropy_weight": 0.1}})


def test_read_q_rejects_an_output_of_the_wrong_kind():
    with pytest.raises(TypeError, match=r"the Q-network returned a str; expected a tensor \[B, n_actions\]"):
        qt.read_q("no", {"state": torch.zeros(1, D)}, None, 1, "here", DeferredChecks())


def test_nan_q_values_in_update_skip_the_step():
    nan = Fixed(lambda s: torch.full((s.shape[0], 2), float("nan")))
    frame = DQNPer(nan, copy.deepcopy(nan), torch.optim.SGD, nn.MSELoss(), batch_size=4,
                   replay_buffer=PrioritizedBuffer(50, seed=0))
    frame.store_episode(episode(np.random.default_rng(0), 6, terminal=False))
    with pytest.warns(RuntimeWarning, match=r"DQNPer.update: non-finite TD errors, TD loss; skipped this qnet step"):
        frame.update()
    assert frame.last_update.skipped_steps == 1 and float(nan.w.detach()) == 0.0


def test_update_after_acting_under_inference_mode_on_the_same_batch_shape():
    frame = make(batch_size=7, n_actions=5)
    with torch.inference_mode():
        frame.act_discrete({"state": torch.zeros(7, D)})  # first use of the [7, 5] table constants
    frame.store_episode(episode(np.random.default_rng(0), 8, n_actions=5))
    assert np.isfinite(frame.update())


@pytest.mark.parametrize("cls", [DQN, DQNPer])
def test_the_same_seed_samples_the_same_minibatches(cls):
    def trained():
        frame = make(cls, batch_size=4)
        rng = np.random.default_rng(0)
        for _ in range(4):
            frame.store_episode(episode(rng, length=6))
        losses = [frame.update() for _ in range(5)]
        return losses, [p.detach().clone() for p in frame.qnet.parameters()]

    (losses_a, params_a), (losses_b, params_b) = trained(), trained()
    assert losses_a == losses_b
    assert all(torch.equal(a, b) for a, b in zip(params_a, params_b))


class _NormNet(nn.Module):
    """A Q-network with input statistics (a persistent buffer) and a scratch (non-persistent) one."""

    def __init__(self) -> None:
        super().__init__()
        from entmachin.model.input_norm import InputNorm

        self.norm = InputNorm(D)
        self.body = nn.Sequential(nn.Linear(D, 4), nn.ReLU(), nn.Linear(4, 2))
        self.register_buffer("scratch", torch.zeros(2), persistent=False)

    def forward(self, state):
        return self.body(self.norm(state))


def _moved_frame(**kwargs):
    torch.manual_seed(0)
    online = _NormNet()
    frame = DQN(online, copy.deepcopy(online), torch.optim.Adam, nn.MSELoss(), **kwargs)
    with torch.no_grad():
        for p in online.parameters():
            p.add_(torch.randn_like(p))
        online.norm.update(torch.randn(5, D))
        online.scratch.fill_(7.0)
    return frame


def test_soft_target_update_matches_the_state_dict_way_bit_for_bit():
    frame = _moved_frame(update_rate=0.3)
    online, target = frame.qnet, frame.qnet_target
    expected = copy.deepcopy(target)
    sd_online, params = online.state_dict(), dict(online.named_parameters())
    with torch.no_grad():
        for key, value in expected.state_dict().items():
            if key in params and value.is_floating_point():
                value.lerp_(sd_online[key], 0.3)
            else:
                value.copy_(sd_online[key])
    frame._update_target(1)
    for (k, a), b in zip(target.state_dict().items(), expected.state_dict().values()):
        assert torch.equal(a, b), k
    assert float(target.scratch.sum()) == 0.0  # not in the state_dict: left alone


def test_hard_target_update_copies_every_entry_and_sees_replaced_tensors():
    frame = _moved_frame(update_rate=None, update_steps=2)
    online, target = frame.qnet, frame.qnet_target
    online.norm.mean = torch.full((D,), 5.0, dtype=torch.float64)  # replaced, as .to() does
    frame._update_target(1)  # not yet
    assert not torch.equal(target.norm.mean, online.norm.mean)
    frame._update_target(2)
    for (k, a), b in zip(target.state_dict().items(), online.state_dict().values()):
        assert torch.equal(a, b), k


def test_update_trains_every_module_and_honours_an_overridden_train():
    class OwnTrain(nn.Linear):
        calls = []

        def train(self, mode=True):
            OwnTrain.calls.append(mode)
            return super().train(mode)

    class Net(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner, self.seen = inner, []

        def forward(self, state):
            self.seen.append(all(m.training for m in self.modules()))
            return self.inner(state)

    for inner, overridden in ((nn.Linear(D, 2), False), (OwnTrain(D, 2), True)):
        net = Net(inner)
        frame = DQN(net, copy.deepcopy(net), torch.optim.SGD, nn.MSELoss(), batch_size=4, seed=0)
        frame.store_episode(episode(np.random.default_rng(0), 6, terminal=False))
        net.seen.clear()
        OwnTrain.calls.clear()
        frame.update()
        assert net.seen[0] is True  # the online network's values are taken in train mode
        assert not any(m.training for m in net.modules())  # and it is back in eval mode after
        assert OwnTrain.calls == ([True, False] if overridden else [])
