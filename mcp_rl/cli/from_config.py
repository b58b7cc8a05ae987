"""Command-line options built from pydantic models, and what the user typed turned back into them.

A setting is declared once, as a pydantic field (type, default, bounds, docstring); a command asks
for the model and gets one option per field:

    @app.command("train")
    @config_options
    def train(cfg: Given[TrainConfig], servers: ServerOptions, resume: ResumeOpt = None): ...

A parameter annotated with a model (`servers: ServerOptions`) receives the model built from the
options; one annotated `Given[Model]` receives what was given, to build later (`.build(base=...)`).
Other parameters stay ordinary typer options.

Which fields become options:
- every leaf field of the model itself, unless its metadata says `"cli": False`;
- a field of a nested model (`TrainConfig.rollout.max_turns`) only when it asks for one
  (`"cli": True`, or a flag): most nested settings (GRPO's clip, the reward weights) are internals.
The flag is `--field-name` (`--x/--no-x` for a bool) unless the metadata names it
(`json_schema_extra={"cli": "--tasks"}` or `{"cli": ["--group-size", "-n"]}`).

Bounds are not handed to click: its ranges cannot say `gt`, nan or a rule across fields, and they
would answer in another format. The values are validated into the model instead, and a bad one
is one `ConfigError` naming the flag (exit 2), before the command does anything.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar, get_args, get_origin

import annotated_types as at
import typer
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from mcp_rl.errors import ConfigError

M = TypeVar("M", bound=BaseModel)
R = TypeVar("R")

CLI = "cli"
"""The metadata key (in a field's `json_schema_extra`) that says whether and under what flag a
field is an option."""
_CTX = "_config_options_ctx"


@dataclass(frozen=True)
class Bounds:
    """A numeric field's limits, as pydantic enforces them."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None

    def text(self) -> str:
        """Click's notation for a range: `x>=2`, `x>0`, `0<x<1`; "" when there is none."""
        lower = (">=", self.ge) if self.ge is not None else (">", self.gt) if self.gt is not None else None
        upper = ("<=", self.le) if self.le is not None else ("<", self.lt) if self.lt is not None else None
        if lower and upper:
            return f"{_num(lower[1])}{lower[0].replace('>', '<')}x{upper[0]}{_num(upper[1])}"
        bound = lower or upper
        return f"x{bound[0]}{_num(bound[1])}" if bound else ""


def _num(x: float | None) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


@dataclass(frozen=True)
class CliField:
    """One option: where its value goes in the model, its flags, and what the field says of it."""

    path: tuple[str, ...]
    decls: tuple[str, ...]
    annotation: Any
    default: Any
    help: str
    bounds: Bounds

    @property
    def param(self) -> str:
        """The command parameter's name (unique, since paths are)."""
        return "__".join(self.path)

    @property
    def flag(self) -> str:
        """The long flag, as a user types it (the on-form of a bool)."""
        return next(d for d in self.decls if d.startswith("--")).split("/")[0]

    @property
    def flags(self) -> list[str]:
        return [f for d in self.decls for f in d.split("/")]

    def parameter(self) -> inspect.Parameter:
        shown = self.bounds.text()
        help_text = f"{self.help} ({shown})" if shown else self.help  # [...] would be read as markup
        option = typer.Option(*self.decls, help=help_text)
        # a list option's "not given" is None (typer would print a [] default otherwise)
        default = None if isinstance(self.default, list | dict) and not self.default else self.default
        return inspect.Parameter(
            self.param,
            inspect.Parameter.KEYWORD_ONLY,
            default=default,
            annotation=Annotated[self.annotation, option],
        )


def _model_class(annotation: Any) -> type[BaseModel] | None:
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _bounds(info: FieldInfo) -> Bounds:
    kw = {
        key: getattr(m, key)
        for m in info.metadata
        for key in ("ge", "gt", "le", "lt")
        if isinstance(m, getattr(at, key.capitalize()))
    }
    return Bounds(**kw)


def _decls(name: str, annotation: Any, cli: Any) -> tuple[str, ...]:
    if isinstance(cli, str):
        return (cli,)
    if isinstance(cli, list | tuple):
        return tuple(cli)
    flag = "--" + name.replace("_", "-")
    return (f"{flag}/--no-{flag[2:]}",) if annotation is bool else (flag,)


def cli_fields(
    model: type[BaseModel], _prefix: tuple[str, ...] = (), _defaults: Any = None
) -> list[CliField]:
    """The options `model` declares (see the module's docstring for which fields are options)."""
    out: list[CliField] = []
    for name, info in model.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        cli = extra.get(CLI)
        if cli is False:
            continue
        default = (
            getattr(_defaults, name) if _defaults is not None else info.get_default(call_default_factory=True)
        )
        nested = _model_class(info.annotation)
        if nested is not None:
            out += cli_fields(nested, (*_prefix, name), default)
            continue
        if _prefix and not cli:
            continue  # a nested field is an option only when it asks to be one
        help_text = " ".join((info.description or "").split())
        out.append(
            CliField(
                (*_prefix, name), _decls(name, info.annotation, cli), info.annotation, default, help_text,
                _bounds(info),
            )
        )  # fmt: skip
    return out


def _nested(values: Mapping[tuple[str, ...], Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path, value in values.items():
        node = out
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return out


def _merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        below = out.get(key)
        out[key] = (
            _merge(below, value) if isinstance(below, Mapping) and isinstance(value, Mapping) else value
        )
    return out


def validate(model: type[M], data: Mapping[str, Any], fields: list[CliField] | None = None) -> M:
    """`model` from `data`, or one ConfigError that names the flag of each bad value. This is the one
    place a pydantic ValidationError of a setting becomes the user's message."""
    by_path = {f.path: f.flag for f in fields or cli_fields(model)}
    return _validated(model, data, by_path)


def checked(model: type[M], flags: Mapping[str, str], **values: Any) -> M:
    """`model(**values)` for a command whose options are its own typer parameters (named in `flags`:
    field name -> flag), validated as `validate` does: a bad value is one ConfigError naming its flag."""
    return _validated(model, values, {(name,): flag for name, flag in flags.items()})


def _validated(model: type[M], data: Mapping[str, Any], flags: Mapping[tuple[str, ...], str]) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            loc = tuple(str(x) for x in err["loc"])
            flag = next((flags[loc[:n]] for n in range(len(loc), 0, -1) if loc[:n] in flags), None)
            msg = err["msg"].removeprefix("Value error, ").removeprefix("Input ")
            msg = msg[:1].lower() + msg[1:]
            value = err.get("input")
            # a URL may carry a key: it is named, never echoed
            shown = "" if isinstance(value, str) and "://" in value else f" {value}"
            if flag is not None:
                problems.append(f"{flag}{shown}: {msg}")
            else:
                problems.append(f"{'.'.join(loc)}: {msg}" if loc else msg)
        raise ConfigError("; ".join(problems), hint="each option's range is shown in --help") from None


def range_help(model: type[BaseModel], name: str, text: str) -> str:
    """`text` and the range of field `name` as --help shows it, e.g. "Sampling temperature. (x>=0)":
    for options that are a command's own parameters but whose bounds the model declares."""
    shown = _bounds(model.model_fields[name]).text()
    return f"{text} ({shown})" if shown else text


class Given(Generic[M]):
    """The options of `model` that the user gave (not left at their defaults)."""

    def __init__(self, model: type[M], fields: list[CliField], values: Mapping[tuple[str, ...], Any]) -> None:
        self.model = model
        self.fields = fields
        self.values = dict(values)
        """{field path: value}, e.g. {("rollout", "max_turns"): 2}."""

    def __contains__(self, name: str) -> bool:
        return tuple(name.split(".")) in self.values

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(tuple(name.split(".")), default)

    def build(self, base: Mapping[str, Any] | None = None, **fields: Any) -> M:
        """The model from `base` (e.g. a saved config), then the options given, then `fields`;
        validated, so a bad value is a ConfigError naming its flag. What none of them sets keeps
        the model's default."""
        return validate(self.model, _merge(_merge(base or {}, _nested(self.values)), fields), self.fields)


def _wanted(annotation: Any) -> tuple[type[BaseModel], bool] | None:
    """(model, as Given) when a parameter asks for a model's options."""
    if get_origin(annotation) is Given:
        return get_args(annotation)[0], True
    model = _model_class(annotation)
    return (model, False) if model is not None else None


def config_options(fn: Callable[..., R]) -> Callable[..., R]:
    """Expand each parameter of `fn` annotated with a model (or `Given[model]`) into that model's
    options, for typer; the command is then called with the model (or the `Given`)."""
    sig = inspect.signature(fn, eval_str=True)
    groups: dict[str, tuple[type[BaseModel], bool, list[CliField]]] = {}
    params: list[inspect.Parameter] = []
    for p in sig.parameters.values():
        wanted = _wanted(p.annotation)
        if wanted is None:
            params.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY))
            continue
        model, lazy = wanted
        groups[p.name] = (model, lazy, cli_fields(model))
        params += [f.parameter() for f in groups[p.name][2]]
    _check_unique(fn.__name__, params)
    params.append(inspect.Parameter(_CTX, inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context))

    def command(**kwargs: Any) -> R:
        ctx: typer.Context = kwargs.pop(_CTX)
        for name, (model, lazy, fields) in groups.items():
            given: dict[tuple[str, ...], Any] = {}
            for f in fields:
                value = kwargs.pop(f.param)
                source = ctx.get_parameter_source(f.param)
                # only what the user set: a default left alone must not override a saved config
                if source is not None and not source.name.startswith("DEFAULT"):
                    given[f.path] = value
            chosen = Given(model, fields, given)
            kwargs[name] = chosen if lazy else chosen.build()
        return fn(**kwargs)

    command.__name__, command.__qualname__ = fn.__name__, fn.__qualname__
    command.__doc__, command.__module__ = fn.__doc__, fn.__module__
    command.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    return command


def _flags_of(p: inspect.Parameter) -> list[str]:
    for meta in getattr(p.annotation, "__metadata__", ()):
        decls = getattr(meta, "param_decls", None)
        if decls is not None:
            default = getattr(meta, "default", None)
            firsts = [default] if isinstance(default, str) and default.startswith("-") else []
            return [f for d in [*firsts, *decls] for f in d.split("/")]
    return ["--" + p.name.replace("_", "-")]


def _check_unique(command: str, params: list[inspect.Parameter]) -> None:
    """Two settings under one flag would make one of them unreachable: refuse at import."""
    seen: dict[str, str] = {}
    for p in params:
        for flag in _flags_of(p):
            if flag in seen:
                raise TypeError(f"{command}: {flag} is declared twice ({seen[flag]} and {p.name})")
            seen[flag] = p.name
