"""Policy terms: per-actor ratios against a plain loop, zero-actor rows, dense shapes, errors.

The objectives are the frames' (``A2C._policy_objective``, PPO's clipped one), reached through
``A2C._minibatch``, which spreads row advantages over the units first.
"""
import math
from types import SimpleNamespace
from unittest import mock

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import entmachin.frame.a2c as a2c_module
from entmachin.frame.a2c import A2C
from entmachin.frame.rollout import Rollout
from entmachin.frame.gae import cat_old, normalized, old_units, units_of
from entmachin.frame.ppo import PPO
from entmachin.ragged.tensor import RaggedTensor
from test.frame._frames import dense_frame


def policy_terms(units, old, advantage, clip):
    """A2C's terms (``clip=None``) or PPO's with ``surrogate_loss_clip=clip``."""
    kwargs = {"normalize_advantage": False}
    frame = dense_frame(A2C, **kwargs) if clip is None else dense_frame(PPO, surrogate_loss_clip=clip, **kwargs)
    frame.eval_act = lambda state, action: None  # the actor's result is ``units`` (patched below)
    n_rows = advantage.shape[0]
    batch = Rollout({}, {}, None, None, None, torch.zeros(n_rows, 1), advantage.reshape(n_rows, 1))
    with mock.patch.object(a2c_module, "units_of", lambda *args: units):
        losses = frame._minibatch(batch, old, True, False, 1.0)
    return SimpleNamespace(surrogate=-losses.policy, entropy=losses.entropy, approx_kl=losses.approx_kl,
                           clip_fraction=losses.clip_fraction)


def ragged(values, lengths):
    return RaggedTensor.from_lengths(torch.tensor(values, dtype=torch.float32).reshape(-1, 1), lengths)


@st.composite
def batches(draw):
    n_rows = draw(st.integers(1, 6))
    names = draw(st.sampled_from([["a"], ["a", "b"]]))
    lengths = {n: draw(st.lists(st.integers(0, 3), min_size=n_rows, max_size=n_rows)) for n in names}
    floats = st.floats(-2.0, 0.0, allow_nan=False, width=32)
    new = {n: draw(st.lists(floats, min_size=sum(lengths[n]), max_size=sum(lengths[n]))) for n in names}
    old = {n: draw(st.lists(floats, min_size=sum(lengths[n]), max_size=sum(lengths[n]))) for n in names}
    adv = draw(st.lists(st.floats(-3, 3, allow_nan=False, width=32), min_size=n_rows, max_size=n_rows))
    return n_rows, lengths, new, old, adv


@settings(max_examples=30, deadline=None)
@given(batches(), st.sampled_from([None, 0.2]))
def test_per_actor_terms_match_a_loop(batch, clip):
    n_rows, lengths, new, old, adv = batch
    names = list(lengths)
    log_prob = {n: ragged(new[n], lengths[n]) for n in names}
    entropy = {n: ragged([0.5] * sum(lengths[n]), lengths[n]) for n in names}
    units = units_of((None, log_prob, entropy), n_rows, True, "test")
    old_all = cat_old([units_of((None, {n: ragged(old[n], lengths[n]) for n in names}), n_rows, False, "t")])
    terms = policy_terms(units, old_units(old_all, torch.arange(n_rows)), torch.tensor(adv), clip)
    # the loop: every actor of every action, with the advantage of its row
    objectives, kls = [], []
    for n in names:
        k = 0
        for row, count in enumerate(lengths[n]):
            for _ in range(count):
                ratio = math.exp(new[n][k] - old[n][k])
                a = adv[row]
                obj = ratio * a if clip is None else min(ratio * a, min(max(ratio, 1 - clip), 1 + clip) * a)
                objectives.append(new[n][k] * a if clip is None else obj)
                kls.append((ratio - 1) - math.log(ratio))
                k += 1
    if not objectives:
        assert terms.surrogate.item() == 0.0
        return
    assert terms.surrogate.item() == pytest.approx(np.mean(objectives), rel=1e-4, abs=1e-5)
    assert terms.approx_kl.item() == pytest.approx(np.mean(kls), rel=1e-3, abs=1e-5)
    assert terms.entropy.item() == pytest.approx(0.5)


def test_zero_actor_rows_contribute_nothing():
    lengths = [1, 0, 2]
    log_prob = {"a": ragged([-0.5, -1.0, -0.2], lengths)}
    units = units_of((None, log_prob), 3, False, "t")
    a = policy_terms(units, None, torch.tensor([1.0, 100.0, -2.0]), None).surrogate
    b = policy_terms(units, None, torch.tensor([1.0, -7.0, -2.0]), None).surrogate
    assert a.item() == b.item() == pytest.approx((-0.5 * 1 + -1.0 * -2 + -0.2 * -2) / 3)
    # normalisation only sees the rows that have actors
    adv = normalized(torch.tensor([1.0, 100.0, 3.0]), units.row)
    assert adv[0].item() == pytest.approx(-1.0, abs=1e-6) and adv[2].item() == pytest.approx(1.0, abs=1e-6)


def test_no_actor_at_all_gives_a_differentiable_zero():
    log_prob = {"a": RaggedTensor.from_lengths(torch.zeros(0, 1, requires_grad=True), [0, 0])}
    units = units_of((None, log_prob), 2, False, "t")
    terms = policy_terms(units, torch.zeros(0), torch.ones(2), 0.2)
    assert terms.surrogate.item() == 0.0 and terms.surrogate.requires_grad


@pytest.mark.parametrize("shape", [(4,), (4, 1)])
def test_dense_log_probs_are_rows(shape):
    lp = torch.full(shape, -0.7, requires_grad=True)
    units = units_of((None, lp, torch.ones(shape)), 4, True, "t")
    assert units.log_prob.shape == (4,) and units.per_actor is None and units.row is None
    terms = policy_terms(units, torch.full((4,), -0.7), torch.tensor([1.0, -1.0, 2.0, 0.0]), 0.2)
    assert terms.surrogate.item() == pytest.approx(0.5) and terms.clip_fraction.item() == 0.0
    adv = normalized(torch.tensor([1.0, 3.0]), units.row)  # every row counts
    assert adv.tolist() == pytest.approx([-1.0, 1.0], abs=1e-6)


@pytest.mark.parametrize(
    "result, error, match",
    [
        (torch.zeros(3, 1), TypeError, r"where: the actor returned a Tensor; expected a tuple \(action, log_prob"),
        ((None, torch.zeros(3, 2)), ValueError, r"where: log_prob has shape \(3, 2\); expected \[B\] or \[B, 1\] with B = 3"),
        ((None, [1, 2, 3]), TypeError, r"where: log_prob is a list; expected a tensor \[B\] or \[B, 1\]"),
        ((None, {"a": torch.zeros(3)}), TypeError, r"where: log_prob\['a'\] is a Tensor; expected a RaggedTensor"),
        ((None, {"a": ragged([0.0], [1, 0])}), ValueError, r"where: log_prob\['a'\] has 2 rows .* expected 3 rows"),
        ((None, {"a": ragged([0.0], [1, 0, 0])}, torch.zeros(3)), TypeError,
         r"where: log_prob is per actor, but entropy is a Tensor"),
        ((None, torch.zeros(3)), ValueError, r"where: entropy_weight is set, but the actor returns no entropy"),
    ],
)
def test_units_of_errors(result, error, match):
    need = isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], torch.Tensor) and result[1].shape == (3,)
    with pytest.raises(error, match=match):
        units_of(result, 3, need, "where")
