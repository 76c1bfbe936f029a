"""The Needle 2 forward pass in PyTorch (f32 semantics of /work/shared/spec/MODEL.md), loaded
from a `needle dequant` folder, with optional QAT fake quantization (quant.py).

Shapes: B batch, T positions, n lanes, d d_model, H / KV query / kv heads, hd head_dim, V vocab.
Weight matrices are [out, in] as in the .cact, so a projection is `x @ W.T`.
"""
import json
import math
import os

import numpy as np
import torch

from . import quant, safetensors_io

_ENGRAM_SEED = 0x9E3779B9
_ENGRAM_PRIME = 0x01000193
_MASK32 = 0xFFFFFFFF
_SINKHORN_ROUNDS = 20
_EPS = 1e-6


class Geometry:
    """The model header fields the forward pass needs (config.json "geometry")."""

    def __init__(self, fields):
        self.vocab = int(fields["vocab"])
        self.d_model = int(fields["d_model"])
        self.num_heads = int(fields["num_heads"])
        self.num_kv_heads = int(fields["num_kv_heads"])
        self.num_layers = int(fields["num_layers"])
        self.head_dim = int(fields["head_dim"])
        self.hada_n = int(fields["hada_n"])
        self.lanes = int(fields["mhc_lanes"])
        self.rope_theta = float(fields["rope_theta"])
        self.kv_window = int(fields["kv_window"])
        self.engram_slots = int(fields["engram_slots"])
        self.engram_sub_dim = int(fields["engram_sub_dim"])
        self.engram_tables = int(fields["num_engram_tables"])
        self.engram_taps = int(fields["engram_conv_taps"])
        self.engram_dilation = int(fields["engram_conv_dilation"])
        self.engram_orders = [int(o) for o in fields["engram_orders"] if int(o) > 0]
        self.engram_sites = [int(s) for s in fields["engram_sites"]]
        if self.engram_tables and self.engram_tables % max(1, len(self.engram_orders)):
            raise ValueError(f"{self.engram_tables} engram tables for orders {self.engram_orders}")
        self.engram_heads = self.engram_tables // max(1, len(self.engram_orders))
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"{self.num_heads} heads do not share {self.num_kv_heads} kv heads")


def _param_key(name):
    return name.replace(".", "__")  # ParameterDict keys cannot hold dots


def _zcn(x, scale):
    """(1 + scale) * x / rms(x) over the last axis."""
    return (1.0 + scale) * x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + _EPS)


def _rms_unit(x):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + _EPS)


class NeedleModel(torch.nn.Module):
    """Every tensor of the dequant folder is a parameter under its canonical name (dots kept in
    `names`); `forward(ids)` gives logits. QAT: `set_qat(weights=True, activations=True)`."""

    def __init__(self, geometry, tensors, tensor_info, codebooks):
        super().__init__()
        self.geometry = geometry
        self.names = list(tensors)
        self.params = torch.nn.ParameterDict(
            {_param_key(n): torch.nn.Parameter(torch.as_tensor(a, dtype=torch.float32))
             for n, a in tensors.items()})
        self.tensor_info = tensor_info  # name -> config.json tensor entry (dtype, bits, group)
        self.codebooks = codebooks      # bits -> levels for group 128
        self.qat_weights = False
        self.qat_activations = False
        self._forward_state = {}  # tensors one forward shares between its parts (not state)
        g = geometry
        lane = torch.arange(g.num_layers) % g.lanes
        onehot = torch.nn.functional.one_hot(lane, g.lanes).float()  # [L, n]
        self.register_buffer("pre_offset", 8.0 * onehot - 4.0, persistent=False)
        self.register_buffer("post_offset", -4.0 * (1.0 - onehot), persistent=False)
        self.register_buffer("hada", quant.hadamard(g.hada_n), persistent=False)

    def set_qat(self, weights, activations):
        self.qat_weights, self.qat_activations = bool(weights), bool(activations)

    def parameter(self, name):
        return self.params[_param_key(name)]

    def weight(self, name, rows=None):
        """The tensor as the forward pass uses it: CQ-fake-quantized under QAT when the .cact
        stores it as CQ (same bits and group), else as is. `rows` (an index tensor): only those
        rows, quantized after the gather, which is exact since CQ groups never span rows (and
        much cheaper for the engram tables)."""
        value = self.parameter(name)
        if rows is not None:
            value = value[rows]
        info = self.tensor_info.get(name)
        if self.qat_weights and info is not None and info["dtype"] == "CQ":
            group = int(info["group"])
            book = self.codebooks[int(info["bits"])] * math.sqrt(128.0 / group)
            return quant.cq_fake_quant(value, book, group)
        return value

    def _act(self, x):
        return quant.act_fake_quant(x) if self.qat_activations else x

    def _shift(self, x, steps):
        """x [B, T, ...] moved `steps` positions later along each sequence (zeros before the
        start); with a packed layout (hidden's `layout`) along each position's own chain of
        predecessors (a packed turn continues its prefix, not the turn packed before it)."""
        layout = self._forward_state.get("layout")
        if steps == 0:
            return x
        if layout is None:
            pad = [0, 0] * (x.dim() - 2) + [steps, 0]
            return torch.nn.functional.pad(x, pad)[:, :x.shape[1]]
        back = layout["back"][steps - 1]  # [B, T], -1: none
        index = back.clamp_min(0)
        if x.dim() == 2:
            return torch.where(back >= 0, torch.gather(x, 1, index), torch.zeros_like(x))
        index = index.unsqueeze(-1).expand(-1, -1, x.shape[-1])
        return torch.gather(x, 1, index) * (back >= 0).unsqueeze(-1).to(x.dtype)

    # --- engram -----------------------------------------------------------------------------
    def _engram_rows(self, ids):
        """Table rows for every position and table: [B, T, tables * sub_dim], zero where the
        n-gram reaches before the sequence start."""
        g = self.geometry
        batch, length = ids.shape
        tokens = ids.to(torch.int64)
        shifted = [tokens]
        for j in range(1, max(g.engram_orders)):
            shifted.append(self._shift(tokens, j))
        layout = self._forward_state.get("layout")
        positions = (layout["positions"] if layout is not None
                     else torch.arange(length, device=ids.device))
        slots, valid = [], []
        for order_index, order in enumerate(g.engram_orders):
            for head in range(g.engram_heads):
                table = order_index * g.engram_heads + head
                acc = torch.full_like(tokens, (_ENGRAM_SEED * (table + 1)) & _MASK32)
                for j in range(order):
                    acc = ((acc ^ shifted[j]) * _ENGRAM_PRIME) & _MASK32
                acc = acc ^ (acc >> 15)
                slots.append(table * g.engram_slots + acc % g.engram_slots)
                valid.append((positions >= order - 1).expand(batch, length))
        return torch.stack(slots, -1), torch.stack(valid, -1)  # [B, T, tables] each

    def _engram(self, site, ids):
        """(kk, v) of one engram site: [B, T, d] each."""
        g = self.geometry
        slot_index, valid = self._engram_rows(ids)
        # tables: [tables * slots, sub_dim]; rows: [B, T, tables, sub_dim]
        rows = self.weight(f"engram{site}.tables", rows=slot_index)
        rows = rows * valid.unsqueeze(-1).to(rows.dtype)
        e = self._act(rows.reshape(*ids.shape, g.engram_tables * g.engram_sub_dim))
        key = e @ self.weight(f"engram{site}.key_proj").T
        value_raw = e @ self.weight(f"engram{site}.value_proj").T
        taps = self.parameter(f"engram{site}.taps")  # [K, d]
        length = ids.shape[1]
        value = torch.zeros_like(value_raw)
        for j in range(g.engram_taps):
            shift = j * g.engram_dilation
            if shift >= length:
                break
            value = value + taps[j] * self._shift(value_raw, shift)
        return key, value

    # --- attention block --------------------------------------------------------------------
    def _rope(self, length, device, positions=None):
        """cos, sin: [T, 1, hd/2], or [B, T, 1, hd/2] for per-sequence `positions` [B, T]."""
        g = self.geometry
        half = g.head_dim // 2
        exponent = torch.arange(half, dtype=torch.float32, device=device) * 2.0 / g.head_dim
        freq = 1.0 / torch.pow(torch.tensor(g.rope_theta, dtype=torch.float32), exponent)
        if positions is None:
            positions = torch.arange(length, device=device)
        angle = positions.to(torch.float32)[..., None] * freq
        return torch.cos(angle).unsqueeze(-2), torch.sin(angle).unsqueeze(-2)

    @staticmethod
    def _apply_rope(x, cos, sin):
        half = x.shape[-1] // 2
        first, second = x[..., :half], x[..., half:]
        return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)

    def _block(self, layer, x, mask, rope):
        g = self.geometry
        p = f"layer{layer:02d}."
        batch, length, _ = x.shape
        h = self._act(_zcn(x, self.parameter(p + "norm_in")))
        q = (h @ self.weight(p + "q_proj").T).view(batch, length, g.num_heads, g.head_dim)
        k = (h @ self.weight(p + "k_proj").T).view(batch, length, g.num_kv_heads, g.head_dim)
        v = (h @ self.weight(p + "v_proj").T).view(batch, length, g.num_kv_heads, g.head_dim)
        cos, sin = rope
        q = self._apply_rope(_zcn(q, self.parameter(p + "q_norm")), cos, sin).transpose(1, 2)
        k = self._apply_rope(_zcn(k, self.parameter(p + "k_norm")), cos, sin).transpose(1, 2)
        v = v.transpose(1, 2)
        share = g.num_heads // g.num_kv_heads  # consecutive query heads share a kv head
        k = k.repeat_interleave(share, dim=1)
        v = v.repeat_interleave(share, dim=1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(g.head_dim)  # [B, H, T, T]
        scores = scores.masked_fill(~(mask if mask.dim() == 2 else mask[:, None]), float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v  # [B, H, T, hd]
        out = out.transpose(1, 2).reshape(batch, length, g.num_heads * g.head_dim)
        out = self._act(out * torch.sigmoid(h @ self.weight(p + "gate_proj").T))
        attn = _zcn(out @ self.weight(p + "out_proj").T, self.parameter(p + "post_norm"))
        x = x + torch.sigmoid(self.parameter(p + "attn_gate")) * attn
        z = _zcn(x, self.parameter(p + "pre_hada"))
        if g.hada_n > g.d_model:
            z = torch.nn.functional.pad(z, (0, g.hada_n - g.d_model))
        z = (self.parameter(p + "d1") * z) @ self.hada
        z = torch.nn.functional.silu(self.parameter(p + "d2") * z) @ self.hada
        return x + (self.parameter(p + "d3") * z)[..., :g.d_model]

    # --- the whole network ------------------------------------------------------------------
    def visibility(self, length, window=0, sink_len=0, device=None):
        """[T, T] bool, query row sees key column: causal; with window W > 0 only keys with
        q - k < W or k < sink_len."""
        positions = torch.arange(length, device=device)
        distance = positions[:, None] - positions[None, :]
        mask = distance >= 0
        if window > 0:
            mask &= (distance < window) | (positions[None, :] < sink_len)
        return mask

    def hidden(self, ids, window=0, sink_len=0, layout=None):
        """Final normalized state xf: [B, T, d] (before the tied output head).
        layout (training only, packed sequences): {"positions": [B, T] RoPE positions,
        "mask": [B, T, T] bool (query row sees key column), "back": [[B, T]] for 1, 2, ...
        steps, the index of the token that many steps earlier in the position's own sequence
        or -1} (window and sink_len are then unused)."""
        g = self.geometry
        n, d, length = g.lanes, g.d_model, ids.shape[1]
        embedding = self.weight("embedding")  # [V, d]
        self._forward_state["embedding"] = embedding  # logits_of reuses it: one quantization
        self._forward_state["layout"] = layout
        x0 = embedding[ids] * math.sqrt(d)
        lanes = x0.unsqueeze(2).expand(-1, -1, n, -1)  # [B, T, n, d]
        if layout is None:
            mask = self.visibility(length, window, sink_len, ids.device)
            rope = self._rope(length, ids.device)
        else:
            mask = layout["mask"]
            rope = self._rope(length, ids.device, layout["positions"])
        engram = {layer: self._engram(site, ids) for site, layer in enumerate(g.engram_sites)}
        phi_pre = self.weight("mhc_phi_pre")    # [L * n, n * d]
        phi_post = self.weight("mhc_phi_post")  # [L * n, n * d]
        phi_res = self.weight("mhc_phi_res")    # [L * n * n, n * d]
        a_pre, a_post, a_res = (self.parameter("mhc_a_pre"), self.parameter("mhc_a_post"),
                                self.parameter("mhc_a_res"))
        b_pre, b_post, b_res = (self.parameter("mhc_b_pre"), self.parameter("mhc_b_post"),
                                self.parameter("mhc_b_res"))
        for i in range(g.num_layers):
            nx = _rms_unit(lanes.reshape(*ids.shape, n * d))
            h_pre = torch.sigmoid(a_pre[i] * (nx @ phi_pre[i * n:(i + 1) * n].T)
                                  + b_pre[i] + self.pre_offset[i])  # [B, T, n]
            u = torch.einsum("btn,btnd->btd", h_pre, lanes)
            block_in = u
            if i in engram:
                key, value = engram[i]
                alpha = torch.sigmoid((_rms_unit(u) * _rms_unit(key)).sum(-1, keepdim=True)
                                      / math.sqrt(d))
                block_in = u + alpha * value
            y = self._block(i, block_in, mask, rope) - u
            h_post = 2.0 * torch.sigmoid(a_post[i] * (nx @ phi_post[i * n:(i + 1) * n].T)
                                         + b_post[i] + self.post_offset[i])
            mix = (a_res[i] * (nx @ phi_res[i * n * n:(i + 1) * n * n].T)
                   ).reshape(*ids.shape, n, n) + b_res[i]
            for _ in range(_SINKHORN_ROUNDS):
                mix = mix - torch.logsumexp(mix, dim=-1, keepdim=True)
                mix = mix - torch.logsumexp(mix, dim=-2, keepdim=True)
            lanes = (torch.einsum("btij,btjd->btid", torch.exp(mix), lanes)
                     + h_post.unsqueeze(-1) * y.unsqueeze(2))
        return _zcn(lanes.mean(dim=2), self.parameter("final_norm"))

    def logits_of(self, hidden):
        """Tied output head: [..., d] -> [..., V] (call after hidden(), which sets the
        embedding this forward uses)."""
        return self._act(hidden) @ self._forward_state["embedding"].T

    def forward(self, ids, window=0, sink_len=0):
        """ids [B, T] int64 -> logits [B, T, V] (f32 reference semantics unless QAT is on)."""
        return self.logits_of(self.hidden(ids, window, sink_len))

    # --- export -----------------------------------------------------------------------------
    def state_arrays(self):
        """name -> float32 numpy array, in the dequant folder's order."""
        return {n: self.parameter(n).detach().cpu().numpy().astype(np.float32)
                for n in self.names}


def load_dequant(folder):
    """Builds a NeedleModel from OUT_DIR of `needle dequant MODEL.cact OUT_DIR`."""
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as handle:
        config = json.load(handle)
    weights_file = os.path.join(folder, config["weights"]["file"])
    tensors, _ = safetensors_io.read(weights_file)
    info = {t["name"]: t for t in config["tensors"]}
    for name in tensors:
        if name not in info:
            raise ValueError(f"{weights_file}: tensor '{name}' is not listed in config.json")
    return NeedleModel(Geometry(config["geometry"]), tensors, info,
                       quant.split_codebooks(config["codebooks"]))
