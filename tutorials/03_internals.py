"""Tutorial 3: one batch of MineSweeper observations through VecObs and RogueNet, step by step.

    python tutorials/03_internals.py            # trains briefly (seconds), then prints every intermediate value
    python tutorials/03_internals.py --smoke    # the same after one training iteration (what the test runs)

A small RogueNet is first trained for a few PPO iterations, so that its weights are no longer
at their initial values (at initialisation attention is uniform and the value head is zero).
Then three MineSweeper environments on 3x3 grids, each with its own numbers of mines and robots
and one of them with an orbital cannon, are reset, batched and fed to a small RogueNet. The
script calls RogueNet's own submodules one after the other, in the order ``RogueNet.forward``
calls them, prints what each computes, and checks at the end that the result equals
``RogueNet.forward`` on the same batch. What you learn:

1. **Observation -> VecObs.** Each environment reports entities by type, with ids, and which
   entities act. ``EnvList`` batches them: one ragged array per entity type (one sequence
   per environment) and, per action, the actors as entity *indices* within their row, where
   the index order is the order of ``ObsSpace.entities`` (all mines, then all robots, then the
   cannon).
2. **The canonical state** (``to_state``): the dict that buffers store and ``RogueNet.forward``
   takes, every mask filled in.
3. **Embedding.** Each entity type has its own running input normalisation, Linear, ReLU and
   LayerNorm into ``d_model``; the embeddings are laid out as one flat stream of tokens, row
   after row, each row's entities in index order. Rows are stored longest first, so ``starts``
   (where each row begins) is not monotonic.
4. **Attention** runs within each row only: the flat stream is cut into buckets of rows, padded
   to the bucket's longest row where lengths differ, with a mask over the padding. Computing a
   row's attention alone, by hand, gives the same numbers.
5. **Heads.** An actor's token is ``starts[row] + actor index``. The categorical head projects
   it onto the choices, forbidden choices get ``-inf``; the select-entity head scores actor x
   actee pairs by query-key products. The value is the mean of a row's tokens through a
   linear layer.
6. **Back to the environments.** The ragged actions become per-environment ``Action`` objects
   with entity ids.

Not covered here: relative positions (``RelposEncodingConfig``), translation, visibility
masks, the ``__global__`` token of global actions, and pooling instead of attention.
"""
from __future__ import annotations

import argparse
import itertools
from typing import Dict, List, Optional

import numpy as np
import torch
from torch import nn

from entmachin.env import CategoricalAction, EnvList, to_state, to_vec_actions
from entmachin.env.env_list import to_env_actions
from entmachin.env.examples import MineSweeper
from entmachin.frame import PPO, RolloutCollector
from entmachin.model import RogueNet, RogueNetConfig
from entmachin.model.attention import plan_attention, segment_pool
from entmachin.model.embedding import TokenBatch
from entmachin.model.heads import CategoricalHead, masked_categorical
from entmachin.model.inputs import DeferredChecks, parse_action_masks, parse_entities
from entmachin.ragged import RaggedArray, ragged_to_arrays

# Three environments whose rows differ: (mines, robots, orbital cannon).
SETUPS = [(5, 1, False), (1, 1, True), (3, 2, False)]


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1, help="seeds the environments and the network")
    parser.add_argument("--train-iterations", type=int, default=10,
                        help="PPO iterations (24 environments x 16 steps each) before the walk-through")
    parser.add_argument("--smoke", action="store_true", help="one training iteration, to check that it runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.train_iterations = 1
    if args.train_iterations < 0:
        parser.error(f"--train-iterations must be >= 0, got {args.train_iterations}")
    return args


def section(title: str) -> None:
    print(f"\n{'=' * 8} {title} {'=' * (70 - len(title))}")


def make_envs(num_envs: int, seed: int) -> EnvList:
    """``num_envs`` environments cycling through ``SETUPS``."""
    setups = itertools.cycle(SETUPS)  # EnvList builds its environments in order

    def make_env() -> MineSweeper:
        n_mines, n_robots, cannon = next(setups)
        return MineSweeper(width=3, height=3, nmines=n_mines, nrobots=n_robots, orbital_cannon=cannon,
                           cooldown_period=0)

    return EnvList(make_env, num_envs, seed=seed)


def train(net: RogueNet, iterations: int, seed: int) -> None:
    """A few PPO iterations on the same three setups (how tutorial 4 and ``RolloutCollector`` train)."""
    ppo = PPO(net, net.critic(), torch.optim.Adam, nn.MSELoss(), batch_size=128, actor_update_times=12,
              critic_update_times=12, actor_learning_rate=3e-3, critic_learning_rate=3e-3, gae_lambda=0.95,
              entropy_weight=-0.01, seed=seed)
    envs = make_envs(24, seed + 1)
    collector = RolloutCollector(ppo, envs, n_steps=16)
    for iteration in range(iterations):
        stats = collector.collect()  # ppo.act(state) learns the input statistics as it goes
        ppo.update()
        print(f"training iteration {iteration + 1}/{iterations}: mean return {stats.mean_return:.3f} over "
              f"{len(stats.episode_returns)} episodes (1.0: every mine cleared)")
    envs.close()


def main(argv: Optional[List[str]] = None) -> Dict[str, bool]:
    """Runs the walk-through; returns the final checks (name -> whether by hand == forward)."""
    args = parse_args(argv)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small networks run fastest on one thread, and a seed then repeats exactly
    try:
        torch.manual_seed(args.seed)
        envs = make_envs(len(SETUPS), args.seed)
        net = RogueNet(envs.obs_space(), envs.action_space(), RogueNetConfig(d_model=8, n_layer=1, n_head=2, d_qk=4))
        train(net, args.train_iterations, args.seed)
        net.eval()  # as frames keep it outside update(): no dropout anywhere
        with np.printoptions(precision=3, suppress=True, linewidth=120):
            same = walk_through(net, envs, args.seed)
        envs.close()
        return same
    finally:
        torch.set_num_threads(previous_threads)


@torch.no_grad()
def walk_through(net: RogueNet, envs: EnvList, seed: int) -> Dict[str, bool]:
    """Sections 1 to 7 on one batch of ``envs``; returns whether each step by hand matched RogueNet."""
    obs_space, space = envs.obs_space(), envs.action_space()
    same: Dict[str, bool] = {}  # each step by hand == RogueNet's own module
    obs = envs.reset()

    # ------------------------------------------------------------------------------------
    section("1. Each environment's Observation")
    for i, ob in enumerate(envs.last_obs):
        print(f"environment {i}: {ob}")
        for etype, feats in ob.features.items():
            print(f"    {etype:<15} features {np.asarray(feats).tolist()}  ids {list(ob.ids.get(etype, []))}")
        for name, mask in ob.actions.items():
            print(f"    action {name!r}: actors {list(mask.actor_ids or [])}"
                  + (f", mask {np.asarray(mask.mask).astype(int).tolist()}" if getattr(mask, "mask", None) is not None
                     else ""))

    section("2. VecObs and the canonical state")
    print("VecObs.features (one sequence per environment; entity index order "
          f"{list(obs_space.entities)}):")
    for etype, buf in obs.features.items():
        print(f"    {etype:<15} lengths {buf.size1().tolist()}  items {buf.as_array().tolist()}")
    for name, amask in obs.action_masks.items():
        print(f"action_masks[{name!r}].actors (entity indices within the row): "
              f"{per_row(amask.actors)}")
        if getattr(amask, "actees", None) is not None:
            print(f"action_masks[{name!r}].actees: {per_row(amask.actees)}")
    state = to_state(obs, space)
    print(f"state = to_state(obs, space): entities {list(state['entities'])}, action_masks "
          f"{ {k: sorted(v) for k, v in state['action_masks'].items()} }")

    # ------------------------------------------------------------------------------------
    section("3. Parsing and embedding")
    device = net.value_head.weight.device
    deferred = DeferredChecks()  # value checks, decided together in one device sync
    masks = parse_action_masks(net.action_space, state["action_masks"], device, deferred)
    parsed = parse_entities(net.obs_space, state["entities"], None, device, deferred,
                            len(next(iter(masks.values())).actors))
    deferred.raise_first()
    embedding = net.embedding
    hand_embedded = {}
    for k, etype in enumerate(embedding.token_types):
        norm, linear, relu, layer_norm = embedding.embeddings[k]
        feats = parsed.features[etype].data  # [n_entities_of_type, n_features]
        if feats.shape[0] == 0:
            continue
        print(f"{etype}: running mean {norm.mean.numpy()}, std {norm.std().numpy()} (from {int(norm.count)} entities)")
        normalised = norm(feats)  # [n, n_features]
        embedded = layer_norm(relu(linear(normalised)))  # [n, d_model]
        hand_embedded[etype] = embedded
        for raw, z, e in zip(feats, normalised, embedded):
            print(f"    features {raw.numpy()} -> normalised {z.numpy()} -> embedding {e.numpy()}")
    tokens = embedding(parsed)  # the real module: the same embeddings, laid out as one stream
    layout = tokens.layout
    print(f"\nthe token stream: x {tuple(tokens.x.shape)}, one token per entity")
    labels = token_labels(tokens)
    for t, label in enumerate(labels):
        print(f"    token {t:>2} {label:<24} {tokens.x[t].numpy()}")
    print(f"layout.lengths     {layout.lengths.tolist()}   tokens per row")
    print(f"layout.starts      {layout.starts.tolist()}   first token of each row (longest row first)")
    print(f"layout.batch_index {layout.batch_index.tolist()}   row of each token")
    diff = max((tokens.x[tokens.dest[etype]] - e).abs().max().item() for etype, e in hand_embedded.items())
    print(f"max |by hand - EntityEmbedding| over every token: {diff:.2e}")
    same["embedding"] = diff < 1e-5

    # ------------------------------------------------------------------------------------
    section("4. Attention within each row")
    plans = plan_attention(layout, tokens.visible)
    for p in plans:
        b = p.bucket
        pad = "no padding" if b.gather is None else \
            f"padded; gather {b.gather.tolist()} (index {layout.n_tokens} = a zero token)"
        print(f"bucket: tokens {b.start}..{b.start + b.n_tokens - 1}, {b.n_rows} rows of width {b.width}, {pad}")
        if b.key_valid is not None:
            print(f"    key_valid (real, not padding) {b.key_valid.int().tolist()}")
        # On a CPU, rows this narrow are packed side by side into one attention sequence, with
        # a block-diagonal mask that keeps each row to itself (one kernel call instead of many).
        print(f"    {p.group} row(s) per attention sequence; mask "
              f"{'none' if p.mask is None else tuple(p.mask.shape)}")
    block = net.trunk.blocks[0]
    x = tokens.x  # [n_tokens, d_model]
    h = block.ln1(x)  # [n_tokens, d_model]
    mixed = block.mix(h, plans)  # [n_tokens, d_model]: RaggedSelfAttention over the buckets
    by_hand = torch.zeros_like(mixed)  # [n_tokens, d_model]
    for row in range(layout.n_rows):  # each row's tokens attend to each other, and to nothing else
        index = layout.starts[row] + torch.arange(int(layout.lengths[row]))  # [n_row_tokens]
        by_hand[index], weights = attend_one_row(block.mix, h[index])
        print(f"\nrow {row} by hand: attention weights of head 0 (each query token's weights over tokens "
              f"{index.tolist()}):")
        for t, w in zip(index.tolist(), weights[0]):
            print(f"    {labels[t]:<24} {w.numpy()}")
    diff = (by_hand - mixed).abs().max().item()
    print(f"max |by hand - RaggedSelfAttention| over every token: {diff:.2e}")
    same["attention"] = diff < 1e-5
    x = x + mixed
    x = x + block.mlp(block.ln2(x))  # [n_tokens, d_model]
    trunk = net.trunk(tokens.x, layout, tokens.visible)  # the real trunk on the same tokens
    diff = (x - trunk).abs().max().item()
    print(f"after the block (attention + MLP, both residual): max |by hand - trunk| = {diff:.2e}")
    same["trunk"] = diff < 1e-5

    # ------------------------------------------------------------------------------------
    section("5. Action heads and the value")
    seed += 100
    torch.manual_seed(seed)  # the heads sample: the same seed below makes forward sample the same
    hand_action, hand_log_prob = {}, {}
    for name, mask in masks.items():
        head = net.heads[net.action_names.index(name)]
        actors = mask.actors
        actor_tokens = layout.starts[actors.batch_index] + actors.data[:, 0]  # [n_actors]
        print(f"{name!r}: actors per row {[a.reshape(-1).tolist() for a in actors.to_list()]} + starts of their "
              f"rows -> tokens {actor_tokens.tolist()}")
        if isinstance(head, CategoricalHead):
            logits = head.proj(x[actor_tokens])  # [n_actors, n_choices]
            allowed = mask.mask  # [n_actors, n_choices]
        else:
            actees = mask.actees
            actee_tokens = layout.starts[actees.batch_index] + actees.data[:, 0]  # [n_actees]
            print(f"    actees -> tokens {actee_tokens.tolist()}")
            logits, allowed = select_entity_logits(head, x, actors, actor_tokens, actees, actee_tokens,
                                                   mask.actee_mask)
        out = masked_categorical(logits, allowed)
        probs = torch.softmax(logits.masked_fill(~allowed, float("-inf")), dim=-1)  # [n_actors, n_choices]
        for t, lg, p, a in zip(actor_tokens.tolist(), logits, probs, out.action.tolist()):
            print(f"    {labels[t]:<24} logits {lg.numpy()}  probs {p.numpy()}  sampled {a}")
        hand_action[name], hand_log_prob[name] = out.action, out.log_prob
    pooled = segment_pool(x, layout.batch_index, layout.n_rows, "mean")  # [B, d_model]
    hand_value = net.value_head(pooled)  # [B, 1]
    print(f"value: mean of each row's tokens -> value_head: {hand_value[:, 0].numpy()}")

    # ------------------------------------------------------------------------------------
    section("6. The same batch through RogueNet.forward")
    torch.manual_seed(seed)
    output = net(state["entities"], state["action_masks"])
    value = net.value(state["entities"])
    same["value"] = torch.allclose(value, hand_value, atol=1e-6)
    for name in masks:
        same[f"{name} action"] = torch.equal(output.action[name].data[:, 0], hand_action[name])
        same[f"{name} log_prob"] = torch.allclose(output.log_prob[name].data[:, 0], hand_log_prob[name], atol=1e-6)
        print(f"{name!r}: forward's actions {output.action[name].data[:, 0].tolist()}, by hand "
              f"{hand_action[name].tolist()}; log-probabilities equal: {same[f'{name} log_prob']}")
    print(f"log_prob_sum per row {output.log_prob_sum[:, 0].numpy()}, value {value[:, 0].numpy()}")
    print(f"stepping by hand gives RogueNet.forward's output: {all(same.values())}")
    for check, passed in same.items():
        print(f"    {check:<32} {passed}")

    # ------------------------------------------------------------------------------------
    section("7. Back to the environments")
    actions = to_vec_actions(output.action)  # {name: RaggedArrayI64}, one sequence per environment
    for name, buf in actions.items():
        print(f"{name!r}: {per_row(buf)}")
    choices = {name: buf.as_array().reshape(-1) for name, buf in actions.items()}
    offsets = {name: np.concatenate([[0], np.cumsum(buf.size1())]) for name, buf in actions.items()}
    for i, ob in enumerate(envs.last_obs):
        row_choices = {name: c[offsets[name][i]:offsets[name][i + 1]] for name, c in choices.items()}
        received = to_env_actions(obs_space, space, row_choices, ob)  # what EnvList.act hands environment i
        print(f"environment {i}.act receives:")
        for name, action in received.items():
            if isinstance(action, CategoricalAction):
                print(f"    {name!r}: CategoricalAction, actors {list(action.actors)} choose {action.labels}")
            else:
                print(f"    {name!r}: SelectEntityAction, actors {list(action.actors)} select {list(action.actees)}")
    obs = envs.act(actions)
    print(f"after the step: reward {obs.reward.tolist()}, done {obs.done.tolist()}")
    return same


def per_row(buf: RaggedArray) -> List[list]:
    """The values of a one-feature ragged array, one list per sequence (environment)."""
    flat, lengths = ragged_to_arrays(buf)
    return [part.reshape(-1).tolist() for part in np.split(flat, np.cumsum(lengths)[:-1])]


def token_labels(tokens: TokenBatch) -> List[str]:
    """``row r: <type> <index within the type>`` for every token of the stream."""
    labels = [""] * tokens.x.shape[0]
    rows = tokens.layout.batch_index.tolist()
    for etype, dest in tokens.dest.items():
        within = {}
        for t in dest.tolist():
            within[rows[t]] = within.get(rows[t], -1) + 1
            labels[t] = f"row {rows[t]}: {etype} {within[rows[t]]}"
    return labels


def attend_one_row(attention, h: torch.Tensor):
    """Multi-head self-attention over one row's tokens, written out (no padding, no mask).

    Shape:
        h: ``[n, d_model]``; returns ``([n, d_model], weights [n_head, n, n])``.
    """
    n, d_model = h.shape
    n_head = attention.n_head
    d_head = d_model // n_head
    q, k, v = attention.qkv(h).view(n, 3, n_head, d_head).permute(1, 2, 0, 3)  # [n_head, n, d_head] each
    weights = torch.softmax(q @ k.transpose(1, 2) / d_head ** 0.5, dim=-1)  # [n_head, n, n]
    y = (weights @ v).transpose(0, 1).reshape(n, d_model)  # [n, d_model]
    return attention.proj(y), weights


def select_entity_logits(head, x: torch.Tensor, actors, actor_tokens: torch.Tensor, actees,
                         actee_tokens: torch.Tensor, actee_mask: Optional[torch.Tensor]):
    """Each actor's query against the keys of its row's actees, one actor at a time.

    Shape:
        returns logits and allowed, ``[n_actors, width]`` each, ``width`` the longest actee
        list (padding: logit 0, not allowed).
    """
    q = head.query(x[actor_tokens])  # [n_actors, d_qk]
    k = head.key(x[actee_tokens])  # [n_actees, d_qk]
    width = actees.max_length
    logits = x.new_zeros(actors.n_items, width)  # [n_actors, width]
    allowed = torch.zeros(actors.n_items, width, dtype=torch.bool)  # [n_actors, width]
    pair = 0  # actee_mask runs row by row, each row's actors x actees row-major
    for a, row in enumerate(actors.batch_index.tolist()):
        start, end = actees.offsets[row].item(), actees.offsets[row + 1].item()
        logits[a, : end - start] = k[start:end] @ q[a] / head.d_qk ** 0.5  # [n_row_actees]
        allowed[a, : end - start] = True if actee_mask is None else actee_mask[pair:pair + end - start]
        pair += end - start
    return logits, allowed


if __name__ == "__main__":
    main()
