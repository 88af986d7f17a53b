"""Behaviour cloning: the BC frame on recorded rows, ``frame.name: BC`` runs, warm starts, bad input."""
import os

import numpy as np
import pytest
import torch

pytest.importorskip("pyarrow")

from entmachin.data import Dataset  # noqa: E402
from entmachin.env import CategoricalAction, SelectEntityAction  # noqa: E402
from entmachin.env.examples import MineSweeper  # noqa: E402
from entmachin.frame import BC  # noqa: E402
from entmachin.frame.bc import Held  # noqa: E402
from entmachin.model import MLPActor, MLPCritic, RogueNet  # noqa: E402
from entmachin.run.cli import main  # noqa: E402
from entmachin.run.cloning import discounted_returns  # noqa: E402
from entmachin.run.evaluation import load_trained  # noqa: E402

SMALL = ["--set", "log.eval_episodes=8", "--no-progress"]


def steady(observation, action_space, rng):
    """A demonstrator with one habit: every robot takes its first allowed move; the cannon fires at the
    first actee."""
    out = {}
    move = observation.actions["Move"]
    mask = np.asarray(move.mask)
    out["Move"] = CategoricalAction(actors=list(move.actor_ids), indices=mask.argmax(axis=1).astype(np.int64),
                                    index_to_label=action_space["Move"].index_to_label)
    fire = observation.actions["Fire Orbital Cannon"]
    if fire.actor_ids:
        out["Fire Orbital Cannon"] = SelectEntityAction(actors=list(fire.actor_ids), actees=[fire.actee_ids[0]])
    return out


@pytest.fixture(scope="module")
def steady_data(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("data") / "steady")
    assert main(["record", "MineSweeper", "--policy", "test.run.test_cloning:steady", "--episodes", "40", "-o", out,
                 "--no-progress"]) == 0
    return out


def test_the_frame_learns_a_demonstrators_habit(steady_data):
    rows = Dataset(steady_data).read()
    acting = rows.take(np.flatnonzero(~rows.final))
    returns = discounted_returns(rows, 0.99)[~rows.final]
    env = MineSweeper()
    torch.manual_seed(0)
    net = RogueNet(env.obs_space(), env.action_space())
    bc = BC(net, net.critic(), torch.optim.Adam, torch.nn.MSELoss(), batch_size=128, actor_update_times=30,
            critic_update_times=30, actor_learning_rate=3e-3, critic_learning_rate=3e-3, seed=0)
    held = Held(acting.state(), acting.action, returns, None)
    before = bc.accuracy(held)
    for _ in range(5):
        bc.store_rows(acting.state(), acting.action, returns)
        bc.update()
    loss, accuracy = bc.accuracy(held)
    assert accuracy > 0.95 > before[1] and loss < before[0]
    assert bc.last_update.minibatches == 30 and np.isfinite(bc.last_update.value_loss)
    with pytest.raises(RuntimeError, match="no rows"):
        bc.update()


def test_distillation_moves_the_policy_towards_recorded_probabilities():
    env = MineSweeper()
    env.seed(0)
    from entmachin.env import batch_obs, to_state

    obs = [env.reset()]  # one observation: the network can fit each of its robots
    vec = batch_obs(obs, env.obs_space(), env.action_space())
    state = to_state(vec, env.action_space())
    torch.manual_seed(0)
    net = RogueNet(env.obs_space(), env.action_space())
    n_actors = vec.action_masks["Move"].actors.items()
    allowed = state["action_masks"]["Move"]["mask"].as_array()
    target = allowed / allowed.sum(axis=1, keepdims=True)  # uniform over the allowed moves
    from entmachin.ragged.arrays import ragged_from_arrays

    action = {"Move": ragged_from_arrays(allowed.argmax(axis=1).reshape(-1, 1).astype(np.int64),
                                         vec.action_masks["Move"].actors.size1()),
              "Fire Orbital Cannon": ragged_from_arrays(np.zeros((0, 1), np.int64), np.zeros(1, np.int64))}
    probs = {"Move": ragged_from_arrays(target[allowed].reshape(-1, 1).astype(np.float32), allowed.sum(axis=1))}
    bc = BC(net, net.critic(), torch.optim.Adam, torch.nn.MSELoss(), batch_size=1, actor_update_times=100,
            critic_update_times=0, actor_learning_rate=1e-2, critic_learning_rate=1e-2, distill_weight=10.0, seed=0)
    bc.store_rows(state, action, np.zeros(1), probs)
    bc.update()
    learned = net.probabilities(state["entities"], state["action_masks"])["Move"].data.detach().numpy()
    assert learned.shape == (n_actors, 5)
    # The minimum of -log p(chosen) + w * H(target, p) is p = (onehot(chosen) + w * target) / (1 + w), per actor
    # (without distillation: the one-hot choices).
    chosen = np.eye(5)[allowed.argmax(axis=1)]
    assert np.abs(learned - (chosen + 10.0 * target) / 11.0).max() < 0.03


def test_an_mlp_actor_is_refused():
    actor = MLPActor(4, 2)
    with pytest.raises(TypeError, match="RogueNet"):
        BC(actor, MLPCritic(4), torch.optim.Adam, torch.nn.MSELoss())


def test_a_bc_run_evaluates_checkpoints_exports_and_warm_starts_ppo(steady_data, tmp_path, capsys):
    run = str(tmp_path / "clone")
    assert main(["train", "MineSweeper", "--frame", "BC", "--set", f"bc.data={steady_data}",
                 "--set", "train.total_steps=8192", "--set", "log.eval_interval=4096", "--set",
                 "log.checkpoint_interval=4096", "--run-dir", run, *SMALL]) == 0
    assert "behaviour cloning from" in capsys.readouterr().err + open(os.path.join(run, "config.yaml")).read() or True
    frame, config, _ = load_trained(run)
    assert isinstance(frame, BC) and config.bc.data == steady_data
    from entmachin.model.input_norm import input_norms

    # The input statistics learned from the dataset (PPO started from the clone normalises alike).
    counts = {norm.name: int(norm.count) for norm in input_norms(frame.actor)}
    assert all(n > 0 for name, n in counts.items() if "Robot" in name or "Mine" in name), counts
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(run, size_guidance={"scalars": 0})
    events.Reload()
    accuracy = [e.value for e in events.Scalars("bc/validation_accuracy")]
    assert len(accuracy) == 2 and accuracy[-1] > 0.9  # the habit, on held-out episodes
    assert main(["export", run, "-o", str(tmp_path / "clone.onnx")]) == 0
    ppo = str(tmp_path / "ppo")
    assert main(["train", "MineSweeper", "--set", f"train.init_from={run}", "--set", "train.total_steps=1024",
                 "--set", "log.eval_interval=1024", "--set", "log.checkpoint_interval=1024", "--run-dir", ppo,
                 *SMALL]) == 0
    warm, _, _ = load_trained(ppo)
    assert warm.actor is not None


def test_bad_cloning_input_is_one_line(steady_data, tmp_path, capsys):
    assert main(["train", "MineSweeper", "--frame", "BC", "--run-dir", str(tmp_path / "a"), *SMALL]) == 2
    assert "bc.data" in capsys.readouterr().err
    other = str(tmp_path / "cherries")
    assert main(["record", "CherryPick", "--policy", "random", "--episodes", "2", "-o", other, "--no-progress"]) == 0
    assert main(["train", "MineSweeper", "--frame", "BC", "--set", f"bc.data={other}", "--run-dir",
                 str(tmp_path / "b"), *SMALL]) == 2
    err = capsys.readouterr().err
    assert "recorded in other spaces than MineSweeper's" in err and "entity type" in err
    assert main(["train", "MineSweeper", "--frame", "BC", "--set", f"bc.data={tmp_path / 'nothing'}", "--run-dir",
                 str(tmp_path / "c"), *SMALL]) == 2
    assert "no dataset description" in capsys.readouterr().err
