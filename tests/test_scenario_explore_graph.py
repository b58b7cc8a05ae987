"""Exploring a small server of few tools: the real npm memory server over stdio, on a graph this test
writes. Its three read tools stopped at six calls each, and a search for one entity's name found what a
lookup by name found already (2026-12-07): no fact spanned entries."""

from __future__ import annotations

import json

import anyio
import pytest

from mcp_rl.servers import ServerSession, ServerSpec
from scenario_gen.explorer import Explorer, ExploreResult
from tests.conftest import have

GRAPH = [
    {"type": "entity", "name": "Rui Costa", "entityType": "person", "observations": ["lives in Lisbon", "plays chess"]},
    {"type": "entity", "name": "Lena Costa", "entityType": "person", "observations": ["lives in Lisbon", "a nurse"]},
    {"type": "entity", "name": "Tomas Varga", "entityType": "person", "observations": ["lives in Budapest"]},
    {"type": "entity", "name": "Cafe Aurora", "entityType": "organization", "observations": ["a cafe in Lisbon"]},
    {"type": "relation", "from": "Rui Costa", "to": "Lena Costa", "relationType": "brother of"},
    {"type": "relation", "from": "Lena Costa", "to": "Cafe Aurora", "relationType": "owns"},
]


def _explore(tmp_path, max_calls: int) -> ExploreResult:
    graph = tmp_path / "memory.jsonl"
    graph.write_text("".join(json.dumps(r) + "\n" for r in GRAPH))
    spec = ServerSpec.parse("npx -y @modelcontextprotocol/server-memory", env={"MEMORY_FILE_PATH": str(graph)})

    async def go() -> ExploreResult:
        async with ServerSession(spec.with_connection(connect_timeout=240)) as s:
            return await Explorer(s, model=None, max_calls=max_calls).run()

    return anyio.run(go)


@pytest.mark.npm
@pytest.mark.skipif(not have("npx"), reason="needs node/npx")
@pytest.mark.timeout(600)
def test_a_search_tries_words_several_entries_share_and_few_tools_get_more_calls_each(tmp_path) -> None:
    steps = _explore(tmp_path, max_calls=60).steps
    searches = [s for s in steps if s.tool == "search_nodes" and s.ok]
    # the first searches are for words several entries hold, and their results list those entries
    assert {s.arguments["query"] for s in searches[:2]} == {"Lisbon", "Costa"}
    lisbon = next(s for s in searches if s.arguments["query"] == "Lisbon")
    lisbon = {e["name"] for e in json.loads(lisbon.result_text)["entities"]}
    assert lisbon == {"Rui Costa", "Lena Costa", "Cafe Aurora"}
    # a common word is no search: "lives" finds whoever's notes say it, which no question names well
    assert all(s.arguments["query"][0].isupper() for s in searches)
    # three read tools share the budget the writes leave: more than six calls for the search
    assert len(searches) > 6
    # the control: a budget with nothing to spare keeps six per tool
    small = _explore(tmp_path, max_calls=18).steps
    assert len([s for s in small if s.tool == "search_nodes"]) <= 6
