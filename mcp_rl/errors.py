"""One exception hierarchy for everything mcp-rl raises on purpose.

Every message says what happened *and* what the user can do about it. The CLI prints
`McpRlError` messages without a traceback; anything else is a bug.
"""

from __future__ import annotations


class McpRlError(Exception):
    """Base class: an error the user can act on. `hint` says how."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


class ConfigError(McpRlError):
    """Bad flags, a malformed config file, conflicting options."""


class ServerError(McpRlError):
    """Anything about reaching or talking to an MCP server."""


class ServerStartError(ServerError):
    """The server could not be started or reached (wrong command, unreachable URL, exits at start)."""


class ServerCrashed(ServerError):
    """The server process died or the connection closed during a session."""


class ServerTimeout(ServerError):
    """The server did not answer within the configured timeout."""


class ModelError(McpRlError):
    """A model could not be found, verified, loaded or called."""


class ModelNotInstalled(ModelError):
    """A built-in model's package is missing; the hint holds the exact pip command."""


class ModelIntegrityError(ModelError):
    """A model file does not match its pinned checksum."""


class TaskError(McpRlError):
    """A task file or task generation problem."""


class JudgeError(McpRlError):
    """The judge could not score a group even after repair retries."""


class RunDirError(McpRlError):
    """A run directory is missing, incomplete or unwritable."""


class OutputError(McpRlError):
    """A file could not be written (the disk is full); nothing was left half-written."""
