"""TargetPairs and ModeSwitch against the state_dict / Module.train ways they replace."""
import copy

import torch
from torch import nn

from entmachin.frame.target_sync import ModeSwitch, TargetPairs
from entmachin.model.input_norm import InputNorm


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = InputNorm(3)
        self.body = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
        self.register_buffer("scratch", torch.zeros(2), persistent=False)


def pair():
    torch.manual_seed(0)
    online = Net()
    target = copy.deepcopy(online)
    with torch.no_grad():
        for p in online.parameters():
            p.add_(torch.randn_like(p))
        online.norm.update(torch.randn(5, 3))
        online.scratch.fill_(7.0)
    return online, target


def test_soft_update_matches_the_state_dict_way_bit_for_bit():
    online, target = pair()
    expected = copy.deepcopy(target)
    sd_online, params = online.state_dict(), dict(online.named_parameters())
    with torch.no_grad():
        for key, value in expected.state_dict().items():
            if key in params and value.is_floating_point():
                value.lerp_(sd_online[key], 0.3)
            else:
                value.copy_(sd_online[key])
    TargetPairs(online, target).soft_update(0.3)
    for (k, a), b in zip(target.state_dict().items(), expected.state_dict().values()):
        assert torch.equal(a, b), k
    assert float(target.scratch.sum()) == 0.0  # not in the state_dict: left alone, as before


def test_copy_all_matches_load_state_dict_and_sees_replaced_tensors():
    online, target = pair()
    pairs = TargetPairs(online, target)
    online.norm.mean = torch.full((3,), 5.0, dtype=torch.float64)  # replaced, as .to() does
    pairs.copy_all()
    for (k, a), b in zip(target.state_dict().items(), online.state_dict().values()):
        assert torch.equal(a, b), k
    assert torch.equal(target.norm.mean, torch.full((3,), 5.0, dtype=torch.float64))


class OwnTrain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.calls = []

    def train(self, mode: bool = True) -> "OwnTrain":
        self.calls.append(mode)
        return super().train(mode)


def test_mode_switch_sets_every_module_and_honours_overridden_train():
    net = Net()
    switch = ModeSwitch(net)
    switch.set(False)
    assert not any(m.training for m in net.modules())
    switch.set(True)
    assert all(m.training for m in net.modules())
    wrapped = nn.Sequential(OwnTrain())
    ModeSwitch(wrapped).set(False)
    assert wrapped[0].calls == [False] and not wrapped[0].lin.training
