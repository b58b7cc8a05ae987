"""ChatModel over a remote API: any OpenAI-compatible endpoint, or any provider litellm names.

For baselines, task writing and judging; API models expose no token ids or log-probs
(`Completion.token_ids` / `.logprobs` stay empty).

Tool calls: when the API returns structured `tool_calls`, they are written into `Completion.text`
as one JSON object per line, `{"name": ..., "arguments": {...}}`, after any text content: the same
convention local models are taught, so one parser reads both.

The API key comes from the `api_key` argument or the environment (OPENAI_API_KEY for the OpenAI
client; litellm reads its providers' usual variables). It is never logged or shown in errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from typing import Any, Literal

from mcp_rl.errors import ModelError
from mcp_rl.models.base import Completion, Message, SamplingParams
from mcp_rl.models.defaults import DEFAULT_POLICY_MODEL

Provider = Literal["openai", "litellm"]
_LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]", "0.0.0.0")


def import_litellm() -> Any:
    """Import litellm without its start-up download of a model price list (offline by default)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return litellm


def tool_calls_as_text(content: str | None, tool_calls: list[Any] | None) -> str:
    """Content plus one JSON line per structured tool call (arguments parsed when they are JSON)."""
    lines = [content] if content else []
    for call in tool_calls or []:
        fn = call.get("function", call) if isinstance(call, dict) else getattr(call, "function", call)
        name = fn.get("name") if isinstance(fn, dict) else getattr(fn, "name", None)
        args: Any = fn.get("arguments") if isinstance(fn, dict) else getattr(fn, "arguments", None)
        if isinstance(args, str):
            # Unparseable arguments stay a raw string: the tool-call parser reports them as invalid.
            with contextlib.suppress(ValueError):
                args = json.loads(args) if args.strip() else {}
        lines.append(json.dumps({"name": name, "arguments": args if args is not None else {}}))
    return "\n".join(lines)


class ApiModel:
    """A ChatModel that calls an API. `n` samples come from one request when the endpoint honours
    `n`, topped up with single requests when it returns fewer."""

    def __init__(
        self,
        model: str,
        *,
        provider: Provider = "openai",
        base_url: str | None = None,
        api_key: str | None = None,
        name: str | None = None,
        max_concurrency: int = 8,
        timeout: float = 120.0,
        max_retries: int = 2,
    ) -> None:
        self.model = model
        self.provider = provider
        self.base_url = base_url
        self.name = name or (f"{provider}:{model}" if provider == "openai" else model)
        self.max_concurrency = max_concurrency
        self.timeout = timeout
        self.max_retries = max_retries
        key = api_key or (os.environ.get("OPENAI_API_KEY") if provider == "openai" else None)
        if provider == "openai" and not key:
            if base_url and any(h in base_url for h in _LOCAL_HOSTS):
                key = "unused"  # local OpenAI-compatible servers usually need no key
            else:
                raise ModelError(
                    f"no API key for {self.name}",
                    hint="set OPENAI_API_KEY (or pass --base-url for a local OpenAI-compatible server), "
                    f"or use a built-in offline model such as {DEFAULT_POLICY_MODEL}",
                )
        self.__key = key
        self._client: Any = None
        self._semaphores: dict[int, asyncio.Semaphore] = {}

    def __repr__(self) -> str:  # never show the key
        return f"ApiModel(name={self.name!r}, base_url={self.base_url!r})"

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        sem = self._semaphores.get(id(loop))
        if sem is None:
            sem = self._semaphores[id(loop)] = asyncio.Semaphore(self.max_concurrency)
        return sem

    def _openai(self) -> Any:
        if self._client is None:
            import openai

            self._client = openai.AsyncOpenAI(
                api_key=self.__key, base_url=self.base_url, timeout=self.timeout, max_retries=self.max_retries
            )
        return self._client

    async def chat(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        n: int = 1,
        sampling: SamplingParams | None = None,
    ) -> list[Completion]:
        sampling = sampling or SamplingParams()
        out = await self._request(messages, tools, n, sampling)
        while len(out) < n:  # endpoints that ignore `n`
            more = await asyncio.gather(
                *(self._request(messages, tools, 1, sampling) for _ in range(n - len(out)))
            )
            got = [c for batch in more for c in batch]
            if not got:  # an endpoint that never returns choices would loop here forever
                raise ModelError(
                    f"{self.name}: the endpoint returned no choices",
                    hint="check the model name and the endpoint's logs; it answered without a completion",
                )
            out.extend(got)
        return out[:n]

    async def _request(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, n: int, sampling: SamplingParams
    ) -> list[Completion]:
        kwargs: dict[str, Any] = dict(
            model=self.model,
            messages=messages,
            n=n,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=sampling.max_new_tokens,
        )
        if tools:
            kwargs["tools"] = tools
        if sampling.seed is not None:
            kwargs["seed"] = sampling.seed
        async with self._semaphore():
            try:
                if self.provider == "openai":
                    resp = await self._openai().chat.completions.create(**kwargs)
                else:
                    resp = await import_litellm().acompletion(
                        api_key=self.__key,
                        api_base=self.base_url,
                        timeout=self.timeout,
                        num_retries=self.max_retries,
                        **kwargs,
                    )
            except Exception as exc:
                raise self._explain(exc) from None
        return [self._completion(choice) for choice in resp.choices]

    @staticmethod
    def _completion(choice: Any) -> Completion:
        msg = choice.message
        text = tool_calls_as_text(getattr(msg, "content", None), getattr(msg, "tool_calls", None))
        return Completion(text=text, finish_reason="length" if choice.finish_reason == "length" else "stop")

    def _explain(self, exc: Exception) -> ModelError:
        """A ModelError that says what to do; the key is never part of the message."""
        kind = type(exc).__name__
        where = self.base_url or (
            "the OpenAI API" if self.provider == "openai" else f"the provider of {self.model}"
        )
        text = str(exc)
        if self.__key and self.__key in text:
            text = text.replace(self.__key, "***")
        if "Connection" in kind or "Timeout" in kind:
            return ModelError(
                f"{self.name}: cannot reach {where} ({kind})",
                hint=f"check the network / --base-url; offline, use a built-in model such as {DEFAULT_POLICY_MODEL}",
            )
        if "Authentication" in kind or "PermissionDenied" in kind:
            return ModelError(
                f"{self.name}: the API rejected the key ({kind})", hint="check OPENAI_API_KEY or --api-key"
            )
        if "NotFound" in kind:
            return ModelError(f"{self.name}: model or endpoint not found at {where}: {text[:300]}")
        if "RateLimit" in kind:
            return ModelError(
                f"{self.name}: rate limited by {where} after retries", hint="lower the concurrency"
            )
        return ModelError(f"{self.name}: API call failed ({kind}): {text[:500]}")
