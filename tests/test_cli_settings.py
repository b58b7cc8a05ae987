"""Each setting declared once: the command-line options are built from the pydantic fields, so the
CLI has the config's names, defaults and bounds, and a bad number is one clear message (exit 2)
before any server starts, model loads or run directory is made.

The CLI is run through its real entry point (`mcp_rl.cli.main`, what `mcp-rl` calls), in process so
that a table of cases stays cheap; one case runs as a real process to show the same there.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from typing import Any

import annotated_types as at
import pytest
import typer
from pydantic import BaseModel, ConfigDict, Field
from typer.testing import CliRunner

from conftest import INVENTORY, PY, REPO
from mcp_rl.cli import app, main
from mcp_rl.cli.from_config import Given, cli_fields, config_options
from mcp_rl.cli.options import ServerOptions
from mcp_rl.grpo_config import GRPOConfig
from mcp_rl.rollout import RolloutConfig
from mcp_rl.servers import ConnectionSettings, ServerSession, ServerSpec
from mcp_rl.task import Task
from mcp_rl.train_config import LoraSettings, TrainConfig
from scenario_gen.io import save_tasks

NO_SERVER = "no-such-server-cmd-xyz --stdio"  # would fail if it were ever started
NO_MODEL = "no-such-model-xyz"  # would fail if it were ever loaded


def run_cli(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str
) -> tuple[int, str]:
    """Exit code and stderr (whitespace folded) of `mcp-rl ARGS`."""
    monkeypatch.setattr(sys, "argv", ["mcp-rl", *args])
    monkeypatch.setenv("COLUMNS", "250")
    try:
        main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    _, err = capsys.readouterr()
    return code, " ".join(err.split())


def one_clear_error(code: int, err: str, *words: str) -> None:
    assert code == 2, (code, err)
    assert err.count("error:") == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)


BAD_TRAIN_NUMBERS = [
    ("--group-size", "0"),
    ("--group-size", "-1"),
    ("--tasks-per-step", "0"),
    ("--max-steps", "0"),
    ("--max-steps", "-3"),
    ("--eval-every", "0"),
    ("--patience", "-1"),
    ("--judge-permutations", "0"),
    ("--learning-rate", "-1"),
    ("--lora-rank", "0"),
    ("--max-turns", "0"),
    ("--max-new-tokens", "0"),
    ("--call-timeout", "-1"),
    ("--connect-timeout", "nan"),
    ("--eval-temperature", "inf"),
    ("--val-fraction", "1"),
]


@pytest.mark.parametrize(("flag", "value"), BAD_TRAIN_NUMBERS)
def test_a_bad_number_for_train_is_one_message_before_any_server_model_or_run_directory(
    flag, value, tmp_path, capsys, monkeypatch
):
    run_dir = tmp_path / "run"
    code, err = run_cli(
        capsys, monkeypatch,
        "train", "--server", NO_SERVER, "--model", NO_MODEL, "--run-dir", str(run_dir), flag, value,
    )  # fmt: skip
    one_clear_error(code, err, f"error: {flag} ", "hint:")
    # neither the server nor the model was touched: their own errors would have come first
    assert "command not found" not in err and "unknown model" not in err
    assert not run_dir.exists()


@pytest.mark.parametrize("command", ["inspect", "rollout", "generate", "chat"])
def test_every_server_command_checks_its_timeouts_before_starting_the_server(command, capsys, monkeypatch):
    extra = {"rollout": ["--task", "x"], "chat": ["--model", NO_MODEL]}.get(command, [])
    code, err = run_cli(capsys, monkeypatch, command, "--server", NO_SERVER, *extra, "--call-timeout", "-1")
    one_clear_error(code, err, "--call-timeout -1", "greater than 0")
    code, err = run_cli(
        capsys, monkeypatch, command, "--server", NO_SERVER, *extra, "--connect-timeout", "nan"
    )
    one_clear_error(code, err, "--connect-timeout nan", "finite")


def test_a_bad_number_is_the_same_one_message_from_a_real_process(tmp_path):
    r = subprocess.run(
        [PY, "-m", "mcp_rl", "train", "--server", NO_SERVER, "--run-dir", str(tmp_path / "run"), "--lora-rank", "0"],
        cwd=REPO, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "250"},
    )  # fmt: skip
    err = " ".join(r.stderr.split())
    one_clear_error(r.returncode, err, "--lora-rank 0", "greater than or equal to 1")
    assert not (tmp_path / "run").exists()


# Every option `mcp-rl train` had before it was built from the config, and the README's: none may go.
TRAIN_FLAGS_BEFORE = [
    "--server",
    "-s",
    "--config",
    "--name",
    "--env",
    "--header",
    "--allow-tools",
    "--deny-tools",
    "--allow-destructive",
    "--model",
    "--tasks",
    "--n-tasks",
    "--val-fraction",
    "--generator",
    "--instructions",
    "--judge",
    "--judge-grounded",
    "--no-judge-grounded",
    "--rubric",
    "--judge-permutations",
    "--group-size",
    "-n",
    "--tasks-per-step",
    "--max-steps",
    "--eval-every",
    "--patience",
    "--min-improvement",
    "--learning-rate",
    "--lora-rank",
    "--gradient-checkpointing",
    "--no-gradient-checkpointing",
    "--max-turns",
    "--max-new-tokens",
    "--temperature",
    "--seed",
    "--run-dir",
    "--log-to",
    "--resume",
]


def _help(command: str) -> str:
    r = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    return r.output


def test_train_help_shows_the_server_timeouts_and_keeps_every_option_it_had():
    shown = _help("train")
    for flag in ["--connect-timeout", "--call-timeout", *TRAIN_FLAGS_BEFORE]:
        assert f" {flag} " in shown, flag
    # the help text and range come from the field
    assert "Seconds to wait for each tool call. (x>0)" in shown
    assert "Episodes per task (a GRPO group). (x>=2)" in shown


@pytest.mark.parametrize("command", ["inspect", "rollout", "generate", "chat", "train"])
def test_every_server_command_has_the_same_server_options(command):
    shown = _help(command)
    for f in cli_fields(ServerOptions):
        for flag in f.flags:
            assert f" {flag} " in shown, (command, flag)


def _probes(info: Any) -> list[float]:
    """Values on and just past each bound of a field, plus nan and inf for floats."""
    is_int = info.annotation is int
    step = 1 if is_int else 1e-6
    out: list[float] = [-1, 0, 1]
    for m in info.metadata:
        for kind in ("ge", "gt", "le", "lt"):
            if isinstance(m, getattr(at, kind.capitalize())):
                b = getattr(m, kind)
                out += [b - step, b, b + step]
    return out if is_int else [*out, math.nan, math.inf]


def _numeric_cli_fields() -> list[tuple[type[BaseModel], Any, Any]]:
    """(root model, option, field) for every numeric leaf field of TrainConfig, and of the server
    options, that has a train flag."""
    out = []
    for root in (TrainConfig, ServerOptions):
        for f in cli_fields(root):
            model: Any = root
            for key in f.path[:-1]:
                model = model.model_fields[key].annotation
            info = model.model_fields[f.path[-1]]
            if info.annotation in (int, float):
                out.append((root, f, info))
    return out


def test_every_numeric_train_option_has_exactly_the_bounds_of_its_config_field(capsys, monkeypatch):
    checked = 0
    for root, f, info in _numeric_cli_fields():
        for x in _probes(info):
            value = str(int(x)) if info.annotation is int else str(x)
            nested: dict[str, Any] = {}
            node = nested
            for key in f.path[:-1]:
                node = node.setdefault(key, {})
            node[f.path[-1]] = x
            try:
                root.model_validate(nested)
                config_takes = True
            except ValueError:
                config_takes = False
            # without a server, a value the CLI takes gets as far as "no server given"
            code, err = run_cli(capsys, monkeypatch, "train", f.flag, value)
            cli_takes = "no server given" in err
            # a refused value is named in the error (a rule across fields names every flag it joins)
            assert cli_takes or f"error: {f.flag} " in err or ("error: " in err and f"{f.flag} " in err), (
                f.flag, value, err,
            )  # fmt: skip
            assert cli_takes == config_takes, (f.path, value, err)
            assert code == 2
            checked += 1
    # the options the issue names are among those checked
    flags = {f.flag for _, f, _ in _numeric_cli_fields()}
    assert {"--group-size", "--lora-rank", "--max-turns", "--learning-rate", "--call-timeout"} <= flags
    assert checked > 60


def test_grpo_samples_at_the_rollout_temperature_for_a_library_caller_too():
    cfg = TrainConfig(rollout=RolloutConfig(temperature=0.7), grpo=GRPOConfig(temperature=1.0))
    assert cfg.grpo.temperature == 0.7
    again = TrainConfig.model_validate(cfg.model_dump(mode="json"))
    assert again.grpo.temperature == again.rollout.temperature == 0.7


def test_lora_alpha_is_twice_the_rank_unless_given():
    assert LoraSettings(r=8).alpha == 16
    assert LoraSettings(r=8, alpha=4).alpha == 4
    assert LoraSettings().alpha == 32


def test_trackers_may_be_given_comma_separated():
    assert TrainConfig(log_to=["tensorboard, wandb"]).log_to == ["tensorboard", "wandb"]


def test_a_session_takes_its_timeouts_and_budget_from_the_spec():
    spec = ServerSpec.parse(INVENTORY).with_connection(call_timeout=7, result_budget=99)
    s = ServerSession(spec)
    assert (s.connect_timeout, s.call_timeout, s.result_budget) == (60.0, 7.0, 99)
    with pytest.raises(ValueError):
        spec.with_connection(connect_timeout=math.nan)
    assert ConnectionSettings().model_dump() == {
        "connect_timeout": 60.0,
        "call_timeout": 30.0,
        "result_budget": 4000,
    }


def test_train_connect_timeout_reaches_the_servers_it_starts(tmp_path):
    """A server that never answers, and --connect-timeout 2: the run gives up after 2 s, not 60."""
    tasks = tmp_path / "tasks.jsonl"
    save_tasks(
        [Task(id="a", text="How many?", split="train"), Task(id="b", text="How many?", split="val"),
         Task(id="c", text="How many?", split="test")],
        tasks,
    )
    r = subprocess.run(
        [PY, "-m", "mcp_rl", "train", "--server", f"{PY} -c 'import time; time.sleep(120)'", "--model", "tiny",
         "--judge", "none", "--tasks", str(tasks), "--run-dir", str(tmp_path / "run"), "--connect-timeout", "2"],
        cwd=REPO, capture_output=True, text=True, timeout=240,
        env={**os.environ, "COLUMNS": "250", "MCP_RL_THREADS": "1", "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    err = " ".join(r.stderr.split())
    one_clear_error(r.returncode, err, "did not finish connecting within 2 s")
    assert not (tmp_path / "run").exists()


# --- the bridge on a model of its own -------------------------------------------------------------


class Inner(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)

    depth: int = Field(default=3, ge=1, json_schema_extra={"cli": True})
    """How deep."""
    hidden: int = 5
    """Not an option: a nested field is one only when it asks."""


class Outer(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True, allow_inf_nan=False)

    width: float = Field(default=0.5, gt=0.0, lt=1.0)
    """How wide."""
    fast: bool = True
    """Go fast."""
    label: str | None = Field(default=None, json_schema_extra={"cli": ["--tag", "-t"]})
    """A tag."""
    secret: dict = Field(default_factory=dict, json_schema_extra={"cli": False})
    inner: Inner = Field(default_factory=lambda: Inner(depth=4))


def _toy_app(seen: list[Any], lazy: bool) -> typer.Typer:
    toy = typer.Typer()

    if lazy:

        @toy.command()
        @config_options
        def go(cfg: Given[Outer], extra: int = 0) -> None:
            seen.append((cfg.values, cfg.build(), extra))

    else:

        @toy.command()
        @config_options
        def go(cfg: Outer, extra: int = 0) -> None:
            seen.append(cfg)

    return toy


def test_options_are_built_from_field_names_types_defaults_docstrings_and_metadata():
    seen: list[Any] = []
    r = CliRunner().invoke(_toy_app(seen, lazy=False), ["--help"], env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    for shown in (
        "--width",
        "How wide. (0<x<1)",
        "--fast",
        "--no-fast",
        "--tag",
        "-t",
        "--depth",
        "How deep. (x>=1)",
    ):
        assert shown in r.output, shown
    assert "--hidden" not in r.output and "--secret" not in r.output and "--label" not in r.output
    assert "[default: 4]" in r.output  # the nested default is the parent's (Inner(depth=4)), not Inner's 3

    r = CliRunner().invoke(
        _toy_app(seen, lazy=False), ["--width", "0.25", "--no-fast", "-t", "x", "--depth", "9"]
    )
    assert r.exit_code == 0, r.output
    assert seen[-1] == Outer(width=0.25, fast=False, label="x", inner=Inner(depth=9))


def test_given_holds_only_what_was_typed_so_a_saved_config_keeps_the_rest():
    seen: list[Any] = []
    r = CliRunner().invoke(_toy_app(seen, lazy=True), ["--depth", "7", "--extra", "2"])
    assert r.exit_code == 0, r.output
    values, built, extra = seen[-1]
    assert values == {("inner", "depth"): 7} and extra == 2
    assert built == Outer(inner=Inner(depth=7))
    r = CliRunner().invoke(_toy_app(seen, lazy=True), ["--fast"])  # typed, though equal to the default
    assert seen[-1][0] == {("fast",): True}


def test_a_value_the_model_refuses_names_its_flag():
    seen: list[Any] = []
    r = CliRunner().invoke(_toy_app(seen, lazy=False), ["--width", "nan"])
    assert r.exit_code != 0 and not seen
    assert "--width nan: should be a finite number" in str(r.exception)


class Clash(BaseModel):
    depth: int = 1


def test_two_settings_under_one_flag_are_refused_when_the_command_is_declared():
    with pytest.raises(TypeError, match="--depth is declared twice"):

        @config_options
        def go(a: Clash, b: Outer) -> None: ...


def test_flags_of_nested_fields_are_the_ones_train_had():
    flags = {f.path: f.flag for f in cli_fields(TrainConfig)}
    assert flags[("lora", "r")] == "--lora-rank"
    assert flags[("grpo", "learning_rate")] == "--learning-rate"
    assert flags[("rollout", "max_turns")] == "--max-turns"
    assert flags[("rollout", "temperature")] == "--temperature"
    assert ("grpo", "temperature") not in flags  # it follows --temperature (the validator)
    assert ("server",) not in flags and ("policy",) not in flags and ("reward",) not in flags
