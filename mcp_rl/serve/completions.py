"""One chat completion: an OpenAI request in, the tuned model's reply out, in the training format.

The model learned on conversations rendered one way (its chat template, the run's system prompt,
its own raw text for the calls it made, `tool` messages for results); this module rebuilds that
form from what an OpenAI client sends, generates, and parses the reply with the same parser
training used (`mcp_rl.toolcalls`), so a call the model makes comes back as `message.tool_calls`.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from mcp_rl.models.base import Completion, Message, SamplingParams
from mcp_rl.serve.openai_types import (
    ChatMessage,
    ChatRequest,
    ChatResponse,
    Choice,
    NamedToolChoice,
    OutMessage,
    OutToolCall,
    Usage,
    new_id,
)
from mcp_rl.toolcalls import parse_message

log = logging.getLogger("mcp_rl.serve")

DEFAULT_MAX_TOKENS = 512
_RAW_CACHE = 4096


class RequestError(Exception):
    """A request we answer with an OpenAI-style error body."""

    def __init__(self, status: int, message: str, *, code: str | None = None, param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param


def _arguments(args: str | dict[str, Any]) -> Any:
    """Chat templates write arguments with `tojson`: give them the object, not its JSON text."""
    if isinstance(args, str):
        try:
            return json.loads(args) if args.strip() else {}
        except ValueError:
            return args
    return args


@dataclass
class Prepared:
    prompt: list[int]
    sampling: SamplingParams
    n: int
    tool_names: list[str]
    id: str = field(default_factory=lambda: new_id("chatcmpl"))
    created: int = field(default_factory=lambda: int(time.time()))


class ServedModel:
    """A local model behind the chat-completions API. Safe for concurrent requests: generation is
    batched by the model's engine in its own thread; everything else here is quick and runs on the
    event loop."""

    def __init__(self, model: Any, name: str, system_prompt: str | None = None) -> None:
        self.model = model
        self.name = name
        self.system_prompt = system_prompt or None
        self.created = int(time.time())
        # The raw text behind each tool call id we issued: when a client sends that assistant turn
        # back, the model sees exactly what it wrote (as in training), not a re-rendered call.
        self._raw: OrderedDict[str, tuple[str, frozenset[str]]] = OrderedDict()

    async def warm_up(self) -> None:
        """One 1-token generation: the first one builds the engine (fusing the weights, merging the
        LoRA: seconds of work in the calling thread), which must not happen on a live event loop."""
        prompt = self.model.encode(self.model.render([{"role": "user", "content": "hi"}], None, True))
        await self.model.generate(prompt, 1, SamplingParams(temperature=0.0, max_new_tokens=1))

    # ---- request -> prompt ------------------------------------------------------------------
    def check(self, req: ChatRequest) -> None:
        if req.model and req.model != self.name:
            raise RequestError(
                404,
                f"the model {req.model!r} does not exist; this server serves {self.name!r}",
                code="model_not_found",
                param="model",
            )
        if req.stream and req.n > 1:
            raise RequestError(400, "stream=true supports n=1 only", param="n")

    def tools_for(self, req: ChatRequest) -> list[dict[str, Any]]:
        tools = [t.model_dump(exclude_none=True) for t in req.tools or []]
        choice = req.tool_choice
        if choice == "none":
            return []
        if isinstance(choice, NamedToolChoice):
            # Best effort: the model sees only the named tool; its reply is not forced.
            wanted = str(choice.function.get("name", ""))
            tools = [t for t in tools if t["function"]["name"] == wanted]
            if not tools:
                raise RequestError(
                    400, f"tool_choice names {wanted!r}, which is not in tools", param="tool_choice"
                )
        elif choice == "required" and not tools:
            raise RequestError(400, "tool_choice 'required' needs at least one tool", param="tool_choice")
        return tools

    def messages_for(self, req: ChatRequest) -> list[Message]:
        out: list[Message] = []
        names: dict[str, str] = {}
        for m in req.messages:
            out.append(self._message(m, names))
        if self.system_prompt and not any(m["role"] == "system" for m in out):
            out.insert(0, {"role": "system", "content": self.system_prompt})
        return out

    def _message(self, m: ChatMessage, names: dict[str, str]) -> Message:
        role = "system" if m.role == "developer" else m.role
        msg: Message = {"role": role, "content": m.content}
        if role == "tool":
            msg["tool_call_id"] = m.tool_call_id or ""
            name = m.name or names.get(m.tool_call_id or "")
            if name:
                msg["name"] = name
        elif role == "assistant" and m.tool_calls:
            for c in m.tool_calls:
                names[c.id] = c.function.name
            raw = self._raw_for([c.id for c in m.tool_calls])
            if raw is not None:
                msg["content"] = raw
            else:
                msg["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": _arguments(c.function.arguments)},
                    }
                    for c in m.tool_calls
                ]
        elif m.name and role == "user":
            msg["name"] = m.name
        return msg

    def _raw_for(self, ids: list[str]) -> str | None:
        found = [self._raw.get(i) for i in ids]
        if not found or any(f is None for f in found):
            return None
        raw, issued = found[0]  # type: ignore[misc]
        return raw if issued == frozenset(ids) and all(f[0] == raw for f in found) else None  # type: ignore[index]

    def _remember(self, raw: str, ids: list[str]) -> None:
        issued = frozenset(ids)
        for i in ids:
            self._raw[i] = (raw, issued)
        while len(self._raw) > _RAW_CACHE:
            self._raw.popitem(last=False)

    # ---- generation -------------------------------------------------------------------------
    def prepare(self, req: ChatRequest) -> Prepared:
        """Everything that can reject a request, done before any reply starts (streams included)."""
        self.check(req)
        tools = self.tools_for(req)
        messages = self.messages_for(req)
        try:
            prompt = self.model.encode(self.model.render(messages, tools or None, add_generation_prompt=True))
        except Exception as exc:  # a template that rejects the conversation (e.g. roles out of order)
            raise RequestError(
                400, f"the chat template rejected these messages: {exc}", param="messages"
            ) from None
        room = int(self.model.max_context) - len(prompt)
        if room < 1:
            raise RequestError(
                400,
                f"the conversation is {len(prompt)} tokens; this model's context is {self.model.max_context}",
                code="context_length_exceeded",
                param="messages",
            )
        wanted = req.max_completion_tokens or req.max_tokens or DEFAULT_MAX_TOKENS
        sampling = SamplingParams(
            temperature=1.0 if req.temperature is None else req.temperature,
            top_p=1.0 if req.top_p is None else req.top_p,
            max_new_tokens=min(wanted, room),
            seed=req.seed,
        )
        return Prepared(
            prompt=prompt, sampling=sampling, n=req.n, tool_names=[t["function"]["name"] for t in tools]
        )

    async def run(self, p: Prepared) -> ChatResponse:
        t0 = time.monotonic()
        samples = await self.model.generate(p.prompt, p.n, p.sampling)
        choices = [self._choice(i, s, p.tool_names) for i, s in enumerate(samples)]
        completion_tokens = sum(len(s.token_ids) for s in samples)
        log.info(
            "chat completion: %d prompt + %d completion tokens in %.1f s, finish %s",
            len(p.prompt),
            completion_tokens,
            time.monotonic() - t0,
            ",".join(c.finish_reason for c in choices),
        )
        return ChatResponse(
            id=p.id,
            created=p.created,
            model=self.name,
            choices=choices,
            usage=Usage(
                prompt_tokens=len(p.prompt),
                completion_tokens=completion_tokens,
                total_tokens=len(p.prompt) + completion_tokens,
            ),
        )

    async def complete(self, req: ChatRequest) -> ChatResponse:
        return await self.run(self.prepare(req))

    def _choice(self, index: int, sample: Completion, tool_names: list[str]) -> Choice:
        text = sample.text
        if tool_names:
            calls = [c for c in parse_message(text, tool_names).calls if c.ok]
            if calls:
                ids = [f"call_{uuid.uuid4().hex[:24]}" for _ in calls]
                self._remember(text, ids)
                out = [
                    OutToolCall(
                        id=cid,
                        function={
                            "name": c.name,
                            "arguments": json.dumps(c.arguments or {}, ensure_ascii=False),
                        },
                    )
                    for c, cid in zip(calls, ids, strict=True)
                ]
                return Choice(
                    index=index, message=OutMessage(content=None, tool_calls=out), finish_reason="tool_calls"
                )
        # No well-formed call: the reply is the answer (the convention the model was trained on).
        return Choice(
            index=index, message=OutMessage(content=text.strip()), finish_reason=sample.finish_reason
        )


def chunk_base(p: Prepared, model: str) -> dict[str, Any]:
    return {"id": p.id, "object": "chat.completion.chunk", "created": p.created, "model": model}


def role_chunk(base: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return {
        **base,
        "choices": [
            {
                "index": index,
                "delta": {"role": "assistant", "content": ""},
                "finish_reason": None,
                "logprobs": None,
            }
        ],
    }


def stream_chunks(
    resp: ChatResponse, include_usage: bool, with_role: bool = True
) -> Iterator[dict[str, Any]]:
    """The finished reply as `chat.completion.chunk` events: role, then content or tool calls,
    then the finish reason (and usage when asked for)."""
    base = {"id": resp.id, "object": "chat.completion.chunk", "created": resp.created, "model": resp.model}

    def chunk(delta: dict[str, Any], finish: str | None = None, index: int = 0) -> dict[str, Any]:
        return {
            **base,
            "choices": [{"index": index, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }

    for c in resp.choices:
        if with_role:
            yield role_chunk(base, c.index)
        if c.message.tool_calls:
            for k, tc in enumerate(c.message.tool_calls):
                yield chunk(
                    {"tool_calls": [{"index": k, "id": tc.id, "type": "function", "function": tc.function}]},
                    index=c.index,
                )
        elif c.message.content:
            yield chunk({"content": c.message.content}, index=c.index)
        yield chunk({}, c.finish_reason, index=c.index)
    if include_usage:
        yield {**base, "choices": [], "usage": resp.usage.model_dump()}
