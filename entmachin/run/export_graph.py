"""The ONNX graph of a trained acting network, written op by op for ``entmachin export``.

RogueNet's acting path (input normalisation with frozen statistics, translation, relative
positions, attention or pooling, the action heads) is written into the graph op by op
(``onnx_graph.Graph``) from the network's weights, so that every count is dynamic: any number of
observations, any number of entities of each type (zero included), actors and actees. Inside the
graph the entities of each observation are laid out padded to the batch's longest observation;
padding never mixes into a real token (attention masks it out) and is dropped before the outputs.

The graph's interface (``docs/guides/export-and-deploy.md``; ``B`` observations, ``N_t`` entities of type ``t``, ``A``
actors of an action, ``E`` actees, ``P`` actor x actee pairs):

* inputs: ``features/<type>`` float32 ``[N_t, F_t]``, ``lengths/<type>`` int64 ``[B]`` (entities of
  each observation, in order), ``visible/<type>`` bool ``[N_t]``, ``global_features`` float32
  ``[B, G]`` (when the space has global features); per action ``actor_lengths/<a>`` int64 ``[B]``,
  ``actors/<a>`` int64 ``[A]`` (each actor's index in its observation's entity list: every entity
  of the first type, then the second, ...; not for global actions, whose actor is the observation
  itself), ``mask/<a>`` bool ``[A, C]`` (categorical and global), ``actees/<a>`` int64 ``[E]``,
  ``actee_lengths/<a>`` int64 ``[B]`` and ``actee_mask/<a>`` bool ``[P]`` (select-entity, row-major
  actor x actee per observation), and ``noise/<a>`` float32 ``[A]`` uniform in ``[0, 1)``; a
  continuous action (``V`` values) has ``low/<a>`` and ``high/<a>`` float32 ``[A, V]``, each
  actor's bounds, instead of a mask and noise.
* outputs per action: ``probs/<a>`` (a policy) or ``q/<a>`` (a Q-network) float32 ``[A, C]``, or
  flat ``[P]`` with ``counts/<a>`` int64 ``[A]`` for select-entity actions; ``argmax/<a>`` int64
  ``[A]``, the most likely (greatest-valued) allowed choice; ``sample/<a>`` int64 ``[A]``, the
  choice the noise draws by inverse CDF (``inverse_cdf_sample``; a Q-network's is its argmax).
  A continuous action gives its distribution's parameters, ``alpha/<a>`` and ``beta/<a>`` (Beta)
  or ``mean/<a>`` and ``log_std/<a>`` (squashed Gaussian, ``log_std`` clamped as the head clamps
  it), and ``point/<a>``, the deterministic value (``continuous.deterministic_point``), each
  float32 ``[A, V]``; the metadata's ``entmachin.continuous`` names each one's distribution, and
  ``entmachin.deploy`` samples from the parameters in numpy.
* with ``model.memory``, the states' inputs and outputs too (``entmachin.run.export_memory``).
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional, Tuple

import numpy as np
from torch import nn

from entmachin.env import ObsSpace, SelectEntityActionSpace
from entmachin.env.action import CONTINUOUS_SPACES, GLOBAL_SPACES
from entmachin.model.attention import RaggedPool
from entmachin.model.continuous import ContinuousHead
from entmachin.model.embedding import FeaturelessEmbedding
from entmachin.model.heads import CategoricalQHead
from entmachin.model.rogue_net import RogueNet
from entmachin.run.export_memory import entity_memory_step, memory_step
from entmachin.run.export_ops import (_BOOL, _F32, _I64, _NEG_INF, _Rows, _dueling, _gelu, _input_norm, _layer_norm,
                                      _linear, _np, choices, continuous_head)

__all__ = ["RogueNetGraph"]


class RogueNetGraph:
    """Writes a RogueNet's acting path (policy heads, or Q-heads) into a ``Graph``."""

    def __init__(self, g: Any, net: RogueNet, q: bool) -> None:
        self.g, self.net, self.q = g, net, q
        self.obs_space: ObsSpace = net.obs_space
        self.types = list(self.obs_space.entities)
        self.n_global = len(self.obs_space.global_features)
        self.d = net.config.d_model

    # ------------------------------------------------------------------ inputs and layout

    def build(self) -> None:
        g, net = self.g, self.net
        features, lengths, visible = {}, {}, {}
        for t in self.types:
            width = len(self.obs_space.entities[t].features)
            features[t] = g.input(f"features/{t}", _F32, [f"n_entities/{t}", width])
            lengths[t] = g.input(f"lengths/{t}", _I64, ["n_obs"])
            visible[t] = g.input(f"visible/{t}", _BOOL, [f"n_entities/{t}"])
        glob = g.input("global_features", _F32, ["n_obs", self.n_global]) if self.n_global else None
        action_inputs = self._action_inputs()
        if self.types:
            n_obs = g.dim(lengths[self.types[0]], 0)
        else:  # a global action is the only token
            n_obs = g.dim(action_inputs[net.action_names[0]]["actor_lengths"], 0)

        # Token layout: each observation's entities in type order, then its __global__ token.
        rows = {t: _Rows(g, lengths[t], g.dim(features[t], 0)) for t in self.types}
        zero_rows = g.zeros(g.vec(n_obs), np.int64)  # [B]
        offset, position = zero_rows, {}
        for t in self.types:
            position[t] = g.op("Add", g.op("Gather", offset, rows[t].row), rows[t].position)  # [N_t]
            offset = g.op("Add", offset, lengths[t])
        global_token = net.embedding.global_token
        total = g.op("Add", offset, g.const(1, np.int64)) if global_token else offset  # [B] tokens per row
        width = g.reduce_max(total, 1)  # T
        self.total, self.width, self.n_obs = total, width, n_obs
        slot = {t: g.op("Add", g.op("Mul", rows[t].row, width), position[t]) for t in self.types}  # [N_t]
        obs_index = g.arange(n_obs)
        if global_token:
            slot["__global__"] = g.op("Add", g.op("Mul", obs_index, width), offset)  # [B]

        feats = self._translate(features, rows)
        embedded = self._embed(feats, rows, glob)
        order = self.types + (["__global__"] if global_token else [])
        all_slots = g.op("Concat", *[slot[t] for t in order], axis=0)  # [n_tokens]
        flat_shape = g.vec(g.op("Mul", n_obs, width), g.const(self.d, np.int64))
        x = g.op("ScatterND", g.zeros(flat_shape), g.unsqueeze(all_slots, 1),
                 g.op("Concat", *[embedded[t] for t in order], axis=0))  # [B * T, d]
        x = g.op("Reshape", x, g.vec(n_obs, width, g.const(self.d, np.int64)))  # [B, T, d]

        valid = g.op("Less", g.unsqueeze(g.arange(width), 0), g.unsqueeze(total, 1))  # [B, T]
        n_slots = g.vec(g.op("Mul", n_obs, width))
        vis = g.zeros(n_slots, np.bool_)
        if self.types:
            vis = g.op("ScatterND", vis, g.unsqueeze(g.op("Concat", *[slot[t] for t in self.types], axis=0), 1),
                       g.op("Concat", *[visible[t] for t in self.types], axis=0))
        if global_token:
            vis = g.op("ScatterND", vis, g.unsqueeze(slot["__global__"], 1),
                       g.op("Expand", g.const([True]), g.vec(n_obs)))
        vis = g.op("Reshape", vis, g.vec(n_obs, width))  # [B, T]; padding: invisible
        self.x = self._trunk(x, valid, vis, feats, slot, n_slots)
        if net.memory is not None:
            trunk, self.x = self.x, memory_step(g, net.memory, self.x, valid)
            if net.entity_memory is not None:
                self.x = entity_memory_step(g, net.entity_memory, trunk, self.x,
                                            {t: (slot[t], rows[t].row) for t in self.types})
        self.flat = g.op("Reshape", self.x, g.const([-1, self.d], np.int64))  # [B * T, d]
        for name in net.action_names:
            self._head(name, action_inputs[name])

    def _action_inputs(self) -> Dict[str, Dict[str, str]]:
        g, out = self.g, {}
        for name, space in self.net.action_space.items():
            n = f"n_actors/{name}"
            entry = {"actor_lengths": g.input(f"actor_lengths/{name}", _I64, ["n_obs"])}
            if not isinstance(space, GLOBAL_SPACES):
                entry["actors"] = g.input(f"actors/{name}", _I64, [n])
            if isinstance(space, CONTINUOUS_SPACES):  # each actor's bounds; sampling happens outside
                entry["low"] = g.input(f"low/{name}", _F32, [n, len(space)])
                entry["high"] = g.input(f"high/{name}", _F32, [n, len(space)])
                out[name] = entry
                continue
            if isinstance(space, SelectEntityActionSpace):
                entry["actees"] = g.input(f"actees/{name}", _I64, [f"n_actees/{name}"])
                entry["actee_lengths"] = g.input(f"actee_lengths/{name}", _I64, ["n_obs"])
                entry["actee_mask"] = g.input(f"actee_mask/{name}", _BOOL, [f"n_pairs/{name}"])
            else:
                entry["mask"] = g.input(f"mask/{name}", _BOOL, [n, len(space.index_to_label)])
            entry["noise"] = g.input(f"noise/{name}", _F32, [n])
            out[name] = entry
        return out

    def _translate(self, features: Dict[str, str], rows: Dict[str, _Rows]) -> Dict[str, str]:
        """``TranslatePositions``: positions relative to (and rotated into) each row's reference."""
        g, tr = self.g, self.net.embedding.translate
        if tr is None:
            return dict(features)
        ref = tr.config.reference_entity
        ref_feats = features[ref]
        n_ref = len(self.obs_space.entities[ref].features)
        padded = g.op("Concat", ref_feats, g.zeros(g.const([1, n_ref], np.int64)), axis=0)  # [N_ref + 1, F]
        first = g.op("Gather", padded, rows[ref].starts)  # [B, F]: each row's first reference (or padding)
        has_ref = g.unsqueeze(g.op("Greater", f"lengths/{ref}", g.const(0, np.int64)), 1)  # [B, 1]
        origin = g.op("Where", has_ref, g.op("Gather", first, g.const(tr.reference_indices, np.int64), axis=1),
                      g.const(np.float32(0.0)))  # [B, p]
        cos_sin = None
        if tr.rotation_indices is not None:
            heading = g.op("Gather", first, g.const(tr.rotation_indices, np.int64), axis=1)  # [B, 1 or 2]
            if len(tr.rotation_indices) == 1:
                heading = g.op("Concat", g.op("Cos", heading), g.op("Sin", heading), axis=1)  # [B, 2]
            cos_sin = g.op("Where", has_ref, heading, g.const(np.array([1.0, 0.0], np.float32)))
        out = dict(features)
        for t, indices in tr.moved.items():
            data = features[t]
            rel = g.op("Sub", g.op("Gather", data, g.const(indices, np.int64), axis=1),
                       g.op("Gather", origin, rows[t].row))  # [N_t, p]
            if cos_sin is not None:
                cs = g.op("Gather", cos_sin, rows[t].row)  # [N_t, 2]
                c, s = (g.op("Gather", cs, g.const([k], np.int64), axis=1) for k in (0, 1))  # [N_t, 1] each
                x, y = (g.op("Gather", rel, g.const([k], np.int64), axis=1) for k in (0, 1))
                rel = g.op("Concat", g.op("Add", g.op("Mul", c, x), g.op("Mul", s, y)),
                           g.op("Sub", g.op("Mul", c, y), g.op("Mul", s, x)), axis=1)
            n_f = len(self.obs_space.entities[t].features)
            columns = list(range(n_f))
            for k, i in enumerate(indices):
                columns[i] = n_f + k
            moved = g.op("Gather", g.op("Concat", data, rel, axis=1), g.const(columns, np.int64), axis=1)
            if tr.config.add_dist_feature:
                moved = g.op("Concat", moved, g.op("ReduceL2", rel, axes=[1], keepdims=1), axis=1)
            out[t] = moved
        return out

    def _embed(self, feats: Dict[str, str], rows: Dict[str, _Rows], glob: Optional[str]) -> Dict[str, str]:
        g, emb = self.g, self.net.embedding
        out = {}
        for k, t in enumerate(emb.token_types):
            module = emb.embeddings[k]
            if t == "__global__":
                x = glob
                n = self.n_obs
            else:
                x = feats[t]
                if glob is not None:
                    x = g.op("Concat", x, g.op("Gather", glob, rows[t].row), axis=1)
                n = g.dim(feats[t], 0)
            if isinstance(module, FeaturelessEmbedding):
                vector = g.const(_np(module.vector)[None, :], hint=f"embedding.{t}.vector")
                out[t] = g.op("Expand", vector, g.vec(n, g.const(self.d, np.int64)))
                continue
            norm, linear, _, ln = module
            h = _input_norm(g, x, norm, f"embedding.{t}.norm")
            h = g.op("Relu", _linear(g, h, linear, f"embedding.{t}.linear"))
            out[t] = _layer_norm(g, h, ln, f"embedding.{t}.ln")
        return out

    # ------------------------------------------------------------------ trunk

    def _trunk(self, x: str, valid: str, vis: str, feats: Dict[str, str], slot: Dict[str, str],
               n_slots: str) -> str:
        g, net = self.g, self.net
        if not net.trunk.blocks:
            return x
        if net.trunk.pooling:
            pool_valid = (valid, g.op("And", valid, vis))
            for i, block in enumerate(net.trunk.blocks):
                h = _layer_norm(g, x, block.ln1, f"block{i}.ln1")
                x = g.op("Add", x, self._pool(block.mix, h, pool_valid, vis, f"block{i}.pool"))
                x = self._mlp(block, x, i)
            return x
        # Attention mask [B, 1, T, T]: real keys only; visible queries see visible keys only; every
        # token (padding too) may see itself, so that no softmax is empty.
        vis_q, vis_k = g.unsqueeze(vis, 2), g.unsqueeze(vis, 1)  # [B, T, 1], [B, 1, T]
        allowed = g.op("And", g.op("Or", g.op("Not", vis_q), vis_k), g.unsqueeze(valid, 1))  # [B, T, T]
        positions = g.arange(self.width)
        eye = g.op("Equal", g.unsqueeze(positions, 1), g.unsqueeze(positions, 0))  # [T, T]
        mask = g.unsqueeze(g.op("Or", allowed, eye), 1)  # [B, 1, T, T]
        cells = self._relpos_cells(feats, slot, n_slots) if net.trunk.relpos is not None else None
        for i, block in enumerate(net.trunk.blocks):
            h = _layer_norm(g, x, block.ln1, f"block{i}.ln1")
            x = g.op("Add", x, self._attention(block.mix, h, mask, cells, f"block{i}.attn"))
            x = self._mlp(block, x, i)
        return x

    def _mlp(self, block: nn.Module, x: str, i: int) -> str:
        g = self.g
        first, _, second, _ = block.mlp
        h = _layer_norm(g, x, block.ln2, f"block{i}.ln2")
        h = _linear(g, _gelu(g, _linear(g, h, first, f"block{i}.mlp.0")), second, f"block{i}.mlp.2")
        return g.op("Add", x, h)

    def _pool(self, pool: RaggedPool, h: str, valids: Tuple[str, str], vis: str, hint: str) -> str:
        """``RaggedPool``: visible tokens get the pool of their row's visible tokens, others of all."""
        g = self.g
        h = _linear(g, h, pool.prepool, hint + ".prepool")  # [B, T, d]
        pooled = []
        for valid in valids:
            weight = g.unsqueeze(g.cast(valid, _F32), 2)  # [B, T, 1]
            count = g.op("ReduceSum", weight, g.const([1], np.int64), keepdims=0)  # [B, 1]
            parts = []
            for op in pool.ops:
                if op == "mean":
                    total = g.op("ReduceSum", g.op("Mul", h, weight), g.const([1], np.int64), keepdims=0)
                    parts.append(g.op("Div", total, g.op("Max", count, g.const(np.float32(1.0)))))
                else:
                    masked = g.op("Where", g.unsqueeze(valid, 2), h, g.const(_NEG_INF))
                    biggest = g.op("ReduceMax", masked, axes=[1], keepdims=0)  # [B, d]
                    nonempty = g.op("Greater", count, g.const(np.float32(0.0)))
                    parts.append(g.op("Where", nonempty, biggest, g.const(np.float32(0.0))))
            joined = parts[0] if len(parts) == 1 else g.op("Concat", *parts, axis=1)
            pooled.append(g.unsqueeze(_linear(g, joined, pool.proj, hint + ".proj"), 1))  # [B, 1, d]
        every, visible_only = pooled
        return g.op("Where", g.unsqueeze(vis, 2), visible_only, every)  # [B, T, d]

    def _attention(self, attn: nn.Module, h: str, mask: str, cells: Optional[Tuple[str, str]], hint: str) -> str:
        g, n_head = self.g, attn.n_head
        d_head = self.d // n_head
        qkv = _linear(g, h, attn.qkv, hint + ".qkv")  # [B, T, 3d]
        qkv = g.op("Reshape", qkv, g.const([0, 0, 3, n_head, d_head], np.int64))
        qkv = g.op("Transpose", qkv, perm=[2, 0, 3, 1, 4])  # [3, B, h, T, d_head]
        q, k, v = (g.op("Gather", qkv, g.const(i, np.int64), axis=0) for i in range(3))  # [B, h, T, d_head]
        scale = g.const(np.float32(1.0 / math.sqrt(d_head)))
        scores = g.op("Mul", g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2])), scale)  # [B, h, T, T]
        relpos = attn._relpos[0]
        if cells is not None:
            key_cells, value_cells = cells
            table = g.op("Mul", g.op("MatMul", q, g.const(_np(relpos.keys).T, hint="relpos.keys")), scale)
            index = g.op("Expand", g.unsqueeze(key_cells, 1), g.op("Shape", scores))
            scores = g.op("Add", scores, g.op("GatherElements", table, index, axis=-1))
        scores = g.op("Where", mask, scores, g.const(_NEG_INF))
        att = g.op("Softmax", scores, axis=-1)
        y = g.op("MatMul", att, v)  # [B, h, T, d_head]
        if cells is not None:
            values = _np(relpos.values)  # [n_cells * n_tables, d_head]
            index = g.op("Expand", g.unsqueeze(value_cells, 1), g.op("Shape", scores))
            shape = g.op("Concat", g.op("Shape", scores, start=0, end=3), g.const([values.shape[0]], np.int64), axis=0)
            per_cell = g.op("ScatterElements", g.zeros(shape), index, att, axis=-1, reduction="add")
            y = g.op("Add", y, g.op("MatMul", per_cell, g.const(values, hint="relpos.values")))
        y = g.op("Reshape", g.op("Transpose", y, perm=[0, 2, 1, 3]), g.const([0, 0, self.d], np.int64))
        return _linear(g, y, attn.proj, hint + ".proj")

    def _relpos_cells(self, feats: Dict[str, str], slot: Dict[str, str], n_slots: str) -> Tuple[str, str]:
        """``RelativePositionEncoding.cells`` and ``value_cells``: int64 ``[B, T, T]`` each."""
        g, relpos = self.g, self.net.trunk.relpos
        cfg = relpos.config
        p = len(cfg.position_features)
        n_obs, width = self.n_obs, self.width
        positions = g.zeros(g.op("Concat", n_slots, g.const([p], np.int64), axis=0))  # [B * T, p]
        has = g.zeros(n_slots, np.bool_)  # [B * T]
        token_type = g.zeros(n_slots, np.int64)  # [B * T]
        with_positions = [t for t in self.types if relpos.position_indices.get(t) is not None]
        for t in with_positions:
            where = g.unsqueeze(slot[t], 1)
            values = g.op("Gather", feats[t], g.const(relpos.position_indices[t], np.int64), axis=1)
            positions = g.op("ScatterND", positions, where, values)
            has = g.op("ScatterND", has, where, g.op("Expand", g.const([True]), g.op("Shape", slot[t])))
        if cfg.per_entity_values:
            for k, t in enumerate(self.net.embedding.token_types):
                if k and t in slot:
                    token_type = g.op("ScatterND", token_type, g.unsqueeze(slot[t], 1),
                                      g.op("Expand", g.const([k], np.int64), g.op("Shape", slot[t])))
        pos = g.op("Reshape", positions, g.vec(n_obs, width, g.const(p, np.int64)))  # [B, T, p]
        rel = g.op("Sub", g.unsqueeze(pos, 1), g.unsqueeze(pos, 2))  # [B, T(query), T(key), p]
        extent = g.const(np.array(cfg.extent, np.float32))
        rel = g.op("Div", rel, g.const(np.float32(cfg.scale)))
        rel = g.op("Round", g.op("Max", g.op("Min", rel, extent), g.op("Neg", extent)))
        strides = g.const(relpos.strides.cpu().numpy())
        cell = g.op("ReduceSum", g.op("Mul", g.cast(g.op("Add", rel, extent), _I64), strides),
                    g.const([-1], np.int64), keepdims=0)  # [B, T, T]
        has = g.op("Reshape", has, g.vec(n_obs, width))
        both = g.op("And", g.unsqueeze(has, 2), g.unsqueeze(has, 1))
        cells = g.op("Where", both, cell, g.const(np.int64(relpos.n_cells - 1)))
        if not cfg.per_entity_values:
            return cells, cells
        offsets = g.op("Mul", g.op("Reshape", token_type, g.vec(n_obs, width)), g.const(np.int64(relpos.n_cells)))
        return cells, g.op("Add", cells, g.unsqueeze(offsets, 1))

    # ------------------------------------------------------------------ heads

    def _head(self, name: str, inputs: Dict[str, str]) -> None:
        g, net = self.g, self.net
        k = net.action_names.index(name)
        head = net.q_heads[k] if self.q else net.heads[k]
        space = net.action_space[name]
        actor_lengths = inputs["actor_lengths"]
        n_actors = g.dim(inputs["low" if isinstance(head, ContinuousHead) else "noise"], 0)
        actor_rows = _Rows(g, actor_lengths, n_actors).row  # [A]
        if isinstance(space, GLOBAL_SPACES):
            within = g.op("Sub", g.op("Gather", self.total, actor_rows), g.const(1, np.int64))  # the __global__ token
        else:
            within = inputs["actors"]
        actor_x = g.op("Gather", self.flat, g.op("Add", g.op("Mul", actor_rows, self.width), within))  # [A, d]
        if isinstance(head, ContinuousHead):
            continuous_head(g, name, head, actor_x, inputs["low"], inputs["high"])
            return
        if isinstance(space, SelectEntityActionSpace):
            values, allowed, in_range = self._select_scores(head, name, inputs, actor_rows, actor_x)
            if self.q and head.value is not None:
                values = _dueling(g, values, _linear(g, actor_x, head.value, f"{name}.q.value"), allowed)
        else:
            allowed = inputs["mask"]
            values = _linear(g, actor_x, head.proj, f"{name}.{'q.' if self.q else ''}proj")  # [A, C]
            if self.q and isinstance(head, CategoricalQHead) and head.value is not None:
                values = _dueling(g, values, _linear(g, actor_x, head.value, f"{name}.q.value"), allowed)
            in_range = None
        table, best, sample = choices(g, values, allowed, inputs["noise"], self.q)
        label = "q" if self.q else "probs"
        if in_range is None:
            g.output(table, f"{label}/{name}", _F32, [f"n_actors/{name}", len(space.index_to_label)])
        else:
            flat = g.op("Compress", g.op("Reshape", table, g.const([-1], np.int64)),
                        g.op("Reshape", in_range, g.const([-1], np.int64)))
            g.output(flat, f"{label}/{name}", _F32, [f"n_pairs/{name}"])
            g.output(g.op("Gather", inputs["actee_lengths"], actor_rows), f"counts/{name}", _I64, [f"n_actors/{name}"])
        g.output(best, f"argmax/{name}", _I64, [f"n_actors/{name}"])
        g.output(sample, f"sample/{name}", _I64, [f"n_actors/{name}"])

    def _select_scores(self, head: nn.Module, name: str, inputs: Dict[str, str], actor_rows: str,
                       actor_x: str) -> Tuple[str, str, str]:
        """``SelectEntityHead.scores``: ``[A, E_max]`` logits, the allowed pairs and the real ones."""
        g = self.g
        actee_lengths = inputs["actee_lengths"]
        n_actees = g.dim(inputs["actees"], 0)
        actees = _Rows(g, actee_lengths, n_actees)
        actee_x = g.op("Gather", self.flat, g.op("Add", g.op("Mul", actees.row, self.width), inputs["actees"]))
        query = _linear(g, actor_x, head.query, f"{name}.query")  # [A, d_qk]
        key = _linear(g, actee_x, head.key, f"{name}.key")  # [E, d_qk]
        widest = g.reduce_max(actee_lengths, 1)  # E_max
        d_qk = g.const(head.d_qk, np.int64)
        slots = g.op("Add", g.op("Mul", actees.row, widest), actees.position)  # [E]
        keys = g.op("ScatterND", g.zeros(g.vec(g.op("Mul", self.n_obs, widest), d_qk)), g.unsqueeze(slots, 1), key)
        keys = g.op("Gather", g.op("Reshape", keys, g.vec(self.n_obs, widest, d_qk)), actor_rows)  # [A, E_max, d_qk]
        logits = g.op("MatMul", g.unsqueeze(query, 1), g.op("Transpose", keys, perm=[0, 2, 1]))  # [A, 1, E_max]
        logits = g.op("Mul", g.op("Squeeze", logits, g.const([1], np.int64)),
                      g.const(np.float32(1.0 / math.sqrt(head.d_qk))))  # [A, E_max]
        counts = g.op("Gather", actee_lengths, actor_rows)  # [A]
        in_range = g.op("Less", g.unsqueeze(g.arange(widest), 0), g.unsqueeze(counts, 1))  # [A, E_max]
        where = g.op("Transpose", g.op("NonZero", g.op("Reshape", in_range, g.const([-1], np.int64))))  # [P, 1]
        n_cells = g.vec(g.op("Mul", g.dim(actor_x, 0), widest))
        allowed = g.op("ScatterND", g.zeros(n_cells, np.bool_), where, inputs["actee_mask"])
        allowed = g.op("Reshape", allowed, g.op("Shape", logits))
        return logits, allowed, in_range
