"""NaN and infinity in a model's inputs: refused with the entity type and feature named, before
any running input statistics see the batch."""
import numpy as np
import pytest
import torch

from entmachin.model import InputNorm, MLPActor, RogueNet
from test.model._zoo import ACTION_SPACE, OBS_SPACE, zoo_observations, zoo_state


def _norm_states(net):
    return [{k: v.clone() for k, v in m.state_dict().items()} for m in net.modules() if isinstance(m, InputNorm)]


def _assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for key in x:
            assert torch.equal(x[key], y[key]), key


@pytest.mark.parametrize(
    "where, match",
    [
        ("Tree", r"RogueNet.forward: entities\['Tree'\] row 2 entity 1 has nan in feature 'y' \(column 1\); "
                 r"features must be finite"),
        ("global", r"RogueNet.forward: entities\['__global__'\] row 2 has inf in feature 't' \(column 0\)"),
    ],
)
def test_rogue_net_refuses_non_finite_features_before_any_statistics_move(where, match):
    torch.manual_seed(0)
    net = RogueNet(OBS_SPACE, ACTION_SPACE)
    observations = zoo_observations(3, 4, max_trees=3)
    with net.collecting_stats():
        net(**{k: v for k, v in zoo_state(observations).items()})
    before = _norm_states(net)
    obs = observations[2]
    if where == "Tree":
        obs.features["Tree"] = np.array([[1.0, 2.0], [3.0, np.nan]], dtype=np.float32)
        obs.visible = {}
        obs.actions["attack"].mask = None
    else:
        obs.global_features = np.array([np.inf], dtype=np.float32)
    state = zoo_state(observations)
    # Unit is embedded before Tree: its statistics must not move either.
    with net.collecting_stats(), pytest.raises(ValueError, match=match):
        net(state["entities"], state["action_masks"], state.get("visible"))
    with pytest.raises(ValueError, match=match):
        net.value(state["entities"])
    _assert_same(_norm_states(net), before)


def test_mlp_refuses_a_non_finite_state_inside_collecting_stats():
    actor = MLPActor(3, 2, normalize_inputs=True)
    with actor.collecting_stats():
        actor(torch.randn(4, 3))
    before = _norm_states(actor)
    state = torch.randn(4, 3)
    state[3, 0] = float("nan")
    with actor.collecting_stats(), pytest.raises(
            ValueError, match=r"MLPActor input norm of state: item 3 has nan in feature '#0' \(column 0\)"):
        actor(state)
    _assert_same(_norm_states(actor), before)
