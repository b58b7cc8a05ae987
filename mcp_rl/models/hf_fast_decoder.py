"""A decode-only forward pass for Llama-family models (Qwen2, Llama, SmolLM) with a slot KV cache.

Why not the transformers forward: on a 2-core CPU a decoding step of the 0.5B model is ~30 ms of
matrix work, and the generic forward adds several times that in per-step overhead (cache objects
that grow by concatenation, mask construction, an attention kernel that is slow for one query).
This module keeps what generation needs and nothing else:

- weights are read from the live (possibly PEFT-wrapped) module and fused per layer
  (q|k|v and gate|up), with the active LoRA merged in fp32 and rounded once; they are rebuilt when
  the adapter changes, so generation always samples from the current policy;
- a preallocated KV cache of `slots` rows: each row is one sequence at its own length, so rows can
  join and leave between steps (continuous batching) and a prompt's cache can be copied to the
  rows of a group instead of being recomputed;
- attention written as two batched matmuls over grouped KV heads.

Only the logits of the last position are computed. Training never uses this path: the trainer runs
the ordinary module forward, so gradients flow through PEFT as usual.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

SUPPORTED_TYPES = ("qwen2", "llama")
_STATIC_ROPE = ("default", "linear", "llama3", None)


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers CausalLM inside a PEFT wrapper (or the model itself)."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def unsupported_reason(model: torch.nn.Module) -> str | None:
    """Why the fast path cannot run this model, or None when it can."""
    lm = unwrap(model)
    cfg = lm.config
    if cfg.model_type not in SUPPORTED_TYPES:
        return f"model type {cfg.model_type!r} (fast path supports {', '.join(SUPPORTED_TYPES)})"
    if getattr(cfg, "hidden_act", "silu") != "silu":
        return f"activation {cfg.hidden_act!r}"
    if getattr(cfg, "use_sliding_window", False):
        return "sliding-window attention"
    if getattr(cfg, "mlp_bias", False):
        return "MLP biases"
    rope = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
    if rope.get("rope_type", rope.get("type")) not in _STATIC_ROPE:
        return f"rope type {rope.get('rope_type')!r}"
    from peft.tuners.lora import LoraLayer

    if isinstance(lm.get_input_embeddings(), LoraLayer):
        return "LoRA on the embeddings"
    for mod in lm.modules():
        if isinstance(mod, LoraLayer):
            variants = getattr(mod, "lora_variant", {}) or {}
            dora = getattr(mod, "use_dora", {}) or {}
            if any(variants.values()) or any(dora.values()):
                return "a LoRA variant (DoRA etc.)"
    return None


def _effective_linear(mod: torch.nn.Module, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Weight and bias of a linear layer as the current forward would apply them: the base weight
    plus the active LoRA deltas (computed in fp32, rounded once)."""
    from peft.tuners.lora import LoraLayer

    if not isinstance(mod, LoraLayer):
        return mod.weight.detach(), (mod.bias.detach() if mod.bias is not None else None)
    base = mod.get_base_layer()
    weight, bias = base.weight.detach(), (base.bias.detach() if base.bias is not None else None)
    if mod.disable_adapters or mod.merged:
        return weight, bias
    delta: torch.Tensor | None = None
    bias_delta: torch.Tensor | None = None
    for name in mod.active_adapters:
        if name not in mod.lora_A:
            continue
        a, b = mod.lora_A[name], mod.lora_B[name]
        scale = mod.scaling[name]
        d = (b.weight.detach().float() @ a.weight.detach().float()) * scale
        delta = d if delta is None else delta + d
        if getattr(b, "bias", None) is not None:
            bd = b.bias.detach().float() * scale
            bias_delta = bd if bias_delta is None else bias_delta + bd
    if delta is not None:
        weight = (weight.float() + delta).to(dtype)
    if bias_delta is not None:
        bias = (bias.float() + bias_delta).to(dtype) if bias is not None else bias_delta.to(dtype)
    return weight, bias


def _cat_bias(biases: list[torch.Tensor | None], weights: list[torch.Tensor]) -> torch.Tensor | None:
    if all(b is None for b in biases):
        return None
    return torch.cat(
        [b if b is not None else w.new_zeros(w.shape[0]) for b, w in zip(biases, weights, strict=True)]
    )


def _share_rows(mods: list[torch.nn.Module], fused: torch.Tensor) -> None:
    """Point adapter-free linear layers at their rows of the fused weight, so the model holds those
    weights once: the module forward then reads the same numbers from the same memory. A layer with a
    LoRA keeps its own base weight (the fused one has the adapter merged in).

    Why: fusing copied q|k|v and gate|up, about 40% of a model's weights. Measured (2026-12-05, 2 cores,
    fp32 as on a CPU without fast bf16): the 1.5B task writer held 11.7 GB resident inside `mcp-rl
    generate`, and two generations at once were killed for memory on this 24 GB machine."""
    from peft.tuners.lora import LoraLayer

    if any(isinstance(m, LoraLayer) or m.weight.dtype != fused.dtype for m in mods):
        return
    start = 0
    for m in mods:
        rows = m.weight.shape[0]
        m.weight.data = fused[start : start + rows]
        start += rows


@dataclass
class _Layer:
    ln1: torch.Tensor
    ln2: torch.Tensor
    w_qkv: torch.Tensor
    b_qkv: torch.Tensor | None
    w_o: torch.Tensor
    b_o: torch.Tensor | None
    w_gu: torch.Tensor
    w_down: torch.Tensor


class FastDecoder:
    """Fused weights + a slot KV cache + prefill/decode steps. Not thread-safe: one engine thread."""

    def __init__(
        self, model: torch.nn.Module, slots: int, max_context: int, initial_capacity: int = 512
    ) -> None:
        reason = unsupported_reason(model)
        if reason:
            raise ValueError(f"fast path unavailable: {reason}")
        self.model = model
        lm = unwrap(model)
        cfg = lm.config
        self.n_heads = cfg.num_attention_heads
        self.n_kv = getattr(cfg, "num_key_value_heads", None) or self.n_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.n_heads
        self.group = self.n_heads // self.n_kv
        self.eps = float(cfg.rms_norm_eps)
        self.n_layers = cfg.num_hidden_layers
        self.slots = slots
        self.max_context = max_context
        emb = lm.get_input_embeddings().weight
        self.device, self.dtype = emb.device, emb.dtype
        self.scaling = self.head_dim**-0.5
        self.capacity = 0
        self.k: list[torch.Tensor] = []
        self.v: list[torch.Tensor] = []
        self.layers: list[_Layer] = []
        self._rope_len = 0
        self.refresh_weights()
        self.ensure_capacity(min(initial_capacity, max_context))

    # ---- weights -------------------------------------------------------------------------
    @torch.no_grad()
    def refresh_weights(self) -> None:
        """(Re)build the fused weights from the module's current parameters and adapter state."""
        lm = unwrap(self.model)
        dt = self.dtype
        layers = []
        for layer in lm.model.layers:
            att, mlp = layer.self_attn, layer.mlp
            qkv = [_effective_linear(m, dt) for m in (att.q_proj, att.k_proj, att.v_proj)]
            w_o, b_o = _effective_linear(att.o_proj, dt)
            gate, _ = _effective_linear(mlp.gate_proj, dt)
            up, _ = _effective_linear(mlp.up_proj, dt)
            down, _ = _effective_linear(mlp.down_proj, dt)
            w_qkv, w_gu = torch.cat([w for w, _ in qkv]), torch.cat([gate, up])
            _share_rows([att.q_proj, att.k_proj, att.v_proj], w_qkv)
            _share_rows([mlp.gate_proj, mlp.up_proj], w_gu)
            layers.append(
                _Layer(
                    ln1=layer.input_layernorm.weight.detach(),
                    ln2=layer.post_attention_layernorm.weight.detach(),
                    w_qkv=w_qkv,
                    b_qkv=_cat_bias([b for _, b in qkv], [w for w, _ in qkv]),
                    w_o=w_o,
                    b_o=b_o,
                    w_gu=w_gu,
                    w_down=down,
                )
            )
        self.layers = layers
        self.embed = lm.get_input_embeddings().weight.detach()
        self.final_norm = lm.model.norm.weight.detach()
        self.lm_head, self.lm_head_bias = _effective_linear(lm.get_output_embeddings(), dt)
        self._rotary = lm.model.rotary_emb

    # ---- cache ---------------------------------------------------------------------------
    def ensure_capacity(self, length: int) -> None:
        """Grow the KV cache (doubling) so every slot can hold `length` positions."""
        if length <= self.capacity:
            return
        if length > self.max_context:
            raise ValueError(f"sequence of {length} tokens exceeds the context limit {self.max_context}")
        new = min(self.max_context, max(length, 2 * self.capacity, 256))
        shape = (self.slots, self.n_kv, new, self.head_dim)
        k_new = [torch.zeros(shape, dtype=torch.float32, device=self.device) for _ in range(self.n_layers)]
        v_new = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(self.n_layers)]
        for i in range(len(self.k)):
            k_new[i][:, :, : self.capacity] = self.k[i]
            v_new[i][:, :, : self.capacity] = self.v[i]
        self.k, self.v, self.capacity = k_new, v_new, new
        self._build_rope(new)

    def _build_rope(self, length: int) -> None:
        if length <= self._rope_len:
            return
        pos = torch.arange(length, device=self.device)[None]
        probe = torch.zeros(1, dtype=self.dtype, device=self.device)
        cos, sin = self._rotary(probe, pos)
        self.cos, self.sin = cos[0], sin[0]  # [L, D] in the model dtype, as transformers applies them
        self._rope_len = length

    @torch.no_grad()
    def copy_prefix(self, src: int, dst: int, length: int) -> None:
        if src == dst or length <= 0:
            return
        for k, v in zip(self.k, self.v, strict=True):
            k[dst, :, :length] = k[src, :, :length]
            v[dst, :, :length] = v[src, :, :length]

    # ---- forward -------------------------------------------------------------------------
    def _rms(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return w * h.to(x.dtype)

    def _rope(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        rot = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rot * sin

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """q [B, Hkv, G*T, D], k/v [B, Hkv, L, D], bias [B, 1, G*T or 1, L] (0 or -inf)."""
        # Scores in fp32: rounding them to bf16 (what a bf16 matmul returns) costs ~0.1 in a logit of
        # 30, which moved log-probs 5x further from fp32 than the transformers forward does. Keys are
        # cached in fp32 for this (exact copies of the bf16 values), values in the model dtype.
        scores = torch.matmul(q.float(), k.transpose(-1, -2)) * self.scaling + bias
        probs = torch.softmax(scores, dim=-1).to(v.dtype)
        return torch.matmul(probs, v)

    @torch.no_grad()
    def prefill(self, slot: int, tokens: list[int], start: int, chunk: int = 512) -> torch.Tensor:
        """Run `tokens` at positions start.. in `slot` (whose cache holds positions < start) and
        return the fp32 logits of the last position. Long inputs go in chunks, which bounds the
        attention scores' memory (a 4k-token prompt at once would need ~1 GB for them)."""
        self.ensure_capacity(start + len(tokens))
        x = None
        for at in range(0, len(tokens), chunk):
            x = self._prefill_chunk(slot, tokens[at : at + chunk], start + at)
        assert x is not None, "prefill needs at least one token"
        last = self._rms(x[:, -1], self.final_norm)
        return F.linear(last, self.lm_head, self.lm_head_bias)[0].float()

    def _prefill_chunk(self, slot: int, tokens: list[int], start: int) -> torch.Tensor:
        t = len(tokens)
        total = start + t
        ids = torch.tensor(tokens, device=self.device)
        x = F.embedding(ids, self.embed)[None]  # [1, T, H]
        cos = self.cos[start:total][None, None]
        sin = self.sin[start:total][None, None]
        # Causal mask with an offset: query i (position start+i) sees keys 0..start+i.
        keys = torch.arange(total, device=self.device)
        allowed = keys[None, :] <= (start + torch.arange(t, device=self.device))[:, None]
        bias = torch.zeros(allowed.shape, dtype=torch.float32, device=self.device)
        bias.masked_fill_(~allowed, float("-inf"))
        bias = bias.repeat(self.group, 1)[None, None]  # rows ordered (group, token)
        hq, hk, d = self.n_heads, self.n_kv, self.head_dim
        for i, ly in enumerate(self.layers):
            h = self._rms(x, ly.ln1)
            qkv = F.linear(h, ly.w_qkv, ly.b_qkv)
            q = qkv[..., : hq * d].view(1, t, hq, d).transpose(1, 2)
            k = qkv[..., hq * d : (hq + hk) * d].view(1, t, hk, d).transpose(1, 2)
            v = qkv[..., (hq + hk) * d :].view(1, t, hk, d).transpose(1, 2)
            q, k = self._rope(q, cos, sin), self._rope(k, cos, sin)
            self.k[i][slot, :, start:total] = k[0]
            self.v[i][slot, :, start:total] = v[0]
            q = q.reshape(1, hk, self.group * t, d)
            o = self._attend(
                q, self.k[i][slot : slot + 1, :, :total], self.v[i][slot : slot + 1, :, :total], bias
            )
            o = o.view(1, hk, self.group, t, d).permute(0, 3, 1, 2, 4).reshape(1, t, hq * d)
            x = x + F.linear(o, ly.w_o, ly.b_o)
            x = x + self._mlp(self._rms(x, ly.ln2), ly)
        return x

    def _mlp(self, h: torch.Tensor, ly: _Layer) -> torch.Tensor:
        gu = F.linear(h, ly.w_gu)
        gate, up = gu.chunk(2, dim=-1)
        return F.linear(F.silu(gate) * up, ly.w_down)

    @torch.no_grad()
    def decode(self, slots: list[int], tokens: list[int], positions: list[int]) -> torch.Tensor:
        """One step for several slots: feed `tokens[b]` at `positions[b]` in `slots[b]`;
        return fp32 logits [B, V]."""
        b = len(slots)
        total = max(positions) + 1
        self.ensure_capacity(total)
        dev = self.device
        pos = torch.tensor(positions, device=dev)
        ids = torch.tensor(tokens, device=dev)
        idx = torch.tensor(slots, device=dev)
        lo = slots[0]
        # Rows in consecutive slots read the cache through a view; others through a gather (a copy).
        rows: slice | torch.Tensor = slice(lo, lo + b) if slots == list(range(lo, lo + b)) else idx
        x = F.embedding(ids, self.embed)[:, None]  # [B, 1, H]
        cos = self.cos[pos][:, None, None]  # [B, 1, 1, D]
        sin = self.sin[pos][:, None, None]
        keys = torch.arange(total, device=dev)
        bias = torch.zeros((b, total), dtype=torch.float32, device=dev)
        bias.masked_fill_(keys[None, :] > pos[:, None], float("-inf"))
        bias = bias[:, None, None]  # [B, 1, 1, L]
        hq, hk, d = self.n_heads, self.n_kv, self.head_dim
        for i, ly in enumerate(self.layers):
            h = self._rms(x, ly.ln1)
            qkv = F.linear(h, ly.w_qkv, ly.b_qkv)  # [B, 1, (hq+2hk)d]
            q = qkv[..., : hq * d].view(b, hq, 1, d)
            k = qkv[..., hq * d : (hq + hk) * d].view(b, hk, 1, d)
            v = qkv[..., (hq + hk) * d :].view(b, hk, 1, d)
            q, k = self._rope(q, cos, sin), self._rope(k, cos, sin)
            kc, vc = self.k[i], self.v[i]
            kc[idx, :, pos] = k[:, :, 0].float()
            vc[idx, :, pos] = v[:, :, 0]
            o = self._attend(q.view(b, hk, self.group, d), kc[rows, :, :total], vc[rows, :, :total], bias)
            x = x + F.linear(o.reshape(b, 1, hq * d), ly.w_o, ly.b_o)
            x = x + self._mlp(self._rms(x, ly.ln2), ly)
        out = self._rms(x[:, 0], self.final_norm)
        return F.linear(out, self.lm_head, self.lm_head_bias).float()
