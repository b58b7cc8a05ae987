"""One class per tool (read / write / irreversible), shared by the training policy and exploration."""

from __future__ import annotations

import logging

import anyio
import pytest

from conftest import FAULTY, INVENTORY, PY
from mcp_rl.servers import ServerSession, ServerSpec, ToolAnnotations, ToolPolicy, ToolSpec, classify
from mcp_rl.servers.tool_class import words
from scenario_gen.explorer import Explorer

STATS_LAB = f"{PY} -m examples.servers.stats_lab"
NUMBERS = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}
TEXTS = {
    "type": "object",
    "properties": {"observations": {"type": "array", "items": {"type": "object"}}},
}
RO = ToolAnnotations(read_only=True)
WRITE = ToolAnnotations(read_only=False, destructive=False)
OVERWRITE = ToolAnnotations(read_only=False, destructive=True, idempotent=True)
DESTROY = ToolAnnotations(read_only=False, destructive=True, idempotent=False)

# (name, description, annotations, schema, expected class)
CASES: list[tuple[str, str, ToolAnnotations | None, dict | None, str]] = [
    # the gate's misses from issue #19: no annotations, names that destroy or act outside
    ("deleteUser", "", None, None, "irreversible"),
    ("DeleteUser", "", None, None, "irreversible"),
    ("removeItem", "", None, None, "irreversible"),
    ("wipeAll", "", None, None, "irreversible"),
    ("purgeCache", "", None, None, "irreversible"),
    ("deleteall", "", None, None, "irreversible"),
    ("del_item", "", None, None, "irreversible"),
    ("rmdir", "", None, None, "irreversible"),
    ("trash_item", "", None, None, "irreversible"),
    ("clear_all", "", None, None, "irreversible"),
    ("format_disk", "", None, None, "irreversible"),
    ("revoke_token", "", None, None, "irreversible"),
    ("uninstall_package", "", None, None, "irreversible"),
    ("exec_sql", "", None, None, "irreversible"),
    ("run_shell_command", "", None, None, "irreversible"),
    ("transfer_funds", "", None, None, "irreversible"),
    ("send_email", "", None, None, "irreversible"),
    ("user.remove", "", None, None, "irreversible"),
    ("write_query", "Execute an INSERT, UPDATE, or DELETE query on the database", None, None, "irreversible"),
    ("process_item", "Deletes the item permanently.", None, None, "irreversible"),
    # writes a reset undoes
    ("write_file", "Create a new file or overwrite an existing one.", None, None, "write"),
    ("move_file", "Move or rename files and directories.", None, None, "write"),
    ("edit_file", "Make line-based edits to a text file.", None, None, "write"),
    ("create_directory", "Create a new directory.", None, None, "write"),
    ("git_commit", "Records changes to the repository", None, None, "write"),
    ("git_add", "Adds file contents to the staging area", None, None, "write"),
    ("git_checkout", "Switches branches", None, None, "write"),
    ("git_create_branch", "Creates a new branch from an optional base branch", None, None, "write"),
    ("create_entities", "Create multiple new entities in the knowledge graph", None, None, "write"),
    ("add_observations", "Add new observations to existing entities", None, TEXTS, "write"),
    ("save_note", "Save a note under a title, replacing any note of that title.", None, None, "write"),
    ("weather", "Weather forecast for a city", None, None, "write"),  # no cue: the MCP default
    # reads: lookups and computations
    ("read_text_file", "Read the complete contents of a file as text.", None, None, "read"),
    ("list_directory", "Get a detailed listing of all files and directories.", None, None, "read"),
    ("git_status", "Shows the working tree status", None, None, "read"),
    ("git_log", "Shows the commit logs", None, None, "read"),
    ("read_graph", "Read the entire knowledge graph", None, None, "read"),
    ("search_nodes", "Search for nodes in the knowledge graph", None, None, "read"),
    ("open_nodes", "Open specific nodes by their names", None, None, "read"),
    ("echo", "Echoes back the input", None, None, "read"),
    ("get-sum", "Returns the sum of two numbers", None, None, "read"),
    ("get-env", "Returns all environment variables", None, None, "read"),
    ("get_current_time", "Get current time in a specific timezone", None, None, "read"),
    ("convert_time", "Convert time between timezones", None, None, "read"),
    ("getHTTPStatus", "", None, None, "read"),
    ("sum", "", None, None, "read"),
    ("add", "Add two numbers", None, NUMBERS, "read"),  # numbers in, nothing stored: a computation
    ("divide", "", None, None, "read"),
    ("multiply", "", None, None, "read"),
    ("convert_units", "", None, None, "read"),
    ("city", "Facts about one city: country, population, area in km2, year founded.", None, None, "read"),
    ("cities", "The cities known, optionally only those of one country.", None, None, "read"),
    ("note_titles", "Titles of the saved notes, one per line.", None, None, "read"),
    ("describe", "Mean, minimum, maximum and standard deviation of a list of numbers.", None, None, "read"),
    ("address_book", "A list of contacts.", None, None, "read"),  # 'address' is not add + ress
    # annotations decide first
    ("write_file", "", OVERWRITE, None, "write"),  # destructive but idempotent: a reset restores the file
    ("delete_entities", "", OVERWRITE, None, "irreversible"),  # idempotent, yet it deletes
    ("edit_file", "", DESTROY, None, "irreversible"),
    ("create_entities", "", WRITE, None, "write"),
    ("remove_note", "", ToolAnnotations(destructive=False), None, "write"),  # the server says it keeps data
    ("get_item", "", ToolAnnotations(destructive=False), None, "read"),
    ("get_item", "", ToolAnnotations(read_only=False), None, "write"),
    ("delete_cache_entry", "", RO, None, "read"),
    ("read_graph", "", RO, None, "read"),
]


def _tool(name: str, description: str, ann: ToolAnnotations | None, schema: dict | None) -> ToolSpec:
    return ToolSpec(
        name=name, description=description, annotations=ann or ToolAnnotations(),
        parameters=schema or {"type": "object", "properties": {"x": {"type": "string"}}},
    )  # fmt: skip


def test_there_are_at_least_forty_real_names_both_blocked_and_usable():
    assert len({c[0] for c in CASES}) >= 40
    assert {c[4] for c in CASES} == {"read", "write", "irreversible"}


@pytest.mark.parametrize(("name", "description", "ann", "schema", "kind"), CASES)
def test_each_tool_gets_its_class_with_a_reason(name, description, ann, schema, kind):
    cls = classify(_tool(name, description, ann, schema))
    assert cls.kind == kind, cls.reason
    assert cls.reason and cls.reason[0].islower()


def test_names_split_by_camel_case_acronyms_digits_and_glued_verbs():
    assert words("deleteUser") == ["delete", "user"]
    assert words("getHTTPStatus") == ["get", "http", "status"]
    assert words("md5-sum") == ["md", "5", "sum"]
    assert words("deleteall") == ["delete", "all"]
    assert words("address") == ["address"]


def test_the_reason_names_what_decided():
    assert classify(_tool("convert_length", "", None, None)).reason.startswith(
        "named like a computation (convert)"
    )
    assert "'delete'" in classify(_tool("deleteUser", "", None, None)).reason
    assert classify(_tool("x", "", RO, None)).reason == "annotated read-only"


@pytest.mark.parametrize(("name", "description", "ann", "schema", "kind"), CASES)
def test_the_default_policy_uses_reads_and_harmless_writes_and_blocks_irreversible_tools(
    name, description, ann, schema, kind
):
    tool = _tool(name, description, ann, schema)
    reason = ToolPolicy().decide(tool)
    on_reset = ToolPolicy(resettable=True).decide(tool)
    if kind == "irreversible":
        assert reason is not None and "--allow-tools" in reason
        assert on_reset is not None  # a reset command does not make an irreversible tool safe
    elif tool.annotations.is_destructive:
        assert reason is not None and "--allow-destructive" in reason
    elif kind == "write" and tool.annotations.destructive is not False:
        # the spec's default for a write that says nothing: maybe not additive; a reset undoes it
        assert reason is not None and "resetCommand" in reason
        assert on_reset is None
    else:
        assert reason is None


def test_allow_destructive_lets_through_annotated_destructive_tools_but_not_unannotated_irreversible_ones():
    policy = ToolPolicy(allow_destructive=True)
    assert policy.decide(_tool("delete_entities", "", OVERWRITE, None)) is None
    assert policy.decide(_tool("write_file", "", OVERWRITE, None)) is None
    assert "--allow-tools" in (policy.decide(_tool("deleteUser", "", None, None)) or "")


def test_an_irreversible_tool_named_in_allow_tools_is_used_with_a_warning(caplog):
    named = ToolPolicy(allow=["delete*", "get_*"])
    tool = _tool("deleteUser", "", None, None)
    with caplog.at_level(logging.WARNING, logger="mcp_rl.servers.policy"):
        allowed, excluded = named.split(
            [tool, _tool("get_item", "", None, None), _tool("sendMail", "", None, None)]
        )
    assert [t.name for t in allowed] == ["deleteUser", "get_item"]
    assert excluded == {"sendMail": "not matched by --allow-tools"}
    assert "deleteUser" in caplog.text and "irreversible" in caplog.text
    assert named.warning(_tool("get_item", "", None, None)) is None
    # a bare wildcard matches everything but names nothing
    assert ToolPolicy(allow=["*"]).decide(tool) is not None


def test_the_inventory_servers_annotated_tools_keep_their_classes():
    async def go():
        async with ServerSession(ServerSpec.parse(INVENTORY), ToolPolicy()) as s:
            return {t.name: classify(t) for t in s.all_tools}, s.excluded

    classes, excluded = anyio.run(go)
    kinds = {name: c.kind for name, c in classes.items()}
    assert kinds == {
        "list_categories": "read", "get_item": "read", "search_items": "read", "filter_items": "read",
        "get_order": "read", "place_order": "write", "update_stock": "write", "set_price": "write",
        "delete_item": "irreversible",
    }  # fmt: skip
    assert classes["get_item"].reason == "annotated read-only"
    assert set(excluded) == {"delete_item"}  # the writes stay usable in training, as before


def test_exploring_a_server_with_no_annotations_calls_its_computations_and_lookups_and_skips_its_write():
    async def go():
        async with ServerSession(ServerSpec.parse(STATS_LAB), ToolPolicy()) as s:
            return await Explorer(s, max_calls=40, seed=0).run()

    result = anyio.run(go)
    ok = {st.tool for st in result.steps if st.ok}
    assert {"sum_numbers", "describe", "percentile", "convert_length", "cities", "note_titles"} <= ok
    called = {st.tool for st in result.steps}
    assert {"city", "rank_cities", "top_sample", "open_note"} <= called
    e = result.stats
    assert "save_note" not in called
    assert "may write" in e.skipped_tools["save_note"] and "resetCommand" in e.skipped_tools["save_note"]
    assert e.explored_tools["convert_length"].startswith("named like a computation")
    assert "save_note" not in e.explored_tools and len(e.explored_tools) == 11


def test_a_write_is_explored_when_a_reset_command_is_given():
    # the reset command restores the notebook: a fresh stdio server is what a reset gives here
    spec = ServerSpec.parse(STATS_LAB).model_copy(update={"reset_command": [PY, "-c", "pass"]})

    async def go():
        async with ServerSession(spec, ToolPolicy(allow=["*_note", "note_*"])) as s:
            return await Explorer(s, max_calls=20, seed=0).run()

    result = anyio.run(go)
    wrote = [st for st in result.steps if st.wrote]
    assert {st.tool for st in wrote} == {"save_note"}
    assert "reset around each call" in result.stats.explored_tools["save_note"]
    assert result.stats.skipped_tools["sum_numbers"] == "excluded from training: not matched by --allow-tools"


def test_an_irreversible_tool_is_never_explored_even_when_training_may_call_it(tmp_path):
    log = tmp_path / "calls.log"
    spec = ServerSpec.parse(f"{FAULTY} --more-faults --call-log {log}")

    async def go():
        async with ServerSession(spec, ToolPolicy(allow=["wipe_all"])) as s:
            return [t.name for t in s.tools], await Explorer(s, allow_destructive=True, max_calls=10).run()

    usable, result = anyio.run(go)
    assert usable == ["wipe_all"]  # named in --allow-tools: training may call it
    assert result.steps == [] and "never explored" in result.stats.skipped_tools["wipe_all"]
    assert not log.exists() or "wipe_all" not in log.read_text()  # the server's own record


SHELF = '''
import json
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

ENTRIES = {f"/shelf/box{i}": "dir" for i in range(4)} | {f"/shelf/note{i}.txt": "file" for i in range(4)}
server = MCPServer("shelf")

@server.tool(description="Everything on the shelf: each entry's path and type.", annotations={"readOnlyHint": True})
def list_shelf() -> str:
    return json.dumps([{"path": p, "type": t} for p, t in sorted(ENTRIES.items())])

@server.tool(description="Open the entry at a path and show what it holds.", annotations={"readOnlyHint": True})
def open_entry(path: str) -> str:
    if ENTRIES.get(path) != "file":
        raise ToolError(f"{path} is not a file")
    return "one line of notes"

server.run(transport="stdio")
'''


def test_after_failing_on_an_entry_of_one_kind_exploration_tries_the_other_kinds(tmp_path):
    # a real stdio server whose listing gives each entry a type, and whose reader fails on directories
    script = tmp_path / "shelf.py"
    script.write_text(SHELF)

    async def go():
        async with ServerSession(ServerSpec.parse(f"{PY} {script}"), ToolPolicy()) as s:
            return await Explorer(s, max_calls=40, seed=0, per_tool=5).run()

    opened = [st for st in anyio.run(go).steps if st.tool == "open_entry"]
    dirs = [st for st in opened if "box" in st.arguments["path"]]
    files = [st for st in opened if "note" in st.arguments["path"]]
    # one failure on a directory is enough: the other calls go to files, and all of those work
    assert len(dirs) <= 1 and len(files) >= 3 and all(st.ok for st in files)
