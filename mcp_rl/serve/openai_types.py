"""The OpenAI chat-completions records `mcp-rl serve` reads and writes.

Only the fields an agent host sends for tool calling are modelled; any other field is accepted
and ignored (hosts add vendor fields freely), except the few whose meaning we cannot honour,
which the app rejects with a clear 400 (see `completions.check_request`).
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class FunctionCall(_Open):
    name: str
    arguments: str | dict[str, Any] = "{}"
    """A JSON string per the API; some clients send an object, which we accept too."""


class ToolCall(_Open):
    id: str = ""
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(_Open):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None


class FunctionDef(_Open):
    name: str = Field(min_length=1)
    description: str | None = None
    parameters: dict[str, Any] | None = None


class ToolDef(_Open):
    type: Literal["function"] = "function"
    function: FunctionDef


class NamedToolChoice(_Open):
    type: Literal["function"] = "function"
    function: dict[str, Any]


class StreamOptions(_Open):
    include_usage: bool = False


class ChatRequest(_Open):
    model: str = ""
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[ToolDef] | None = None
    tool_choice: Literal["auto", "none", "required"] | NamedToolChoice | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    seed: int | None = None
    n: int = Field(default=1, ge=1, le=8)
    stream: bool = False
    stream_options: StreamOptions | None = None


# ---- responses ------------------------------------------------------------------------------


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class OutToolCall(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: dict[str, str]
    """{"name": ..., "arguments": <JSON string>}"""


class OutMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None
    tool_calls: list[OutToolCall] | None = None


FinishReason = Literal["stop", "length", "tool_calls"]


class Choice(BaseModel):
    index: int
    message: OutMessage
    finish_reason: FinishReason
    logprobs: None = None


class ChatResponse(BaseModel):
    id: str = Field(default_factory=lambda: new_id("chatcmpl"))
    object: Literal["chat.completion"] = "chat.completion"
    created: int = Field(default_factory=lambda: int(time.time()))
    model: str
    choices: list[Choice]
    usage: Usage
    system_fingerprint: str | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "mcp-rl"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


def error_body(
    message: str, type_: str = "invalid_request_error", code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """The OpenAI error shape, which every client library knows how to surface."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}
