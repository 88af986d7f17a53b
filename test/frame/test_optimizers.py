"""A frame's optimizers are built when first used: a frame that only acts (or loads a checkpoint to act)
never builds them, and one that loads a checkpoint before building them trains as if it had."""
import numpy as np
import torch

from test.frame._frames import dense_episode, dense_frame


def trained(updates=3, **kwargs):
    frame = dense_frame(**kwargs)
    for i in range(updates):
        frame.store_episode(dense_episode(np.random.default_rng(i), 8))
        frame.update()
    return frame


def test_acting_and_loading_a_checkpoint_build_no_optimizer(tmp_path):
    trained().save(str(tmp_path))
    frame = dense_frame()
    frame.load(str(tmp_path))
    frame.act(dense_episode(np.random.default_rng(0), 2)[0]["state"])
    assert not frame._optimizers.built  # (building one imports torch._dynamo: about a second)
    frame.store_episode(dense_episode(np.random.default_rng(1), 8))
    frame.update()
    assert frame._optimizers.built


def _resumed(build_first, path):
    source = trained(updates=2, n_anneal_updates=5)
    source.save(path)
    frame = dense_frame(n_anneal_updates=5, seed=1)
    if build_first:
        assert frame.optimizers  # built before the load: the checkpoint's states go straight in
    frame.load(path)
    assert frame._optimizers.built == build_first
    frame.store_episode(dense_episode(np.random.default_rng(7), 8))
    torch.manual_seed(0)
    frame.update()
    return frame


def test_a_checkpoint_loaded_before_the_optimizers_exist_trains_as_one_loaded_after(tmp_path):
    late = _resumed(False, str(tmp_path / "late"))
    early = _resumed(True, str(tmp_path / "early"))
    for a, b in zip([*late.actor.parameters(), *late.critic.parameters()],
                    [*early.actor.parameters(), *early.critic.parameters()]):
        assert torch.equal(a, b)
    assert late.actor_optim.state_dict()["state"][0]["step"] == early.actor_optim.state_dict()["state"][0]["step"]
    # Annealing went on from the configured learning rate: 1 - 3/5 of it after the third update.
    assert late.actor_optim.param_groups[0]["lr"] == early.actor_optim.param_groups[0]["lr"]
    assert late._initial_lrs == early._initial_lrs == [[0.001], [0.001]]
