"""Running input normalisation: statistics, the collecting_stats() rule, freeze and state_dict."""
import numpy as np
import pytest
import torch

from entmachin.model.input_norm import InputNorm, NormalisedModule, collecting_stats


def test_statistics_match_numpy_over_many_batches():
    rng = np.random.default_rng(0)
    norm = InputNorm(3)
    batches = [rng.normal(loc=[1.0, -2.0, 5.0], scale=[0.5, 3.0, 1.0], size=(n, 3)) for n in (1, 7, 0, 30, 2)]
    with collecting_stats(norm):
        for b in batches:
            norm(torch.tensor(b, dtype=torch.float32))
    everything = np.concatenate(batches)
    assert int(norm.count) == len(everything)
    np.testing.assert_allclose(norm.mean.numpy(), everything.mean(0), rtol=1e-6)
    np.testing.assert_allclose(norm.std().numpy(), everything.std(0, ddof=1), rtol=1e-5)


def test_statistics_change_only_inside_collecting_stats():
    norm = InputNorm(2)
    x = torch.tensor([[1.0, 2.0], [3.0, 6.0]])
    norm(x)
    assert int(norm.count) == 0
    with collecting_stats(norm):
        first = norm(x)
    # The forward that saw the batch normalised it with the statistics from before it.
    torch.testing.assert_close(first, x.clamp(-5, 5))
    assert int(norm.count) == 2
    before = norm.state_dict()
    norm.train()
    norm(x * 10)
    for key, value in norm.state_dict().items():
        assert torch.equal(value, before[key])
    torch.testing.assert_close(norm(x), torch.tensor([[-1.0, -1.0], [1.0, 1.0]]) / np.sqrt(2))


def test_freeze_and_nested_contexts():
    norm = InputNorm(1)
    norm.freeze()
    with collecting_stats(norm):
        norm(torch.ones(4, 1))
    assert int(norm.count) == 0
    norm.unfreeze()
    with collecting_stats(norm):
        with collecting_stats(norm):
            norm(torch.ones(4, 1))
        norm(torch.ones(2, 1))
    norm(torch.ones(2, 1))
    assert int(norm.count) == 6


def test_zero_variance_features_are_centred_and_clipped():
    norm = InputNorm(2, clip=2.0)
    with collecting_stats(norm):
        norm(torch.tensor([[1.0, 0.0], [1.0, 1.0]]))
    out = norm(torch.tensor([[4.0, 100.0]]))
    torch.testing.assert_close(out, torch.tensor([[2.0, 2.0]]))


def test_state_dict_round_trip():
    a, b = InputNorm(2), InputNorm(2)
    with collecting_stats(a):
        a(torch.randn(10, 2))
    b.load_state_dict(a.state_dict())
    x = torch.randn(3, 2)
    assert torch.equal(a(x), b(x))
    assert set(a.state_dict()) == {"count", "mean", "squares_sum"}


def test_normalised_module_freezes_every_norm():
    class Two(NormalisedModule):
        def __init__(self):
            super().__init__()
            self.a, self.b = InputNorm(1), InputNorm(1)

    m = Two()
    m.freeze()
    assert m.a.frozen and m.b.frozen
    m.unfreeze()
    with m.collecting_stats():
        m.a(torch.ones(2, 1))
    assert int(m.a.count) == 2 and int(m.b.count) == 0


def test_wrong_width_raises():
    with pytest.raises(ValueError, match=r"InputNorm: expected inputs with 3 features .* got shape \(2, 4\)"):
        InputNorm(3)(torch.zeros(2, 4))


def test_a_non_finite_batch_is_refused_and_leaves_the_statistics_bit_for_bit():
    norm = InputNorm(3, name="Robot input", feature_names=["x", "y", "hp"])
    with collecting_stats(norm):
        norm(torch.randn(8, 3))
    before = {k: v.clone() for k, v in norm.state_dict().items()}
    bad = torch.randn(2, 4, 3)  # [2, 4, 3]: leading dims are samples
    bad[1, 2, 1] = float("nan")
    bad[0, 3, 2] = float("inf")
    with collecting_stats(norm):
        with pytest.raises(ValueError, match=r"Robot input: item 3 has inf in feature 'hp' \(column 2\), and 2 of the "
                           r"batch's 8 items hold NaN or infinity; .*the batch was refused and the statistics are unchanged"):
            norm(bad)
        with pytest.raises(ValueError, match=r"item 0 has -inf in feature 'x'"):
            norm.update(torch.tensor([[-float("inf"), 0.0, 0.0]]))
    for key, value in norm.state_dict().items():
        assert torch.equal(value, before[key]), key
    assert torch.isnan(norm(bad)).any()  # outside collecting_stats() nothing is merged, so nothing is checked


def test_unnamed_features_are_numbered_and_names_must_fit():
    norm = InputNorm(2)
    with collecting_stats(norm), pytest.raises(ValueError, match=r"InputNorm: item 0 has nan in feature '#1'"):
        norm(torch.tensor([[0.0, float("nan")]]))
    with pytest.raises(ValueError, match=r"InputNorm\('Unit'\): feature_names has 1 names for 2 features"):
        InputNorm(2, name="Unit", feature_names=["x"])


def _uncached(norm, x):
    mean = torch.where(norm.count > 1, norm.mean, torch.zeros_like(norm.mean)).to(x.dtype)
    return ((x - mean) / norm.std().to(x.dtype)).clamp(-norm.clip, norm.clip)


def test_cached_mean_and_std_follow_every_change_of_the_statistics():
    """The forward keeps its mean and std between calls; every way the statistics can change
    must be seen: update, load_state_dict, an in-place edit, a replaced buffer, another dtype."""
    norm = InputNorm(2)
    x = torch.tensor([[1.0, 2.0], [3.0, 6.0], [-4.0, 0.5]])
    assert torch.equal(norm(x), _uncached(norm, x))
    with collecting_stats(norm):
        norm(x)
    assert torch.equal(norm(x), _uncached(norm, x))
    other = InputNorm(2)
    with collecting_stats(other):
        other(x * 3 + 1)
    norm.load_state_dict(other.state_dict())
    assert torch.equal(norm(x), _uncached(other, x))
    with torch.no_grad():
        norm.mean.add_(1.0)
    assert torch.equal(norm(x), _uncached(norm, x))
    norm.squares_sum = norm.squares_sum * 4
    assert torch.equal(norm(x), _uncached(norm, x))
    assert torch.equal(norm(x.double()), _uncached(norm, x.double()))


def test_cached_statistics_made_under_inference_mode_serve_a_later_backward():
    norm = InputNorm(2)
    with collecting_stats(norm):
        norm(torch.tensor([[1.0, 2.0], [3.0, 6.0]]))
    with torch.inference_mode():
        norm(torch.ones(1, 2))
    x = torch.ones(3, 2, requires_grad=True)
    norm(x).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()

