"""One class for every tool, shared by exploration and training: read, write, or irreversible.

Annotations decide first (the server knows its tools); then the name, then the description, then
the schema. The rule, in order:

1. `readOnlyHint: true` -> read.
2. `destructiveHint: true` -> irreversible, unless the tool is idempotent and its name says it
   writes (create, write, set ...) rather than destroys: overwriting a file is undone by a reset,
   deleting entities is not.
3. `destructiveHint: false` (with `readOnlyHint` false or unsaid) -> write; a read-looking name with
   no `readOnlyHint` still reads (the server only said it destroys nothing).
4. No hint that decides: a word of the name that destroys or acts outside the server (delete, purge,
   revoke, send, transfer, shell, exec ...) -> irreversible; else the name's first verb decides
   (get, convert, sum -> read; create, save, commit -> write); else the description's first verb;
   else a description that says what it returns ("The ...", "Facts about ...") -> read; else write,
   the MCP default (not read-only).

Names are split into words by separators, camelCase and digits (`deleteUser` -> delete user,
`getHTTPStatus` -> get http status), and a glued verb is split off a known noun (`deleteall`,
`rmdir`, `purgecache`).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel

from mcp_rl.servers.tools import ToolSpec

Kind = Literal["read", "write", "irreversible"]


class ToolClass(BaseModel):
    kind: Kind
    reason: str
    """A short sentence a user reads: why this class."""


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Destroys or acts outside the server wherever it stands in the name (`user_delete`, `run_shell`).
_IRREVERSIBLE_ANYWHERE = _set(
    "delete del remove rm rmdir unlink drop destroy erase purge wipe truncate kill terminate revoke "
    "uninstall trash shred exec execute shell sudo"
)
# The same words read in running text ("del" and "rm" are too short to mean anything there).
_DANGER_IN_TEXT = _IRREVERSIBLE_ANYWHERE - {"del", "rm"}
# Irreversible or external only as the tool's verb: `send_email` sends, `get_sent_email` reads.
_IRREVERSIBLE_VERBS = _set(
    "send email mail post publish tweet pay charge transfer refund withdraw clear reset reboot "
    "shutdown restart deploy push eval"
)
# Pure computations: no state read or written, so they are reads.
_COMPUTE_VERBS = _set(
    "calc calculate compute convert sum subtract multiply divide mean median mode average percentile "
    "rank sort compare round sqrt power solve estimate evaluate validate parse format encode decode "
    "hash diff analyze analyse summarize summarise extract tokenize translate echo ping count min max "
    "normalize stats statistics"
)
_READ_VERBS = _set(
    "get list search find read query describe show lookup fetch view check retrieve inspect browse "
    "open status info locate resolve explain preview peek scan tail head cat ls stat whoami is has "
    "can exists"
)
_WRITE_VERBS = _set(
    "create add save set update put write edit insert append move rename copy upload commit checkout "
    "branch tag make new store register modify patch replace upsert overwrite import apply mark "
    "assign enable disable start stop stage unstage init install link attach record submit schedule "
    "place merge rebase run"
)
_ALL_VERBS = _IRREVERSIBLE_ANYWHERE | _IRREVERSIBLE_VERBS | _COMPUTE_VERBS | _READ_VERBS | _WRITE_VERBS
# `run` and `format` depend on their object: running a shell or formatting a disk is irreversible,
# formatting a date is a computation, running an analysis is a write.
_RUN_OBJECTS = _set("shell command cmd script code sql query program process bash python js")
_FORMAT_OBJECTS = _set("disk drive volume partition device fs filesystem")
# Nouns a verb is glued to in names like `deleteall`, `rmdir`, `getsum`: only these are split off,
# so `address` is not read as add + ress.
_GLUE_NOUNS = _set(
    "all dir dirs file files folder item items user users cache table tables db database record "
    "records data key keys everything node nodes entity entities row rows account repo branch tag "
    "note notes message messages mail email list info status name names one many text value values "
    "id ids sum time date token tokens"
)
# A description opening like these says what the tool gives back.
_DESCRIBES_RESULT = re.compile(
    r"^(the|a|an|all|one|facts?|titles?|details?|information|info|list of|names?|text of|"
    r"current|number of|how many|which|whether|statistics|summary)\b"
)
_RETURNS = re.compile(r"\b(returns?|looks? up|computes?|calculates?|retrieves?|gives back|reports?)\b")

_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def words(name: str) -> list[str]:
    """A tool name as lower-case words: `getHTTPStatus` -> get http status, `rmdir` -> rm dir."""
    out: list[str] = []
    for part in re.split(r"[^A-Za-z0-9]+", name):
        for w in _CAMEL.findall(part):
            out.extend(_unglue(w.lower()))
    return out


def _unglue(word: str) -> list[str]:
    if word in _ALL_VERBS or word.isdigit():
        return [word]
    for verb in sorted(_ALL_VERBS, key=len, reverse=True):
        rest = word[len(verb) :]
        if word.startswith(verb) and rest in _GLUE_NOUNS:
            return [verb, rest]
    return [word]


def _stem(word: str) -> str:
    """Third-person and -ing forms of a description's verb: `Returns` -> return, `lists` -> list."""
    for suffix, repl in (("ies", "y"), ("es", ""), ("s", ""), ("ing", "")):
        if word.endswith(suffix) and word[: -len(suffix)] + repl in _ALL_VERBS:
            return word[: -len(suffix)] + repl
    return word


def _verb(ws: list[str]) -> str | None:
    return next((w for w in ws if w in _ALL_VERBS), None)


def _numbers_only(tool: ToolSpec) -> bool:
    """Every parameter a number or a list of numbers: `add(a, b)` computes, it stores nothing."""
    props = (tool.parameters or {}).get("properties") or {}

    def numeric(p: Any) -> bool:
        t = p.get("type") if isinstance(p, dict) else None
        if t == "array":
            return numeric(p.get("items") or {})
        return t in ("number", "integer")

    return bool(props) and all(numeric(p) for p in props.values())


def _kind_of_verb(verb: str, ws: list[str], tool: ToolSpec) -> tuple[Kind, str]:
    """The class a verb gives, with the phrase the reason uses."""
    after = ws[ws.index(verb) + 1 :] if verb in ws else []
    if verb in _IRREVERSIBLE_ANYWHERE or verb in _IRREVERSIBLE_VERBS:
        return "irreversible", f"'{verb}' (irreversible)"
    if verb == "format" and _FORMAT_OBJECTS & set(after):
        return "irreversible", f"'format {next(w for w in after if w in _FORMAT_OBJECTS)}' (irreversible)"
    if verb == "run" and _RUN_OBJECTS & set(after):
        return "irreversible", f"'run {next(w for w in after if w in _RUN_OBJECTS)}' (irreversible)"
    if verb == "add":
        if _numbers_only(tool):
            return "read", "like a computation (add, numbers only)"
        return "write", "like a write (add)"
    if verb in _COMPUTE_VERBS:
        return "read", f"like a computation ({verb})"
    if verb in _READ_VERBS:
        return "read", f"like a read ({verb})"
    return "write", f"like a write ({verb})"


def _name_class(tool: ToolSpec) -> tuple[Kind, str] | None:
    ws = words(tool.name)
    danger = next((w for w in ws if w in _IRREVERSIBLE_ANYWHERE), None)
    if danger is not None:
        return "irreversible", f"'{danger}' (irreversible)"
    if {"or", "and"} & set(ws):
        # `get_or_create`, `read_and_delete`: the strongest verb of the name counts
        kinds = [_kind_of_verb(w, ws, tool) for w in ws if w in _ALL_VERBS]
        order = {"irreversible": 0, "write": 1, "read": 2}
        return min(kinds, key=lambda k: order[k[0]]) if kinds else None
    verb = _verb(ws)
    return _kind_of_verb(verb, ws, tool) if verb else None


def _description_class(tool: ToolSpec) -> tuple[Kind, str] | None:
    text = " ".join(tool.description.split()).lower()
    text = re.sub(r"^(this tool|tool to|use this to|used to|it)\s+", "", text)
    first = _stem(re.split(r"[^a-z0-9]+", text, maxsplit=1)[0]) if text else ""
    if first in _ALL_VERBS:
        kind, phrase = _kind_of_verb(first, [first, *re.findall(r"[a-z]+", text)[1:6]], tool)
        return kind, f"described {'with ' if kind == 'irreversible' else ''}{phrase}"
    danger = next((w for w in map(_stem, re.findall(r"[a-z]+", text)) if w in _DANGER_IN_TEXT), None)
    if danger is not None:  # "A tool that deletes ..." must not pass as a description of a result
        return "irreversible", f"described with '{danger}' (irreversible)"
    if _DESCRIBES_RESULT.match(text) or _RETURNS.search(text):
        return "read", "described by what it returns"
    return None


def classify(tool: ToolSpec) -> ToolClass:
    """The class of one tool, from its annotations first, then its name, description and schema."""
    a = tool.annotations
    by_name = _name_class(tool)
    if a.read_only is True:
        return ToolClass(kind="read", reason="annotated read-only")
    if a.destructive is True:
        if a.idempotent and by_name is not None and by_name[0] == "write":
            return ToolClass(
                kind="write",
                reason=f"annotated destructive but idempotent, named {by_name[1]}: a reset undoes it",
            )
        why = f", named {by_name[1]}" if by_name is not None and by_name[0] == "irreversible" else ""
        return ToolClass(kind="irreversible", reason=f"annotated destructive{why}")
    if a.destructive is False:
        if a.read_only is None and by_name is not None and by_name[0] == "read":
            return ToolClass(kind="read", reason=f"named {by_name[1]}, annotated not destructive")
        return ToolClass(kind="write", reason="annotated as a write that destroys nothing")
    hint = "annotated not read-only" if a.read_only is False else "no annotation"
    by_text = _description_class(tool)
    if by_name is not None:
        kind, phrase = by_name
        if kind == "write" and by_text is not None and by_text[0] == "irreversible":
            return ToolClass(kind="irreversible", reason=f"{by_text[1]}, {hint}")
        if kind == "read" and a.read_only is False:
            return ToolClass(kind="write", reason=f"named {phrase} but annotated not read-only")
        return ToolClass(kind=kind, reason=f"named {phrase}, {hint}")
    if by_text is not None:
        kind, phrase = by_text
        if kind == "read" and a.read_only is False:
            return ToolClass(kind="write", reason=f"{phrase} but annotated not read-only")
        return ToolClass(kind=kind, reason=f"{phrase}, {hint}")
    return ToolClass(
        kind="write",
        reason=f"{hint}, and neither name nor description says it only reads (the MCP default: not read-only)",
    )
