"""The in-process backend: a transformers model (+ PEFT LoRA) behind the TokenModel interface.

Generation runs in a worker thread so the event loop keeps serving tool calls. The fast path:
`hf_batch_engine.py` (continuous batching: concurrent `generate` calls from many episodes share
decoding steps) over `hf_fast_decoder.py` (a decode-only forward with a slot KV cache), sampling
with `hf_sampler.py`. The fallback, for architectures the fast decoder does not cover:
`hf_generate_fallback.py` (transformers' own `generate`, one request at a time). The trainer uses
`.model` (the torch module, PEFT-wrapped once a LoRA is attached) and `.tokenizer` directly.

Do not run an optimizer step while a `generate` call is in flight: the engine snapshots the
weights (merging the active LoRA) when it admits a request and notices any change to the adapter
(new values, another adapter, adapter disabled) before admitting the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
import warnings
from collections.abc import Hashable, Iterator
from pathlib import Path
from typing import Any

import torch

from mcp_rl.errors import ModelError
from mcp_rl.models.base import Completion, GenerationEngine, Message, SamplingParams
from mcp_rl.models.hardware import best_dtype, configure_threads, default_device
from mcp_rl.models.hf_fast_decoder import FastDecoder, unsupported_reason, unwrap

TOOLS_PREAMBLE = (
    "# Tools\n\nYou can call the tools listed below. To call one, reply with only a JSON object of the form "
    '{"name": <tool name>, "arguments": {<argument name>: <value>, ...}}. '
    "The result comes back in the next message. When you have the answer, reply in plain text.\n\n"
    "Available tools:\n"
)
_PROBE_TOOL = "zz_mcp_rl_probe_tool"


def _text_content(content: Any) -> str:
    """OpenAI content may be None, a string, or a list of parts; templates want a string."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def kv_context_limit(model: torch.nn.Module, slots: int, wanted: int, share: float = 0.25) -> int:
    """The context length the KV cache can give every slot within `share` of the device memory
    (all slots grow together), at least 2048 tokens."""
    cfg = unwrap(model).config
    dev = unwrap(model).get_input_embeddings().weight.device
    heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    elem = unwrap(model).get_input_embeddings().weight.element_size()
    per_token = cfg.num_hidden_layers * heads * head_dim * (4 + elem)  # fp32 keys, model-dtype values
    if dev.type == "cuda":
        total = torch.cuda.mem_get_info(dev)[1]
    else:
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            total = 16 << 30
    fits = int(share * total / (per_token * slots))
    return max(min(wanted, fits), min(wanted, 2048))


class TransformersModel:
    """TokenModel over a transformers causal LM. See module docstring for the threading contract."""

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        *,
        name: str,
        max_batch: int = 32,
        max_context: int | None = None,
        fast: bool | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.tokenizer = tokenizer
        tokenizer.padding_side = "left"
        self.eos_token_id: int = int(tokenizer.eos_token_id)
        pad = tokenizer.pad_token_id
        self.pad_token_id: int = int(pad if pad is not None else self.eos_token_id)
        self.stop_token_ids: set[int] = self._stop_ids()
        cfg_ctx = int(getattr(unwrap(model).config, "max_position_embeddings", 8192) or 8192)
        self.max_context = min(max_context or 8192, cfg_ctx)
        self.max_batch = max_batch
        self.template_has_tools = self._probe_tools()
        reason = unsupported_reason(model)
        if fast and reason:
            raise ModelError(f"the fast generation path cannot run {name}: {reason}")
        self.fast = reason is None if fast is None else fast
        self.fallback_reason = reason
        if self.fast:  # the KV cache must fit in memory for every slot at once
            self.max_context = kv_context_limit(model, max_batch, self.max_context)
        self._lock = threading.RLock()
        self._engine: GenerationEngine | None = None
        self._epoch = 0
        self._adapter_counter = 0
        self._lora_params: list[torch.nn.Parameter] = []
        self._lora_modules: list[torch.nn.Module] = []
        if self.has_lora:  # handed an already PEFT-wrapped model
            self._after_adapter_change()

    # ---- loading ----------------------------------------------------------------------------
    @classmethod
    def from_pretrained(
        cls,
        path: str | os.PathLike[str],
        *,
        name: str | None = None,
        dtype: torch.dtype | None = None,
        device: str | torch.device | None = None,
        local_files_only: bool = True,
        threads: int | None = None,
        **opts: Any,
    ) -> TransformersModel:
        """Load a transformers model directory (or hub id when `local_files_only=False`)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        configure_threads(threads)
        if isinstance(dtype, str):
            dtype = getattr(torch, dtype)
        dev = torch.device(device) if device is not None else default_device()
        dt = dtype or best_dtype(dev)
        tok = AutoTokenizer.from_pretrained(str(path), local_files_only=local_files_only)
        lm = AutoModelForCausalLM.from_pretrained(str(path), dtype=dt, local_files_only=local_files_only)
        lm.to(dev)
        lm.eval()
        return cls(lm, tok, name=name or Path(str(path)).name, **opts)

    def _stop_ids(self) -> set[int]:
        ids = {self.eos_token_id}
        gen = getattr(unwrap(self.model), "generation_config", None)
        eos = getattr(gen, "eos_token_id", None)
        if isinstance(eos, int):
            ids.add(eos)
        elif isinstance(eos, list | tuple):
            ids.update(int(e) for e in eos)
        return ids

    def _probe_tools(self) -> bool:
        tool = {"type": "function", "function": {"name": _PROBE_TOOL, "description": "", "parameters": {}}}
        try:
            text = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": "hi"}], tools=[tool], tokenize=False, add_generation_prompt=True
            )
        except Exception:
            return False
        return _PROBE_TOOL in text

    # ---- text <-> ids -----------------------------------------------------------------------
    def render(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        add_generation_prompt: bool = True,
    ) -> str:
        """The chat template applied to `messages`. When the template ignores `tools` (SmolLM2),
        the tools and the JSON calling convention are described in the system message instead,
        and assistant `tool_calls` are written into the content as the same JSON objects."""
        msgs = [dict(m, content=_text_content(m.get("content"))) for m in messages]
        if tools and not self.template_has_tools:
            msgs = self._inline_tools(msgs, tools)
            tools = None
        try:
            return self.tokenizer.apply_chat_template(
                msgs, tools=tools or None, tokenize=False, add_generation_prompt=add_generation_prompt
            )
        except Exception as exc:
            raise ModelError(f"{self.name}: the chat template failed on these messages: {exc}") from exc

    def _inline_tools(self, msgs: list[Message], tools: list[dict[str, Any]]) -> list[Message]:
        listing = TOOLS_PREAMBLE + "\n".join(json.dumps(t.get("function", t)) for t in tools)
        out: list[Message] = []
        for m in msgs:
            if m.get("role") == "assistant" and m.get("tool_calls"):
                calls = []
                for c in m["tool_calls"]:
                    f = c.get("function", c)
                    args = f.get("arguments", {})
                    if isinstance(args, str):
                        with contextlib.suppress(ValueError):
                            args = json.loads(args)
                    calls.append(json.dumps({"name": f.get("name"), "arguments": args}))
                text = "\n".join(([m["content"]] if m["content"] else []) + calls)
                m = {k: v for k, v in m.items() if k != "tool_calls"} | {"content": text}
            out.append(m)
        if out and out[0].get("role") == "system":
            out[0] = dict(out[0], content=f"{out[0]['content']}\n\n{listing}".strip())
        else:
            out.insert(0, {"role": "system", "content": listing})
        return out

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def completion_text(self, token_ids: list[int]) -> str:
        """The text of a sample: its tokens without the final stop token."""
        if token_ids and token_ids[-1] in self.stop_token_ids:
            token_ids = token_ids[:-1]
        return self.decode(token_ids)

    # ---- generation -------------------------------------------------------------------------
    def _get_engine(self) -> GenerationEngine:
        engine = self._engine
        if (
            engine is not None
        ):  # no lock: the engine holds it during each step, and this runs on the event loop
            return engine
        with self._lock:
            if self._engine is None:
                if self.fast:
                    from mcp_rl.models.hf_batch_engine import BatchEngine

                    decoder = FastDecoder(self.model, slots=self.max_batch, max_context=self.max_context)
                    self._engine = BatchEngine(decoder, self.stop_token_ids, self._weights_key, self._lock)
                else:
                    from mcp_rl.models.hf_generate_fallback import GenerateEngine

                    self._engine = GenerateEngine(
                        self.model, self.stop_token_ids, self.pad_token_id, self._lock
                    )
            return self._engine

    async def generate(
        self, prompt_ids: list[int], n: int = 1, sampling: SamplingParams | None = None
    ) -> list[Completion]:
        """Sample n completions of `prompt_ids`. Each Completion's token_ids end with the stop token
        when one was produced; logprobs are sampling log-probs (see hf_sampler.py)."""
        sampling = sampling or SamplingParams()
        prompt_ids = list(prompt_ids)
        vocab = self.base_model.get_input_embeddings().weight.shape[0]
        if prompt_ids and not (min(prompt_ids) >= 0 and max(prompt_ids) < vocab):
            raise ModelError(f"{self.name}: prompt holds token ids outside the vocabulary (0..{vocab - 1})")
        engine = self._get_engine()
        try:
            fut, req = engine.submit(prompt_ids, n, sampling)
        except ValueError as exc:
            raise ModelError(
                f"{self.name}: cannot generate: {exc}",
                hint="shorten the conversation (tool results are the usual culprit) or raise max_context / max_batch",
            ) from exc
        try:
            samples = await asyncio.wrap_future(fut)
        except asyncio.CancelledError:
            engine.cancel(req)
            raise
        except Exception as exc:
            raise ModelError(f"{self.name}: generation failed: {type(exc).__name__}: {exc}") from exc
        return [
            Completion(
                text=self.completion_text(s.token_ids),
                token_ids=s.token_ids,
                logprobs=s.logprobs,
                finish_reason=s.finish_reason,  # type: ignore[arg-type]
            )
            for s in samples
        ]

    async def chat(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        n: int = 1,
        sampling: SamplingParams | None = None,
    ) -> list[Completion]:
        prompt = self.encode(self.render(messages, tools, add_generation_prompt=True))
        return await self.generate(prompt, n=n, sampling=sampling)

    def close(self) -> None:
        """Stop the generation worker (pending calls fail). The model stays usable: the next
        `generate` starts a new worker."""
        with self._lock:
            engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()

    def __del__(self) -> None:
        engine = getattr(self, "_engine", None)
        if engine is not None:
            engine.close(wait=False)

    # ---- LoRA -------------------------------------------------------------------------------
    @property
    def base_model(self) -> torch.nn.Module:
        return unwrap(self.model)

    @property
    def has_lora(self) -> bool:
        return hasattr(self.model, "peft_config")

    def _weights_key(self) -> Hashable:
        if not self.has_lora:
            return (self._epoch,)
        disabled = any(getattr(m, "disable_adapters", False) for m in self._lora_modules[:1])
        version = sum(p._version for p in self._lora_params)
        return (self._epoch, tuple(self.model.active_adapters), disabled, version)

    def _after_adapter_change(self) -> None:
        from peft.tuners.lora import LoraLayer

        self._epoch += 1
        self._lora_params = [p for n, p in self.model.named_parameters() if "lora_" in n]
        self._lora_modules = [m for m in self.model.modules() if isinstance(m, LoraLayer)]

    def attach_lora(
        self,
        r: int = 16,
        alpha: int = 32,
        target_modules: str | list[str] = "all-linear",
        dropout: float = 0.0,
    ) -> None:
        """Wrap the model with a fresh trainable LoRA (B = 0, so outputs are unchanged)."""
        from peft import LoraConfig, get_peft_model

        if self.has_lora:
            raise ModelError(
                f"{self.name} already has a LoRA attached", hint="use load_adapter() to swap adapters"
            )
        config = LoraConfig(
            r=r, lora_alpha=alpha, target_modules=target_modules, lora_dropout=dropout, task_type="CAUSAL_LM"
        )
        with self._lock, _peft_quietly():
            self.model = get_peft_model(self.model, config)
            self._after_adapter_change()

    def save_adapter(self, directory: str | os.PathLike[str]) -> Path:
        """Save the active adapter as a standard PEFT adapter directory."""
        if not self.has_lora:
            raise ModelError(
                f"{self.name} has no LoRA to save", hint="call attach_lora() or load_adapter() first"
            )
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        with self._lock:
            self.model.save_pretrained(str(out), selected_adapters=[self.model.active_adapter])
        # PEFT writes a non-default adapter into a subfolder named after it; flatten that.
        sub = out / self.model.active_adapter
        if self.model.active_adapter != "default" and sub.is_dir():
            for f in sub.iterdir():
                os.replace(f, out / f.name)
            sub.rmdir()
        return out

    def load_adapter(self, directory: str | os.PathLike[str]) -> None:
        """Load a saved PEFT adapter, replacing the active one, without reloading the base model.
        When the adapter has the same shape as the current one its values are copied in place
        (an optimizer holding the parameters stays valid); otherwise it replaces the old one."""
        from peft import PeftConfig, PeftModel, set_peft_model_state_dict
        from peft.utils import load_peft_weights

        path = Path(directory)
        if not (path / "adapter_config.json").is_file():
            raise ModelError(f"{path} is not a PEFT adapter directory (no adapter_config.json)")
        new_cfg = PeftConfig.from_pretrained(str(path))
        with self._lock:
            if not self.has_lora:
                with _peft_quietly():
                    self.model = PeftModel.from_pretrained(self.model, str(path), is_trainable=True)
            else:
                active = self.model.active_adapter
                cur = self.model.peft_config[active]
                weights = load_peft_weights(str(path), device=str(self.base_model.device))
                current = [n for n, _ in self.model.named_parameters() if "lora_" in n and f".{active}." in n]
                same = (
                    getattr(new_cfg, "r", None) == cur.r
                    and getattr(new_cfg, "lora_alpha", None) == cur.lora_alpha
                    and len(weights) == len(current)
                )
                if same:
                    result = set_peft_model_state_dict(self.model, weights, adapter_name=active)
                    same = not result.unexpected_keys
                if not same:
                    self._adapter_counter += 1
                    name = f"adapter{self._adapter_counter}"
                    self.model.load_adapter(str(path), adapter_name=name, is_trainable=True)
                    self.model.set_adapter(name)
                    self.model.delete_adapter(active)
            self._after_adapter_change()

    @contextlib.contextmanager
    def adapter_disabled(self) -> Iterator[None]:
        """Run the base model (no LoRA) inside the block: forward passes and generation alike."""
        if not self.has_lora:
            yield
            return
        with self._lock:
            ctx = self.model.disable_adapter()
            ctx.__enter__()
        try:
            yield
        finally:
            with self._lock:
                ctx.__exit__(None, None, None)

    def refresh(self) -> None:
        """Force generation to re-read the weights (only needed after changing base weights by hand)."""
        with self._lock:
            self._epoch += 1


@contextlib.contextmanager
def _peft_quietly() -> Iterator[None]:
    """PEFT reads `model.is_gradient_checkpointing`, which transformers 5 deprecates with a
    FutureWarning on every wrap: noise in every user's terminal that they can do nothing about."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        yield
