"""Action heads: masked choices are never sampled; sampling and re-evaluation agree."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from entmachin.model import RogueNet, RogueNetConfig
from entmachin.model.heads import SelectEntityHead, masked_categorical
from entmachin.ragged.tensor import RaggedTensor
from test.model._zoo import ACTION_SPACE, OBS_SPACE, zoo_observations, zoo_state


@st.composite
def _masks(draw):
    n, c = draw(st.integers(0, 6)), draw(st.integers(1, 6))
    rows = [draw(st.lists(st.booleans(), min_size=c, max_size=c).filter(any)) for _ in range(n)]
    return np.array(rows, dtype=bool).reshape(n, c)


@settings(max_examples=20, deadline=None)
@given(_masks(), st.integers(0, 2**16))
def test_masked_categorical_never_samples_a_forbidden_choice(mask, seed):
    torch.manual_seed(seed)
    allowed = torch.from_numpy(mask)
    logits = torch.randn(mask.shape) * 5  # [n, c]
    logits[~allowed] += 100.0  # forbidden choices would be overwhelmingly likely
    for _ in range(5):
        out = masked_categorical(logits, allowed)
        assert allowed[torch.arange(len(mask)), out.action].all()
        assert torch.isfinite(out.log_prob).all() and (out.entropy >= -1e-6).all()
    rescored = masked_categorical(logits, allowed, out.action)
    torch.testing.assert_close(rescored.log_prob, out.log_prob)
    best = masked_categorical(logits, allowed, deterministic=True)
    assert allowed[torch.arange(len(mask)), best.action].all()


def test_masked_categorical_matches_torch_distribution():
    logits = torch.randn(5, 4)
    allowed = torch.rand(5, 4) < 0.6
    allowed[:, 0] = True
    action = torch.tensor([0, 0, 0, 0, 0])
    out = masked_categorical(logits, allowed, action)
    dist = torch.distributions.Categorical(logits=logits.masked_fill(~allowed, -1e9))
    torch.testing.assert_close(out.log_prob, dist.log_prob(action))
    torch.testing.assert_close(out.entropy, dist.entropy())


def test_masked_categorical_samples_each_choice_with_its_probability():
    torch.manual_seed(0)
    logits = torch.tensor([[0.0, 1.0, -1.0, 2.0], [3.0, 0.0, 0.0, -2.0]])  # [2, 4]
    allowed = torch.tensor([[True, True, True, False], [True, True, True, True]])
    n = 40_000
    out = masked_categorical(logits.repeat(n, 1), allowed.repeat(n, 1))  # rows alternate between the two
    expected = torch.softmax(logits.masked_fill(~allowed, float("-inf")), dim=-1)  # [2, 4]
    for row in range(2):
        counts = torch.bincount(out.action[row::2], minlength=4).double()  # [4]
        # 5 standard deviations of a binomial count; the forbidden choice is never drawn.
        sd = (n * expected[row] * (1 - expected[row])).double().sqrt()
        assert ((counts - n * expected[row]).abs() <= 5 * sd + 1e-9).all(), (counts, n * expected[row])
    assert (out.action[0::2] != 3).all()


@pytest.mark.parametrize("fallback", [0, 1000])  # 0: pair by pair; 1000: padded batched product
def test_select_entity_head_logits_are_query_key_products(fallback, monkeypatch):
    monkeypatch.setattr(SelectEntityHead, "PAIR_FALLBACK", fallback)
    torch.manual_seed(0)
    head = SelectEntityHead(d_model=4, d_qk=3)
    x = torch.randn(9, 4)  # [n_tokens, d_model]; row 0: tokens 0..3, row 1: none, row 2: tokens 4..8
    actors = RaggedTensor.from_lengths(torch.tensor([[0], [1], [4]]), [2, 0, 1])
    actees = RaggedTensor.from_lengths(torch.tensor([[2], [3], [5], [6], [7]]), [2, 0, 3])
    # Row 0: actor 0 x (2, 3), actor 1 x (2, 3); row 2: actor 4 x (5, 6, 7).
    mask = torch.tensor([True, True, False, True, True, False, True])
    action = torch.tensor([1, 1, 2])
    out = head(x, actors, actees, mask, action)
    q, k = head.query(x), head.key(x)

    def log_softmax(qi, ks, allowed):
        logits = torch.stack([q[qi] @ k[j] for j in ks]) / np.sqrt(3)
        return torch.log_softmax(logits.masked_fill(~torch.tensor(allowed), float("-inf")), 0)

    torch.testing.assert_close(out.log_prob[0], log_softmax(0, [2, 3], [True, True])[1])
    assert out.log_prob[1] == 0  # a single allowed choice
    torch.testing.assert_close(out.log_prob[2], log_softmax(4, [5, 6, 7], [True, False, True])[2])
    sampled = head(x, actors, actees, mask)
    assert sampled.action[1] == 1 and sampled.action[2] != 1
    empty = RaggedTensor.from_lengths(torch.zeros(0, 1, dtype=torch.int64), [0, 0, 0])
    assert head(x, empty, actees, None).action.shape == (0,)


@settings(max_examples=6, deadline=None)
@given(st.integers(0, 2**16))
def test_model_never_samples_forbidden_actions(seed):
    torch.manual_seed(seed)
    net = RogueNet(OBS_SPACE, ACTION_SPACE, RogueNetConfig(d_model=8, n_layer=1))
    for p in net.heads.parameters():
        torch.nn.init.normal_(p, std=3.0)  # sharp distributions make a leak visible
    state = zoo_state(zoo_observations(seed, 6))
    out = net(state["entities"], state["action_masks"], state.get("visible"))
    masks = state["action_masks"]
    move = out.action["move"].data[:, 0]
    move_mask = torch.from_numpy(np.array(masks["move"]["mask"].as_array()))
    assert move_mask[torch.arange(len(move)), move].all()
    mode = out.action["mode"].data[:, 0]
    assert torch.from_numpy(np.array(masks["mode"]["mask"].as_array()))[torch.arange(len(mode)), mode].all()
    # Select-entity: the chosen actee's pair in the row-major actor x actee mask is allowed.
    attack = out.action["attack"]
    actee_counts = masks["attack"]["actees"].size1()
    pair_mask = RaggedTensor.from_ragged_array(masks["attack"]["actee_mask"])
    for row in range(6):
        flat = pair_mask[row][:, 0]
        for i, choice in enumerate(attack[row][:, 0].tolist()):
            assert 0 <= choice < actee_counts[row]
            assert flat[i * actee_counts[row] + choice]
    again = net(state["entities"], masks, state.get("visible"), action=out.action)
    torch.testing.assert_close(again.log_prob_sum, out.log_prob_sum)
    assert torch.isfinite(out.log_prob_sum).all()
