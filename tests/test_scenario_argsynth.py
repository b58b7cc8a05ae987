"""Arguments synthesized for every schema shape: arrays of numbers, strings and objects, nested
objects, enums, formats, numbers within stated ranges, nullable alternatives and `$ref`s. Every
proposal must fit the schema it was made for."""

from __future__ import annotations

import random
import re

from mcp_rl.answer_rule import result_data
from scenario_gen.argshapes import number_ok, numbers_in_range
from scenario_gen.argsynth import param_candidates, schema_errors, synthesize
from scenario_gen.values import ValuePool


def _obj(required: bool = True, **props) -> dict:
    return {"type": "object", "properties": props, "required": list(props) if required else []}


def _proposals(params: dict, pool: ValuePool | None = None, k: int = 3):
    got = synthesize(params, pool or ValuePool(), random.Random(0), k=k)
    for p in got:
        assert schema_errors(params, p.arguments) == [], p.arguments
    return got


def test_arrays_of_numbers_hold_distinct_entries_within_item_bounds_and_sizes():
    params = _obj(
        readings={
            "type": "array",
            "items": {"type": "number", "exclusiveMinimum": 0, "maximum": 50},
            "minItems": 4,
            "maxItems": 6,
        },
        counts={"type": "array", "items": {"type": "integer", "minimum": 100}, "maxItems": 2},
    )
    got = _proposals(params)
    assert len(got) == 3
    for p in got:
        readings, counts = p.arguments["readings"], p.arguments["counts"]
        assert 4 <= len(readings) <= 6 and len(set(readings)) == len(readings)
        assert 1 <= len(counts) <= 2 and all(isinstance(c, int) and c >= 100 for c in counts)
        assert not p.weak  # numbers for a computation are fair inputs, not placeholders
    assert len({tuple(p.arguments["readings"]) for p in got}) == 3  # each proposal another series


def test_arrays_of_objects_are_built_from_their_item_schema_through_refs():
    raw = {
        "type": "object",
        "$defs": {
            "Sample": {
                "type": "object",
                "properties": {
                    "label": {"type": "string", "description": "A name for the measurement, e.g. 'monday'"},
                    "value": {"type": "number"},
                    "unit": {"enum": ["kg", "lb"]},
                },
                "required": ["label", "value", "unit"],
            }
        },
        "properties": {"samples": {"type": "array", "items": {"$ref": "#/$defs/Sample"}, "minItems": 2}},
        "required": ["samples"],
    }
    got = _proposals(raw)
    samples = got[0].arguments["samples"]
    assert len(samples) >= 2 and all(set(s) == {"label", "value", "unit"} for s in samples)
    assert len({s["label"] for s in samples}) == len(samples)  # monday, tuesday, ...: not one label
    assert len({s["value"] for s in samples}) == len(samples)  # a maximum worth asking about


def test_numbers_stay_within_stated_ranges():
    cases = [
        {"type": "number", "minimum": 0, "maximum": 100},
        {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 3},
        {"type": "number", "minimum": 10, "exclusiveMaximum": True, "maximum": 11},  # draft 4 spelling
        {"type": "integer", "minimum": -40, "multipleOf": 5},
        {"type": "number", "maximum": -1},
        {"type": "integer"},
    ]
    for schema in cases:
        values = numbers_in_range(schema, schema["type"] == "integer")
        assert values, schema
        assert all(number_ok(v, schema) for v in values), (schema, values)
        if not isinstance(schema.get("exclusiveMaximum"), bool):  # draft 4 is not 2020-12's to judge
            assert all(schema_errors(schema, v) == [] for v in values), (schema, values)
    assert numbers_in_range(cases[2], False) == [10.5, 10.25, 10.9]  # 11 itself is excluded
    assert numbers_in_range(cases[0], False) == [50.0, 25.0, 90.0]  # the middle first: a percentile's median


def test_nullable_alternatives_nested_objects_enums_and_formats():
    params = _obj(
        limit={"anyOf": [{"type": "integer", "minimum": 5, "maximum": 9}, {"type": "null"}]},
        label={"type": ["string", "null"], "description": "a tag, e.g. 'urgent'"},
        when={"type": "string", "format": "date"},
        at={"type": "string", "format": "time"},
        ref={"type": "string", "format": "uuid"},
        window={
            "type": "object",
            "properties": {
                "start": {"type": "string", "format": "date-time"},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
                "mode": {"enum": ["fast", "exact"]},
            },
            "required": ["start", "days", "mode"],
        },
    )
    got = _proposals(params)
    a = got[0].arguments
    assert 5 <= a["limit"] <= 9 and a["label"] == "urgent" and a["window"]["mode"] in ("fast", "exact")
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", a["when"]) and re.fullmatch(r"\d{2}:\d{2}:\d{2}", a["at"])
    assert 1 <= a["window"]["days"] <= 7 and "T" in a["window"]["start"]
    assert got[0].weak  # the uuid is a placeholder: no result ever showed one
    # alternatives of several types each give candidates
    either = param_candidates(
        "size", {"anyOf": [{"type": "integer", "minimum": 1}, {"enum": ["auto"]}]}, ValuePool()
    )
    assert {type(c.value) for c in either} == {int, str}


def test_names_from_a_listing_fill_an_array_and_record_the_listing_as_its_source():
    pool = ValuePool()
    pool.add_result(result_data("groceries\ntrip"), step=1, arguments={}, tool="note_titles")
    pool.add_result(
        result_data("Tromso\nBergen\nStavanger\nOslo\nBodo\nMolde"), step=4, arguments={}, tool="cities"
    )
    params = _obj(
        names={"type": "array", "items": {"type": "string"}, "minItems": 2, "uniqueItems": True},
        by={"enum": ["population", "area"], "default": "population"},
    )
    got = _proposals(params, pool, k=4)
    by_source = {tuple(p.sources) for p in got}
    assert (4,) in by_source
    from_cities = [p for p in got if p.sources == [4]]
    assert from_cities[0].arguments["names"] == ["Tromso", "Bergen", "Stavanger"]  # one listing's entries
    assert from_cities[1].arguments["names"] == ["Oslo", "Bodo", "Molde"]  # the next run of them
    assert all(p.origin == "pool" and not p.weak for p in from_cities)


def test_every_proposal_fits_its_schema_whatever_the_shape():
    shapes = [
        {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c", "d"]}, "uniqueItems": True},
        {"type": "array", "items": {"type": "boolean"}, "minItems": 2},
        {"type": "array", "prefixItems": [{"type": "number"}, {"type": "string", "format": "date"}]},
        {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}, "maxItems": 2},
        {
            "type": "object",
            "properties": {"inner": _obj(x={"type": "number", "minimum": 1})},
            "required": ["inner"],
        },
        {"type": "string", "minLength": 3},
        {"oneOf": [{"type": "string", "format": "email"}, {"type": "null"}]},
        {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 2},
        {"type": "array", "items": {"type": "string"}, "maxItems": 0},
    ]
    for i, shape in enumerate(shapes):
        params = _obj(**{f"p{i}": shape})
        assert _proposals(params), shape


def test_paths_the_server_was_started_on_are_offered_to_path_parameters(tmp_path):
    from scenario_gen.argsynth import param_candidates
    from scenario_gen.values import ValuePool, launch_paths

    repo = tmp_path / "repo"
    repo.mkdir()
    (tmp_path / "server.py").write_text("")
    command = ["uvx", "mcp-server-git", "--repository", str(repo), f"--db={tmp_path}/missing.db", "--token", "abc",
               str(tmp_path / "server.py"), "./repo"]  # fmt: skip
    # only what exists, and not a program: a missing path or a token is never taken (it may be a secret)
    assert launch_paths(command, cwd=str(tmp_path)) == [str(repo)]
    pool = ValuePool(launch_paths=[str(repo)])
    assert next(c.value for c in param_candidates("repo_path", {"type": "string"}, pool)) == str(repo)
    array = {"type": "array", "items": {"type": "string"}}
    assert str(repo) in next(c.value for c in param_candidates("paths", array, pool))
    assert str(repo) not in [c.value for c in param_candidates("message", {"type": "string"}, pool)]


LOG = (
    "Commit: 9f1c2ab7e0\nAuthor: Rosa Lind\nDate: 2025-03-02 10:15:00+01:00\nMessage: Add the importer\n\n"
    "Commit: 31d0e4c9aa\nAuthor: Tomas Berg\nDate: 2025-02-20 17:40:00+01:00\nMessage: First commit\n"
)


def test_a_parameter_takes_the_values_its_description_names_or_for_a_time_the_times_seen():
    pool = ValuePool()
    pool.add_result(result_data(LOG), step=3, arguments={}, tool="log")
    # `contains` names nothing a result showed; its description names the log's `commit`
    described = {"type": "string", "description": "The commit sha that a branch should contain"}
    got = param_candidates("contains", described, pool)
    assert [c.value for c in got[:2]] == ["9f1c2ab7e0", "31d0e4c9aa"] and got[0].steps == (3,)
    assert got[0].weight < param_candidates("commit", {"type": "string"}, pool)[0].weight  # less sure
    # a time parameter takes the times results showed, never what its description also names
    timed = {"type": "string", "description": "Start timestamp for filtering commits"}
    assert [c.value for c in param_candidates("start_timestamp", timed, pool)][:2] == [
        "2025-03-02 10:15:00+01:00",
        "2025-02-20 17:40:00+01:00",
    ]
    # a description naming nothing seen adds nothing
    assert "9f1c2ab7e0" not in [c.value for c in param_candidates("label", {"type": "string", "description": "A tag"}, pool)]


def test_a_required_parameter_nothing_fills_takes_the_values_the_tool_description_names():
    pool = ValuePool()
    pool.add_result(result_data(LOG), step=3, arguments={}, tool="log")
    params = _obj(revision={"type": "string", "description": "Revision"})
    assert all(p.weak for p in synthesize(params, pool, random.Random(0), k=2))  # "example", a guess
    got = synthesize(params, pool, random.Random(0), k=2, context="Shows the contents of a commit")
    assert [p.arguments["revision"] for p in got] == ["9f1c2ab7e0", "31d0e4c9aa"] and got[0].sources == [3]
