"""Tutorial 1: how entity data flows from environments to a buffer, and from a buffer to a model.

    python tutorials/01_data_flow.py            # prints every step with real values
    python tutorials/01_data_flow.py --smoke    # the same on fewer steps (what the test runs)

The path is ``transition -> Buffer -> frame``, the same as in Machin, but the data are ragged:
each environment step shows a different number of mines, robots and actors. What you learn:

1. **Transitions.** A ``Transition`` sorts its data into three kinds of attribute. *Major*
   attributes (``state``, ``action``, ``next_state``) are dicts, possibly nested, whose leaves
   are dense tensors / arrays ``[B, ...]`` or ragged values with one sequence per row: the
   canonical entity state that ``to_state(vec_obs)`` returns is one such dict. *Sub*
   attributes (``reward``, ``terminal``) are numbers or dense values ``[B]``. *Custom*
   attributes are any Python values without tensors inside, shared by the transition's rows.
   One transition may hold all ``B`` environments of a vectorised step: it has ``B`` rows.
2. **Buffers count rows.** The first append fixes the buffer's schema (every leaf: dense or
   ragged, dtype, width); ``buffer_size`` and ``size()`` are in rows; a full ring buffer
   overwrites its oldest rows.
3. **Sampling concatenates.** ``sample_batch`` gathers rows and joins every ragged leaf into
   one ``RaggedTensor`` whose sequence ``i`` is sample ``i`` (its ``lengths``, ``offsets`` and
   ``batch_index`` say where each sample's entities are), every dense leaf along dim 0, and
   returns custom attributes as lists. ``PrioritizedBuffer`` samples by priority and returns
   the indexes to update priorities with.
4. **safe_call** calls a model with the entries of those dicts that its ``forward``
   parameters name, ignoring the others, and moves ragged arrays and tensors to the model's
   device. A frame never calls a model positionally: it is how ``RogueNet.forward(entities,
   action_masks, visible=None, action=None)`` receives a sampled state and action.
5. **Frames** build their own transitions: ``store_episode`` adds the critic's return targets
   and advantages as extra sub attributes before appending.

Machin's own data-flow tutorial tells the dense version of this story; this one prints real
values at each step instead of diagrams.
"""
from __future__ import annotations

import argparse
from typing import Any, List, Optional

import numpy as np
import torch
from torch import nn

from entmachin.buffer import Buffer, PrioritizedBuffer, Transition, TransitionBase
from entmachin.env import EnvList, VecObs, random_actions, to_state, to_vec_actions
from entmachin.env.examples import MineSweeper
from entmachin.frame import PPO, model_devices, safe_call
from entmachin.model import RogueNet, RogueNetConfig
from entmachin.ragged import arrdict, to_ragged_tensor, trees

NUM_ENVS = 3


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=6, help="vectorised steps stored in the buffer")
    parser.add_argument("--seed", type=int, default=0, help="seeds the environments, buffers and torch")
    parser.add_argument("--smoke", action="store_true", help="fewer steps, to check that it runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.steps = 4
    if args.steps < 4:
        parser.error(f"--steps must be >= 4 (the sampling examples pick rows among them), got {args.steps}")
    return args


def section(title: str) -> None:
    print(f"\n{'=' * 8} {title} {'=' * (70 - len(title))}")


def show_ragged(name: str, value: Any) -> None:
    """Prints a ragged value's sequences: a ragged array or a ``RaggedTensor``."""
    rt = to_ragged_tensor(value)
    print(f"{name}: {len(rt)} sequences, {rt.n_items} items of shape {rt.trailing_shape}, {rt.dtype}")
    print(f"    lengths     {rt.lengths.tolist()}")
    print(f"    offsets     {rt.offsets.tolist()}")
    print(f"    batch_index {rt.batch_index.tolist()}")
    for i, items in enumerate(rt.to_list()):
        print(f"    sequence {i}: {rounded(items)}")


def rounded(values: Any) -> list:
    """Values as a (nested) list, floats rounded to 4 decimals for printing."""
    array = values.detach().cpu().numpy() if isinstance(values, torch.Tensor) else np.asarray(values)
    return np.round(array.astype(np.float64), 4).tolist() if array.dtype.kind == "f" else array.tolist()


def make_env() -> MineSweeper:
    """A 3x3 MineSweeper whose cannon is ready every other step: actors come and go."""
    return MineSweeper(width=3, height=3, nmines=2, nrobots=2, orbital_cannon=True, cooldown_period=1)


def reached_state(obs: VecObs, space: dict) -> dict:
    """The state each row's step reached, as ``next_state``.

    ``EnvList`` resets an environment whose episode ended, so its row of ``obs`` already shows
    the next episode; the episode's last observation is in ``obs.final_obs`` (rows
    ``obs.final_index``) and takes that row's place here. ``RolloutCollector`` does the same.
    """
    after = to_state(obs, space)
    if len(obs.final_index) == 0:
        return after
    final = to_state(obs.final_obs, space)
    rows = np.arange(len(obs))  # [B]: row i of `after`, or of `final` (numbered from B) where it ended
    rows[obs.final_index] = len(obs) + np.arange(len(obs.final_index))
    return trees.take(trees.stack([after, final], lambda i: ("obs", "obs.final_obs")[i]), rows)


def play_episode(ppo: PPO, env: EnvList, max_steps: int = 20) -> List[dict]:
    """One episode of a one-environment ``EnvList`` as Machin-style transitions (one row each)."""
    space = env.action_space()
    state = to_state(env.reset(), space)
    episode = []
    for _ in range(max_steps):  # until the episode ends, or cut short (the last row then bootstraps)
        out = ppo.act(state)  # safe_call(actor, state) without gradients
        action = to_vec_actions(out.action)  # {name: RaggedArrayI64}, what EnvList.act takes
        obs = env.act(action)
        # EnvList resets an environment whose episode ended: obs then shows the next episode,
        # and the last observation of the ended one is in obs.final_obs.
        after = to_state(obs.final_obs if obs.done[0] else obs, space)
        episode.append({"state": state, "action": {"action": action}, "next_state": after,
                        "reward": float(obs.reward[0]), "terminal": bool(obs.done[0] and not obs.truncated[0])})
        if obs.done[0]:
            break
        state = after
    return episode


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    # ------------------------------------------------------------------------------------
    section("1. An environment step as a transition")
    envs = EnvList(make_env, NUM_ENVS, seed=args.seed)
    space = envs.action_space()
    obs = envs.reset()
    # The canonical state: ragged values with one sequence per environment. With the action
    # space, every mask is present even where an environment gave none (a fixed schema).
    state = to_state(obs, space)
    print("state =", arrdict(state))
    show_ragged("state['entities']['Mine']", state["entities"]["Mine"])
    show_ragged("state['action_masks']['Move']['actors'] (entity indices: Mines first, then Robots)",
                state["action_masks"]["Move"]["actors"])

    actions = random_actions(obs, space, rng)  # {action name: RaggedArrayI64 [n_actors, 1]}
    next_obs = envs.act(actions)
    next_state = reached_state(next_obs, space)
    transition = Transition(
        state=state,                             # major: a dict tree of ragged values
        action={"action": actions},              # major: RogueNet's action parameter is named "action"
        next_state=next_state,                   # major
        reward=next_obs.reward,                  # sub: float32 [B]
        terminal=next_obs.done & ~next_obs.truncated,  # sub: bool [B]
        step=0,                                  # custom: any value without tensors
    )
    print(f"\ntransition.n_rows = {transition.n_rows} (one per environment)")
    print(f"major {transition.major_attr}, sub {transition.sub_attr}, custom {transition.custom_attr}")
    print(f"transition.reward = {transition.reward}, transition.step = {transition.step}")
    try:
        Transition(state=state, action={"action": actions}, next_state=next_state, reward=np.zeros(2, np.float32),
                   terminal=np.zeros(NUM_ENVS, np.bool_))
    except ValueError as error:
        print(f"a reward of 2 rows for a state of {NUM_ENVS} rows is refused:\n    {error}")

    # ------------------------------------------------------------------------------------
    section("2. A ring buffer counts rows")
    buffer_size = NUM_ENVS * (args.steps - 1)  # one step fewer than we store: the oldest is overwritten
    buffer = Buffer(buffer_size, seed=args.seed)
    buffer.append(transition)
    print(f"after one append: size() = {buffer.size()} rows")
    obs = next_obs
    for step in range(1, args.steps):
        state = to_state(obs, space)  # (not next_state: an ended row continues with the next episode)
        actions = random_actions(obs, space, rng)
        obs = envs.act(actions)
        buffer.append(Transition(state=state, action={"action": actions}, next_state=reached_state(obs, space),
                                 reward=obs.reward, terminal=obs.done & ~obs.truncated, step=step))
    print(f"after {args.steps} appends of {NUM_ENVS} rows: size() = {buffer.size()} of buffer_size={buffer_size}")
    print("the schema the first append fixed (kind, dtype, per-row or per-item shape):")
    for leaf in buffer.schema.leaves:
        print(f"    {leaf.name:<60} {leaf.kind:<7} {str(leaf.dtype):<14} {leaf.shape}")

    # ------------------------------------------------------------------------------------
    section("3. Sampling concatenates the rows")
    # Rows are numbered by age (0 = oldest); each append wrote one row per environment.
    n, (every_state,) = buffer.sample_batch(0, sample_method="all", sample_attrs=["state"])
    print(f"mines in each of the {n} stored rows, oldest first: {every_state.entities['Mine'].lengths.tolist()}")

    # A callable sample_method returns rows by age: here three chosen rows (the newest, the
    # oldest, the second newest), so that the printout can be checked against the line above.
    def chosen_rows(buffer: Buffer, batch_size: int) -> List[int]:
        return [buffer.size() - 1, 0, buffer.size() - 2][:batch_size]

    n, (sampled_state, sampled_action, reward, step_numbers) = buffer.sample_batch(
        3, sample_method=chosen_rows, sample_attrs=["state", "action", "reward", "step"])
    print(f"sampled {n} rows; the major attributes come back as arrdicts of RaggedTensors:")
    print(sampled_state)
    show_ragged("sampled state['entities']['Mine']", sampled_state.entities["Mine"])
    show_ragged("sampled state['entities']['Orbital Cannon']", sampled_state.entities["Orbital Cannon"])
    show_ragged("sampled action['action']['Fire Orbital Cannon'] (ready cannons only)",
                sampled_action.action["Fire Orbital Cannon"])
    print(f"reward (a sub attribute) = {reward.reshape(-1).tolist()}  shape {tuple(reward.shape)}")
    print(f"step (a custom attribute) = {step_numbers}  (a list: custom values are not tensors)")
    n, (steps_tensor,) = buffer.sample_batch(3, sample_method=chosen_rows, sample_attrs=["step"],
                                             additional_concat_attrs=["step"])
    print(f"with additional_concat_attrs=['step']: {steps_tensor.tolist()}  shape {tuple(steps_tensor.shape)}")
    n, (per_sample_reward, others) = buffer.sample_batch(2, concatenate=False, sample_attrs=["reward", "*"])
    print(f"concatenate=False gives one value per sample: reward {[r.tolist() for r in per_sample_reward]}; "
          f"'*' collects the remaining custom attributes: {others}")

    # ------------------------------------------------------------------------------------
    section("4. Transitions with your own attributes, and prioritized replay")
    one_step = TransitionBase(
        major_attr=["state"], sub_attr=["reward", "advantage"], custom_attr=["source"],
        major_data=[to_state(obs, space)], sub_data=[obs.reward, np.array([0.5, -1.0, 2.0], np.float32)], custom_data=["demo"],
    )
    print(f"TransitionBase: major {one_step.major_attr}, sub {one_step.sub_attr}, custom {one_step.custom_attr}, "
          f"{one_step.n_rows} rows")
    prioritized = PrioritizedBuffer(100, seed=args.seed)
    prioritized.append(one_step, priority=[0.1, 1.0, 10.0])  # one priority per row
    n, batch, index, is_weight = prioritized.sample_batch(6, sample_attrs=["advantage"])
    print(f"6 prioritized samples (with replacement): rows {index.tolist()}, advantage {batch[0].reshape(-1).tolist()}")
    print(f"importance weights (largest 1): {rounded(is_weight)}")
    prioritized.update_priority(np.full(n, 1.0), index)  # e.g. |TD error| of each sample
    n, batch, index, is_weight = prioritized.sample_batch(6, sample_attrs=["advantage"])
    print(f"after update_priority: rows {index.tolist()}")

    # ------------------------------------------------------------------------------------
    section("5. safe_call maps buffer keys to forward parameters")

    class CountEntities(nn.Module):
        """Counts each row's entities; it names only what it needs: ``entities``."""

        def __init__(self) -> None:
            super().__init__()
            self.scale = nn.Parameter(torch.ones(1))

        def forward(self, entities):
            print(f"    CountEntities.forward received {sorted(entities)} as "
                  f"{sorted({type(v).__name__ for v in entities.values()})} on "
                  f"{sorted({str(v.device) for v in entities.values()})}")
            counts = sum(rt.lengths for rt in entities.values())  # [B]
            return counts[:, None].float() * self.scale  # [B, 1]

    counter = CountEntities()
    print(f"model_devices(counter) = {model_devices(counter)} (input, output: from its parameters)")
    print("safe_call(counter, state) with the numpy-side state of step 1 (ragged arrays):")
    print(f"    -> {safe_call(counter, state).tolist()}   ('action_masks' was ignored)")
    print("safe_call(counter, sampled_state) with the sampled state (RaggedTensors):")
    print(f"    -> {safe_call(counter, sampled_state).tolist()}")
    try:
        safe_call(counter, {"state": state})
    except TypeError as error:
        print(f"a dict without 'entities' is refused:\n    {error}")
    # Devices come from the model at every call: move it, and its inputs follow. A Machin-style
    # input_device / output_device attribute, if set, wins over its parameters' device.
    counter.output_device = "cpu"
    if torch.cuda.is_available():
        counter.to("cuda")
        print(f"after counter.to('cuda'): model_devices(counter) = {model_devices(counter)}")
    counts = safe_call(counter, sampled_state)
    print(f"with output_device='cpu' set, the result comes back on {counts.device}")

    net = RogueNet(envs.obs_space(), space, RogueNetConfig(d_model=16, n_layer=1, n_head=2, d_qk=8))
    out = safe_call(net, sampled_state)  # forward(entities, action_masks, visible=None, action=None)
    print("\nsafe_call(net, sampled_state) samples one choice per actor:")
    show_ragged("    out.action['Move']", out.action["Move"])
    rescored = safe_call(net, sampled_state, sampled_action)  # later dicts add keys: action=...
    print("safe_call(net, sampled_state, sampled_action) scores the stored actions instead:")
    show_ragged("    log_prob['Move']", rescored.log_prob["Move"])
    print(f"    log_prob_sum per row {rounded(rescored.log_prob_sum[:, 0])}")
    value = safe_call(net.critic(), sampled_state)  # forward(entities, visible=None)
    print(f"safe_call(net.critic(), sampled_state) -> {rounded(value[:, 0])} (the value head starts at zero)")

    # ------------------------------------------------------------------------------------
    section("6. A frame builds its own transitions")
    ppo = PPO(net, net.critic(), torch.optim.Adam, nn.MSELoss(), batch_size=8, seed=args.seed)
    single = EnvList(make_env, 1, seed=args.seed + 1)
    for attempt in range(10):  # play until an episode earns its reward, so that the numbers below say something
        episode = play_episode(ppo, single)
        if episode[-1]["reward"] > 0:
            break
    ppo.store_episode(episode)
    stored = ppo.replay_buffer
    print(f"store_episode of {len(episode)} one-row transitions -> {stored.size()} rows; the frame's schema:")
    print(f"    major {list(stored.schema.major_attr)}, sub {list(stored.schema.sub_attr)}")
    n, (value, advantage) = stored.sample_batch(0, sample_method="all", sample_attrs=["value", "gae"])
    print(f"    reward                 {[t['reward'] for t in episode]}")
    print(f"    value (return targets) {rounded(value[:, 0])}")
    print(f"    gae (advantages)       {rounded(advantage[:, 0])}")
    print("    (discount 0.99 and gae_lambda 1.0, Machin's defaults; the untrained critic's values are 0, so\n"
          "     each advantage equals its discounted return)")
    objective, value_loss = ppo.update()
    print(f"update(): surrogate objective {objective:+.4f}, value loss {value_loss:.6f}; "
          f"the on-policy buffer is cleared: size() = {stored.size()}")
    envs.close()
    single.close()


if __name__ == "__main__":
    main()
