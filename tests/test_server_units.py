"""Schema conversion, argument validation, server specs, the safety policy, result rendering."""

from __future__ import annotations

import json

import mcp_types as mt
import pytest

from mcp_rl.errors import ConfigError
from mcp_rl.servers import CallStatus, ServerSpec, ToolAnnotations, ToolPolicy, ToolSpec
from mcp_rl.servers.result_text import cut, normalize_call_result
from mcp_rl.servers.schema import schema_problem, to_openai_parameters, validate_arguments

NESTED = {
    "$defs": {
        "Line": {
            "type": "object",
            "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
            "required": ["sku", "qty"],
        },
        "Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}},
    },
    "type": "object",
    "properties": {
        "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}, "description": "Order lines"},
        "coupon": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Coupon"},
        "note": {"type": ["string", "null"]},
        "tree": {"$ref": "#/$defs/Node"},
    },
    "required": ["lines", "missing_prop"],
}


def _keys(node) -> set[str]:
    if isinstance(node, dict):
        return set(node) | set().union(*(_keys(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_keys(v) for v in node)) if node else set()
    return set()


def test_refs_resolved_and_nullables_simplified():
    p = to_openai_parameters(NESTED)
    assert not {"$ref", "$defs"} & _keys(p)
    line = p["properties"]["lines"]["items"]
    assert line["properties"]["qty"] == {"type": "integer", "minimum": 1}
    assert p["properties"]["coupon"]["type"] == "string" and p["properties"]["coupon"]["nullable"] is True
    assert p["properties"]["coupon"]["description"] == "Coupon"
    assert p["properties"]["note"] == {"type": "string", "nullable": True, "description": "note"}
    # recursion stops instead of looping forever
    assert p["properties"]["tree"]["properties"]["child"]["type"] == "object"
    # required names that are not properties are dropped (they would confuse the model)
    assert p["required"] == ["lines"]


@pytest.mark.parametrize("schema", [None, {}, {"type": "object"}, {"properties": {}}, {"type": "string"}, []])
def test_degenerate_schemas_become_empty_objects(schema):
    p = to_openai_parameters(schema)
    assert p["type"] == "object" and isinstance(p["properties"], dict)


def test_validation_uses_original_schema():
    assert validate_arguments(NESTED, {"lines": [{"sku": "A", "qty": 2}], "missing_prop": 1}) == []
    errs = validate_arguments(NESTED, {"lines": [{"sku": "A", "qty": 0}]})
    assert any("missing_prop" in e for e in errs)
    assert any("lines/0/qty" in e and "minimum" in e for e in errs)
    assert validate_arguments(NESTED, "not a dict") == ["arguments must be a JSON object, got str"]


def test_broken_schema_is_reported_not_fatal():
    bad = {"type": "object", "properties": {"x": {"type": "no-such-type"}}}
    assert "invalid JSON Schema" in (schema_problem(bad) or "")
    assert validate_arguments(bad, {"x": 1}) == []  # the server decides


def test_parse_url_and_commands():
    assert ServerSpec.parse("http://127.0.0.1:8000/mcp").transport == "http"
    assert ServerSpec.parse("https://example.org/sse").transport == "sse"
    s = ServerSpec.parse("uvx mcp-server-time --local-timezone 'Europe/Paris'")
    assert s.transport == "stdio" and s.command == [
        "uvx",
        "mcp-server-time",
        "--local-timezone",
        "Europe/Paris",
    ]
    assert s.name == "mcp-server-time"
    assert ServerSpec.parse("npx -y @modelcontextprotocol/server-memory").name == "server-memory"
    with pytest.raises(ConfigError):
        ServerSpec.parse("  ")
    with pytest.raises(ConfigError, match="quoting"):
        ServerSpec.parse("uvx 'unclosed")


def test_config_file(tmp_path):
    cfg = tmp_path / "mcp.json"
    cfg.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"API_KEY": "sekrit-123"}},
                    "remote": {
                        "url": "http://127.0.0.1:9/mcp",
                        "headers": {"Authorization": "Bearer tok-456"},
                    },
                    "legacy": {"url": "http://127.0.0.1:9/messages", "type": "sse"},
                }
            }
        )
    )
    t = ServerSpec.from_config(cfg, "time")
    assert t.command == ["uvx", "mcp-server-time"] and t.env == {"API_KEY": "sekrit-123"}
    r = ServerSpec.from_config(cfg, "remote")
    assert r.transport == "http" and r.headers["Authorization"] == "Bearer tok-456"
    assert ServerSpec.from_config(cfg, "legacy").transport == "sse"
    # secrets never shown
    for spec in (t, r):
        shown = json.dumps(spec.public()) + repr(spec) + str(spec)
        assert "sekrit-123" not in shown and "tok-456" not in shown
    with pytest.raises(ConfigError, match="choose one with --name"):
        ServerSpec.from_config(cfg)
    with pytest.raises(ConfigError, match="available: time, remote, legacy"):
        ServerSpec.from_config(cfg, "nope")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "no 'mcpServers'"),
        ('{"mcpServers": {}}', "no 'mcpServers'"),
        ('{"mcpServers": {"a": 3}}', "is not an object"),
        ('{"mcpServers": {"a": {"args": ["x"]}}}', "neither 'command' nor 'url'"),
        ('{"mcpServers": {"a": {"command": "x", "args": "y"}}}', "args must be a list"),
        ('{"mcpServers": {"a": {"command": "x", "env": [1]}}}', "env must be an object"),
    ],
)
def test_malformed_config(tmp_path, content, message):
    cfg = tmp_path / "bad.json"
    cfg.write_text(content)
    with pytest.raises(ConfigError, match=message):
        ServerSpec.from_config(cfg)


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        ServerSpec.from_config(tmp_path / "absent.json")


def _tool(name, **ann):
    return ToolSpec(name=name, annotations=ToolAnnotations(**ann))


def test_policy():
    tools = [
        _tool("get_item", read_only=True),
        _tool("delete_item", destructive=True),
        _tool("drop_table"),  # no annotations, destructive name
        _tool("remove_note", destructive=False),  # says it is not destructive
        _tool("update_stock", read_only=False, destructive=False),
    ]
    allowed, excluded = ToolPolicy().split(tools)
    assert [t.name for t in allowed] == ["get_item", "remove_note", "update_stock"]
    assert "annotated destructive" in excluded["delete_item"] and "named 'drop'" in excluded["drop_table"]
    allowed, excluded = ToolPolicy(allow_destructive=True, deny=["update_*"]).split(tools)
    # an unannotated irreversible tool is not the server's word: --allow-destructive leaves it off
    assert "update_stock" in excluded and "--allow-tools" in excluded["drop_table"]
    assert [t.name for t in allowed] == ["get_item", "delete_item", "remove_note"]
    allowed, _ = ToolPolicy(allow=["get_*", "delete_*"]).split(tools)
    assert [t.name for t in allowed] == ["get_item", "delete_item"]  # named by a pattern the user wrote
    allowed, _ = ToolPolicy(allow=["*"]).split(tools)
    assert "delete_item" not in [t.name for t in allowed]  # `*` names no tool


def test_render_all_content_kinds():
    png = "iVBORw0KGgo="
    result = mt.CallToolResult(
        content=[
            mt.TextContent(type="text", text="hello"),
            mt.ImageContent(type="image", data=png, mime_type="image/png"),
            mt.EmbeddedResource(
                type="resource",
                resource=mt.TextResourceContents(uri="file:///a.txt", text="inside", mime_type="text/plain"),
            ),
            mt.EmbeddedResource(
                type="resource",
                resource=mt.BlobResourceContents(uri="file:///b.bin", blob=png, mime_type="application/x"),
            ),
            mt.ResourceLink(type="resource_link", uri="file:///c", name="c"),
        ]
    )
    r = normalize_call_result(result, budget=1000)
    assert r.status is CallStatus.OK
    assert "hello" in r.text and "[image: image/png, 8 bytes]" in r.text and "inside" in r.text
    assert (
        "[resource file:///b.bin: application/x, 8 bytes]" in r.text
        and "[resource link: file:///c (c)]" in r.text
    )


@pytest.mark.parametrize(
    ("text", "is_error", "status"),
    [
        ("Error: no such table", False, CallStatus.TOOL_ERROR),
        ("error executing query", False, CallStatus.TOOL_ERROR),
        ("Database error: no such table: nope", False, CallStatus.TOOL_ERROR),
        ("Traceback (most recent call last):", False, CallStatus.TOOL_ERROR),
        ("The error rate was 3%", False, CallStatus.OK),
        ("All good, no errors: 0", False, CallStatus.OK),
        ("anything", True, CallStatus.TOOL_ERROR),
    ],
)
def test_three_ways_of_failing(text, is_error, status):
    result = mt.CallToolResult(content=[mt.TextContent(type="text", text=text)], is_error=is_error)
    assert normalize_call_result(result, budget=100).status is status


def test_structured_only_and_cut():
    result = mt.CallToolResult(content=[], structured_content={"count": 3})
    assert normalize_call_result(result, budget=100).text == '{"count": 3}'
    text, truncated = cut("x" * 50, 10)
    assert truncated and text.startswith("x" * 10) and "truncated: showing 10 of 50" in text
