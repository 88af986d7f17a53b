"""GAE against a plain Python loop, hand-computed cases, conversions and input errors."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from entmachin.frame import GAEResult, gae, gae_episode


def reference_gae(rewards, values, next_values, terminal, truncated, discount, gae_lambda):
    """One column at a time, one step at a time, with the episode rules spelled out."""
    n_steps, n_envs = len(rewards), len(rewards[0]) if len(rewards) else 0
    advantages = [[0.0] * n_envs for _ in range(n_steps)]
    for b in range(n_envs):
        following = 0.0  # advantage of the next row of the same episode
        for t in reversed(range(n_steps)):
            if terminal[t][b]:
                following = rewards[t][b] - values[t][b]
            elif truncated[t][b]:
                following = rewards[t][b] + discount * next_values[t][b] - values[t][b]
            else:
                delta = rewards[t][b] + discount * next_values[t][b] - values[t][b]
                following = delta + discount * gae_lambda * following
            advantages[t][b] = following
    return advantages


@st.composite
def rollouts(draw):
    n_steps = draw(st.integers(1, 12))
    n_envs = draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    floats = [rng.normal(size=(n_steps, n_envs)) * 3 for _ in range(3)]  # [T, B] each
    p_end = draw(st.sampled_from([0.0, 0.2, 0.6]))
    terminal = rng.random((n_steps, n_envs)) < p_end  # [T, B]
    truncated = rng.random((n_steps, n_envs)) < p_end  # [T, B]
    lam = draw(st.one_of(st.sampled_from([0.0, 0.5, 1.0]), st.floats(0.0, 1.0)))
    discount = draw(st.floats(0.0, 1.0))
    return (*floats, terminal, truncated, discount, lam)


@settings(max_examples=60, deadline=None)
@given(rollouts())
def test_matches_the_python_loop(case):
    rewards, values, next_values, terminal, truncated, discount, lam = case
    out = gae(torch.from_numpy(rewards), torch.from_numpy(values), torch.from_numpy(next_values),
              torch.from_numpy(terminal), torch.from_numpy(truncated), discount=discount, gae_lambda=lam)
    expected = np.array(reference_gae(rewards.tolist(), values.tolist(), next_values.tolist(),
                                      terminal.tolist(), truncated.tolist(), discount, lam))  # [T, B]
    np.testing.assert_allclose(out.advantages.numpy(), expected, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(out.returns.numpy(), expected + values, rtol=1e-10, atol=1e-10)
    for b in range(rewards.shape[1]):  # one column alone gives the same numbers
        column = gae_episode(rewards[:, b], values[:, b], next_values[:, b], terminal[:, b], truncated[:, b],
                             discount=discount, gae_lambda=lam)
        np.testing.assert_allclose(column.advantages.numpy(), expected[:, b], rtol=1e-10, atol=1e-10)


# ----------------------------------------------------------------------- hand-computed


def test_terminal_episode_with_lambda_one_gives_rewards_to_go():
    # next_values[t] == values[t + 1] on ordinary rows; the terminal row's 9.0 never counts.
    out = gae_episode([1.0, 2.0, 3.0], [0.5, 0.5, 0.5], [0.5, 0.5, 9.0], [False, False, True],
                      discount=1.0, gae_lambda=1.0)
    assert out.returns.tolist() == [6.0, 5.0, 3.0]
    assert out.advantages.tolist() == [5.5, 4.5, 2.5]


def test_lambda_zero_gives_td_errors():
    out = gae_episode([1.0, 2.0, 3.0], [1.0, 2.0, 4.0], [2.0, 4.0, 8.0], [False, False, True],
                      discount=0.5, gae_lambda=0.0)
    assert out.advantages.tolist() == [1.0 + 1.0 - 1.0, 2.0 + 2.0 - 2.0, 3.0 - 4.0]


def test_truncated_row_bootstraps_and_resets():
    # Rows 0-1: an episode cut short at row 1 (its final observation is worth 4);
    # row 2: a new episode, whose next state is worth 2 (the rollout ends there).
    out = gae_episode([1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.0, 4.0, 2.0], [False, False, False],
                      [False, True, False], discount=0.5, gae_lambda=1.0)
    assert out.advantages.tolist() == [1.0 + 0.5 * 3.0, 1.0 + 0.5 * 4.0, 1.0 + 0.5 * 2.0]
    # Without the truncation, row 1 would also chain to row 2:
    chained = gae_episode([1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.0, 4.0, 2.0], [False, False, False],
                          discount=0.5, gae_lambda=1.0)
    assert chained.advantages[1].item() == 3.0 + 0.5 * 2.0


def test_terminal_wins_over_truncated_and_columns_are_independent():
    rewards = torch.tensor([[1.0, 1.0], [1.0, 1.0]])  # [T=2, B=2]
    next_values = torch.tensor([[0.0, 0.0], [5.0, 5.0]])  # [T, B]; row 0: values of row 1
    terminal = torch.tensor([[False, False], [True, False]])  # [T, B]
    truncated = torch.tensor([[False, False], [True, True]])  # [T, B]
    out = gae(rewards, torch.zeros(2, 2), next_values, terminal, truncated, discount=1.0, gae_lambda=1.0)
    assert out.advantages.tolist() == [[1.0 + 1.0, 1.0 + 6.0], [1.0, 6.0]]


def test_ordinary_rows_use_next_values():
    # The TD error of every row that does not end uses next_values (the value of its
    # next_state); with next_values[t] == values[t + 1] this is the usual rollout formula.
    out = gae_episode([0.0, 0.0], [0.0, 0.0], [1.0, 0.0], [False, False], discount=1.0, gae_lambda=0.0)
    assert out.advantages.tolist() == [1.0, 0.0]


def test_no_truncated_means_none_and_empty_rollouts():
    ones = torch.ones(3, 2)  # [T, B]
    done = torch.zeros(3, 2, dtype=torch.bool)  # [T, B]
    assert torch.equal(gae(ones, ones, ones, done, discount=0.9, gae_lambda=0.9).advantages,
                       gae(ones, ones, ones, done, done, discount=0.9, gae_lambda=0.9).advantages)
    empty = gae(torch.zeros(0, 2), torch.zeros(0, 2), torch.zeros(0, 2), torch.zeros(0, 2, dtype=torch.bool),
                discount=0.9, gae_lambda=0.9)
    assert empty.advantages.shape == (0, 2) and empty.returns.shape == (0, 2)


# ------------------------------------------------------------------ types and devices


def test_result_types_dtypes_and_no_mutation():
    values = torch.ones(4, 2, requires_grad=True)  # [T, B]
    rewards = torch.ones(4, 2, dtype=torch.int64)  # integer rewards are promoted
    terminal = torch.zeros(4, 2, dtype=torch.bool)
    before = rewards.clone()
    out = gae(rewards, values, values.detach(), terminal, terminal, discount=0.99, gae_lambda=0.95)
    assert isinstance(out, GAEResult) and out.advantages.dtype == torch.float32
    assert not out.advantages.requires_grad and not out.returns.requires_grad
    assert torch.equal(rewards, before)
    wide = gae(rewards, values.detach().double(), values.detach(), terminal, discount=0.99, gae_lambda=0.95)
    assert wide.returns.dtype == torch.float64


def test_numpy_inputs_give_tensors():
    out = gae(np.ones((3, 2)), np.zeros((3, 2)), np.zeros((3, 2)), np.zeros((3, 2), bool), discount=1.0,
              gae_lambda=1.0)
    assert isinstance(out.advantages, torch.Tensor) and out.advantages.tolist() == [[3.0, 3.0], [2.0, 2.0], [1.0, 1.0]]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_inputs_stay_on_cuda():
    x = torch.ones(5, 3, device="cuda")  # [T, B]
    done = torch.zeros(5, 3, dtype=torch.bool, device="cuda")  # [T, B]
    out = gae(x, x, x, done, done, discount=0.9, gae_lambda=0.95)
    cpu = gae(x.cpu(), x.cpu(), x.cpu(), done.cpu(), done.cpu(), discount=0.9, gae_lambda=0.95)
    assert out.advantages.is_cuda and torch.equal(out.advantages.cpu(), cpu.advantages)


# ---------------------------------------------------------------------------- errors


def _inputs(shape=(3, 2)):
    return [torch.zeros(shape), torch.zeros(shape), torch.zeros(shape), torch.zeros(shape, dtype=torch.bool)]


def test_shape_errors():
    a, b, c, d = _inputs()
    with pytest.raises(ValueError, match=r"gae: values has shape \(3, 1\), but rewards has shape \(3, 2\); "
                       r"every input must be \[T, B\]"):
        gae(a, torch.zeros(3, 1), c, d, discount=0.9, gae_lambda=0.9)
    with pytest.raises(ValueError, match=r"gae: truncated has shape \(3,\)"):
        gae(a, b, c, d, torch.zeros(3, dtype=torch.bool), discount=0.9, gae_lambda=0.9)
    with pytest.raises(ValueError, match=r"gae: rewards has shape \(3,\); expected \[T, B\] \(use gae_episode"):
        gae(*_inputs((3,)), discount=0.9, gae_lambda=0.9)
    with pytest.raises(ValueError, match=r"gae_episode: rewards has shape \(3, 2\); expected \[T\] \(use gae for"):
        gae_episode(a, b, c, d, discount=0.9, gae_lambda=0.9)
    with pytest.raises(ValueError, match=r"gae: rewards has shape \(3, 2, 1\); expected \[T, B\]$"):
        gae(*_inputs((3, 2, 1)), discount=0.9, gae_lambda=0.9)


def test_dtype_errors():
    a, b, c, d = _inputs()
    with pytest.raises(TypeError, match=r"gae: terminal has dtype torch.float32; expected bool "
                       r"\(for example terminal != 0\)"):
        gae(a, b, c, d.float(), discount=0.9, gae_lambda=0.9)
    with pytest.raises(TypeError, match=r"gae: truncated has dtype torch.int64; expected bool"):
        gae(a, b, c, d, d.long(), discount=0.9, gae_lambda=0.9)
    with pytest.raises(TypeError, match=r"gae: next_values has dtype torch.int64; expected a floating dtype"):
        gae(a, b, c.long(), d, discount=0.9, gae_lambda=0.9)
    with pytest.raises(TypeError, match=r"gae: rewards has dtype torch.bool; expected real numbers"):
        gae(d, b, c, d, discount=0.9, gae_lambda=0.9)
    with pytest.raises(TypeError, match=r"gae_episode: rewards must be a tensor, a numpy array or a "
                       r"sequence of numbers, got list"):
        gae_episode(["a", None], [0.0, 0.0], [0.0, 0.0], [False, False], discount=0.9, gae_lambda=0.9)


def test_device_error():
    a, b, c, d = _inputs()
    with pytest.raises(ValueError, match=r"gae: rewards is on meta, but values is on cpu"):
        gae(a.to("meta"), b, c, d, discount=0.9, gae_lambda=0.9)


@pytest.mark.parametrize("name", ["discount", "gae_lambda"])
def test_coefficient_errors(name):
    coefficients = {"discount": 0.9, "gae_lambda": 0.9}
    with pytest.raises(ValueError, match=rf"gae: {name} must be in \[0, 1\], got 1.5"):
        gae(*_inputs(), **{**coefficients, name: 1.5})
    with pytest.raises(TypeError, match=rf"gae: {name} must be a real number in \[0, 1\], got True"):
        gae(*_inputs(), **{**coefficients, name: True})
    with pytest.raises(TypeError, match=rf"gae: {name} must be a real number in \[0, 1\], got '0.9'"):
        gae(*_inputs(), **{**coefficients, name: "0.9"})
