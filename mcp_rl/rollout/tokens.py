"""Token bookkeeping for one episode: the ids the trainer will see, which of them the policy
sampled, and their sampling log-probs.

The sequence is built incrementally and never re-tokenized: prompt and tool text is rendered by
the chat template and only the *new suffix* is encoded (mask 0); sampled ids are appended exactly
as sampled (mask 1). The assistant message stored in the conversation is the decoded sample, so
rendering the conversation again reproduces the text of the ids so far. That is checked at every
turn: a template that rewrites earlier turns (some strip reasoning or whitespace from old
assistant messages) would make the trainer's ids disagree with what the model saw, so it fails
loudly instead of training on drifted masks.
"""

from __future__ import annotations

from typing import Any

from mcp_rl.errors import ModelError
from mcp_rl.models.base import Completion, Message, TokenModel


class TemplateDriftError(ModelError):
    """Re-rendering the conversation changed text the model had already seen."""


class TokenTrace:
    def __init__(self, model: TokenModel, tools: list[dict[str, Any]] | None) -> None:
        self.model = model
        self.tools = tools
        self.token_ids: list[int] = []
        self.sampled_mask: list[int] = []
        self.logprobs: list[float] = []
        self.text = ""
        """The text the ids stand for: rendered template text plus decoded samples."""
        self._eos_text = model.decode([model.eos_token_id])

    def __len__(self) -> int:
        return len(self.token_ids)

    def extend_to(self, messages: list[Message], add_generation_prompt: bool) -> None:
        """Render the conversation and append the ids of whatever is new since the last call."""
        rendered = self.model.render(messages, self.tools, add_generation_prompt)
        if not rendered.startswith(self.text):
            at = _first_difference(rendered, self.text)
            raise TemplateDriftError(
                "the chat template rendered earlier turns differently on a later turn "
                f"(first difference at character {at}: had {self.text[at : at + 40]!r}, "
                f"now {rendered[at : at + 40]!r}); token masks would not match what the model saw",
                hint="use a model whose chat template keeps earlier turns unchanged (e.g. the built-in Qwen2.5 models)",
            )
        suffix = rendered[len(self.text) :]
        if suffix:
            ids = self.model.encode(suffix)
            self.token_ids.extend(ids)
            self.sampled_mask.extend([0] * len(ids))
            self.logprobs.extend([0.0] * len(ids))
        self.text = rendered

    def mark(self) -> tuple[int, str]:
        return len(self.token_ids), self.text

    def rewind(self, mark: tuple[int, str]) -> None:
        """Drop what was appended after `mark` (a generation prompt that will not be sampled from)."""
        n, self.text = mark
        del self.token_ids[n:], self.sampled_mask[n:], self.logprobs[n:]

    def add_sample(self, completion: Completion) -> str:
        """Append a sampled completion; return the assistant message content for the conversation.

        The content is the exact decoded sample without its end-of-turn token, so the template
        renders it back to the same text. A sample cut by the length limit has no end token: the
        template's own end-of-turn is added, masked, by the next `extend_to`.
        """
        ids = list(completion.token_ids)
        lps = list(completion.logprobs)
        if len(lps) != len(ids):
            raise ModelError(
                f"the model returned {len(ids)} token ids but {len(lps)} log-probs for one sample",
                hint="this is a bug in the model backend",
            )
        ended = bool(ids) and ids[-1] == self.model.eos_token_id
        if not ended and completion.finish_reason == "stop" and ids and ids[-1] == self.model.pad_token_id:
            # Stopped on another end token (e.g. Qwen's <|endoftext|>). The template ends the turn
            # with its own end-of-turn token, so that is what stands at this position: sampled (mask
            # 1), so the decision to stop here gets a gradient like any other token. (Dropping it, as
            # before, left the stop untrained.) Its log-prob is the sampler's for the token it chose:
            # the clipped ratio's old log-probs are the trainer's own by default (grpo.py, 2).
            ids[-1] = self.model.eos_token_id
            ended = True
        body = ids[:-1] if ended else ids
        content = self.model.decode(body)
        self.token_ids.extend(ids)
        self.sampled_mask.extend([1] * len(ids))
        self.logprobs.extend(float(x) for x in lps)
        self.text += content + (self._eos_text if ended else "")
        return content


def _first_difference(a: str, b: str) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def verify_trace(
    model: TokenModel,
    messages: list[Message],
    tools: list[dict[str, Any]] | None,
    token_ids: list[int],
    sampled_mask: list[int],
) -> list[str]:
    """Problems found when checking a finished episode against the chat template (empty = good).

    The whole conversation rendered again must equal the text of the ids (each run of
    template ids decoded, each sampled run decoded), and every assistant message must be the
    decoded text of one sampled run, in order.
    """
    problems: list[str] = []
    if len(token_ids) != len(sampled_mask):
        return [f"{len(token_ids)} ids but {len(sampled_mask)} mask entries"]
    runs: list[tuple[int, list[int]]] = []
    for tok, m in zip(token_ids, sampled_mask, strict=True):
        if runs and runs[-1][0] == m:
            runs[-1][1].append(tok)
        else:
            runs.append((m, [tok]))
    eos_text = model.decode([model.eos_token_id])
    text = ""
    sampled_texts: list[str] = []
    for m, ids in runs:
        if m == 1:
            ended = ids[-1] == model.eos_token_id
            body = model.decode(ids[:-1] if ended else ids)
            sampled_texts.append(body)
            text += body + (eos_text if ended else "")
        else:
            text += model.decode(ids)
    rendered = model.render(messages, tools, False)
    if rendered != text:
        at = _first_difference(rendered, text)
        problems.append(
            f"rendered conversation differs from the ids at character {at}: "
            f"{rendered[at : at + 40]!r} vs {text[at : at + 40]!r}"
        )
    assistant = [m.get("content") or "" for m in messages if m.get("role") == "assistant"]
    if assistant != sampled_texts:
        problems.append(
            f"{len(assistant)} assistant messages but {len(sampled_texts)} sampled runs, or their texts differ"
        )
    return problems
