"""A tool as the model sees it: MCP tool metadata plus its OpenAI function-tool form."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ToolAnnotations(BaseModel):
    """MCP behaviour hints. `None` means the server did not say."""

    title: str | None = None
    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None

    @property
    def is_destructive(self) -> bool:
        # Only an explicit destructiveHint counts here; ToolPolicy adds a name heuristic for
        # tools that carry no annotations at all (most servers in the wild).
        return bool(self.destructive) and not self.read_only

    @property
    def given(self) -> bool:
        """Whether the server sent any behaviour hint at all."""
        return any(
            v is not None for v in (self.read_only, self.destructive, self.idempotent, self.open_world)
        )


class ToolSpec(BaseModel):
    """One tool of a server: original MCP schema, converted parameters, annotations."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=dict)
    """The schema exactly as the server sent it (used to validate arguments)."""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """The schema converted for a model: refs resolved, nullables simplified, descriptions filled."""
    annotations: ToolAnnotations = Field(default_factory=ToolAnnotations)

    def openai(self) -> dict[str, Any]:
        """The OpenAI function-tool definition the model is shown."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }
