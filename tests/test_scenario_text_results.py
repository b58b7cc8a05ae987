"""Plain-text tool results read as data: the shapes real servers return (a filesystem listing with
[FILE]/[DIR] tags, a git log of `Key: value` blocks, a file's `key: value` info, one name per line).
The strings are our own, in those servers' output shapes."""

from __future__ import annotations

import json

from judges.faithful import reference_supported, unsupported_values
from mcp_rl.answer_rule import apply_rule, result_data, result_json
from mcp_rl.task import AnswerRule
from scenario_gen.facts import extract_facts
from scenario_gen.values import ValuePool

LISTING = "[FILE] budget.csv\n[DIR] drafts\n[FILE] readme.md"
GIT_LOG = (
    "Commit: '4c1e9a0b7d'\n"
    "Author: Marta Silva <marta@example.org>\n"
    "Date: 2025-05-14 16:05:00+01:00\n"
    "Message: 'Fix the tax rounding'\n"
    "\n"
    "Commit: '0d77f3e215'\n"
    "Author: Joel Brandt <joel@example.org>\n"
    "Date: 2025-05-12 08:40:00+01:00\n"
    "Message: 'First draft of the report'\n"
)
FILE_INFO = "size: 2048\ncreated: Tue May 13 2025 09:12:44 GMT+0000\nisDirectory: false\nisFile: true\npermissions: 644"
CITIES = "Tromso\nBergen\nStavanger"


def _facts_by_answer(text: str, arguments: dict | None = None):
    facts = extract_facts(text, arguments)
    for f in facts:  # every fact is re-derived by the rule a grader applies
        assert apply_rule(f.rule, [text]) == f.answer, f
    return {f.answer: f for f in facts}


def test_a_tagged_listing_reads_as_entries_with_their_tag_and_gives_counts_and_names():
    assert result_data(LISTING) == [
        {"type": "FILE", "name": "budget.csv"},
        {"type": "DIR", "name": "drafts"},
        {"type": "FILE", "name": "readme.md"},
    ]
    facts = _facts_by_answer(LISTING, {"path": "/home/ana/work"})
    assert facts["3"].rule.kind == "count"
    assert facts["budget.csv, drafts, readme.md"].rule.kind == "names"
    kind = facts["DIR"]
    assert kind.mentions == [["drafts"]] and kind.rule.path == [{"key": "name", "equals": "drafts"}, "type"]
    # the rule follows the entry, not its line
    assert apply_rule(kind.rule, ["[FILE] readme.md\n[DIR] drafts"]) == "DIR"


def test_a_git_log_reads_as_one_record_per_block():
    records = result_data(GIT_LOG)
    assert isinstance(records, list) and len(records) == 2
    assert records[0] == {
        "commit": "4c1e9a0b7d",  # the quotes a repr put around it are gone
        "author": "Marta Silva <marta@example.org>",
        "date": "2025-05-14 16:05:00+01:00",
        "message": "Fix the tax rounding",
    }
    facts = _facts_by_answer(GIT_LOG)
    # a commit is named by its message, not its hash: no one asks "who wrote 0d77f3e215?"
    assert facts["Joel Brandt <joel@example.org>"].mentions == [["First draft of the report"]]
    assert ["First draft of the report"] in facts["0d77f3e215"].mentions
    assert all(["0d77f3e215"] not in f.mentions for f in facts.values())
    assert facts["First draft of the report"].rule.path[-1] == "message"
    assert facts["16:05"].rule.transform == "time_hhmm"  # a timestamp is asked as a time of day
    assert facts["2"].rule.kind == "count"


def test_a_record_is_not_asked_about_by_fields_that_fit_several_records():
    same_author = GIT_LOG.replace("Joel Brandt <joel@example.org>", "Marta Silva <marta@example.org>")
    facts = extract_facts(same_author)
    # "the message of Marta's commit" has two answers: no such question
    assert not [f for f in facts if f.rule.path[-1:] == ["message"] and len(f.mentions) == 1]
    assert {f.answer for f in facts} >= {"4c1e9a0b7d", "0d77f3e215"}  # each hash, by its message


def test_a_key_value_reply_is_one_record_with_typed_values():
    info = result_data(FILE_INFO)
    assert info == {
        "size": 2048,
        "created": "Tue May 13 2025 09:12:44 GMT+0000",
        "is_directory": False,
        "is_file": True,
        "permissions": 644,
    }
    facts = extract_facts(FILE_INFO, {"path": "/home/ana/work/budget.csv"})
    size = next(f for f in facts if f.rule.path == ["size"])
    assert size.answer == "2048" and apply_rule(size.rule, [FILE_INFO.replace("2048", "4096")]) == "4096"
    assert any(f.rule.path == ["is_file"] and f.answer == "yes" for f in facts)
    # one line is a record too: the value of that line's key
    assert apply_rule(AnswerRule(kind="field", path=["free_space"]), ["Free space: 12.5"]) == "12.5"


GIT_SHOW = (  # a commit as `git show` prints it: header, message, then the patch
    "commit 9f1c2ab\nAuthor: Marta Silva <marta@example.org>\nDate:   2025-05-14 16:05:00 +0100\n\n"
    "    Fix the tax rounding\n\n"
    "--- a/report/tax.py\n+++ b/report/tax.py\n@@ -3,3 +3,3 @@ def tax(x):\n     rate = 0.2\n"
    "--- return x * rate\n+    return round(x * rate, 2)\n \n"
    "--- /dev/null\n+++ b/NOTES\n@@ -0,0 +1,2 @@\n+rounding fixed\n+see tax.py\n"
    "\\ No newline at end of file\n"
)


def test_a_unified_diff_reads_as_the_files_it_changes():
    # the hunk body is read by its header's line counts: the removed line "--- return ..." is no
    # file header, and a created file goes by the name that is not /dev/null
    assert result_data(GIT_SHOW) == {
        "files_changed": [
            {"file": "report/tax.py", "added_line_count": 1, "removed_line_count": 1},
            {"file": "NOTES", "added_line_count": 2, "removed_line_count": 0},
        ]
    }
    assert _facts_by_answer(GIT_SHOW)["report/tax.py, NOTES"].rule.kind == "names"
    facts = extract_facts(GIT_SHOW)
    assert any(f.rule.kind == "count" and f.answer == "2" for f in facts)
    assert any(f.rule.path[-1] == "added_line_count" and f.mentions == [["NOTES"]] and f.answer == "2" for f in facts)
    # a diff's lines are still no listing ("+0.1.0" was once offered as a file's name)
    diff = "Diff with 9f1c2ab:\ndiff --git a/VERSION b/VERSION\n--- a/VERSION\n+++ b/VERSION\n@@ -1 +1 @@\n-0.1.0\n+0.2.0"
    assert result_data(diff) == {"files_changed": [{"file": "VERSION", "added_line_count": 1, "removed_line_count": 1}]}
    assert "0.2.0" not in _facts_by_answer(diff) and "+0.2.0" not in _facts_by_answer(diff)
    assert result_data("  feature/charts\n* main") == ["feature/charts", "main"]  # a listing still is


def test_a_number_of_things_must_be_asked_as_how_many():
    from scenario_gen.grounded import counted

    added = lambda f: f.rule.path[-1] == "added_line_count"  # noqa: E731
    assert counted(next(f for f in extract_facts(GIT_SHOW) if added(f)))
    assert not any(counted(f) for f in extract_facts(FILE_INFO))  # a size, permissions: no count
    args = {"revision": "9f1c2ab"}
    asked = ["What line was added to NOTES in commit 9f1c2ab?"] * 3
    task, problems = write(GIT_SHOW, args, lambda f: added(f) and f.answer == "2", asked)
    assert task is None and sum(problems.values()) == 1
    task, _ = write(GIT_SHOW, args, lambda f: added(f) and f.answer == "2", [asked[0], "How many lines did commit 9f1c2ab add to NOTES?"])
    assert task is not None and task.reference_answer == "2"
    # nor may it copy a field's name: no user asks for "entries in the `files_changed` list"
    is_count = lambda f: f.rule.kind == "count"  # noqa: E731
    copied = ["How many entries are in the `files_changed` list of commit 9f1c2ab?"] * 3
    assert write(GIT_SHOW, args, is_count, copied)[0] is None
    task, _ = write(GIT_SHOW, args, is_count, [copied[0], "How many files did commit 9f1c2ab change?"])
    assert task is not None and task.reference_answer == "2"


def test_an_id_of_an_entry_with_no_name_may_be_named_by_the_entry_s_handle():
    """A commit has no name field: its hash is offered as "the commit 'Fix the tax rounding'", first,
    so a question can say what a person says and the solver must look the hash up."""
    from mcp_rl.servers.results import CallStatus
    from scenario_gen.explorer import ExploreResult, ExploreStats, Step
    from scenario_gen.grounded import GroundedWriter

    # one author made two of the commits: the message is what tells them apart
    log = GIT_LOG + "\nCommit: '77ab01c3e9'\nAuthor: Marta Silva <marta@example.org>\nDate: 2025-05-10 11:00:00+01:00\nMessage: 'Start'\n"
    pool = ValuePool()
    pool.add_result(result_data(log), 0, {"repo_path": "/srv/repo"})
    assert {(v.value, v.context_name) for v in pool.candidates("commit")} == {
        ("4c1e9a0b7d", "Fix the tax rounding"),
        ("0d77f3e215", "First draft of the report"),
        ("77ab01c3e9", "Start"),
    }
    steps = [
        Step(0, "git_log", {"repo_path": "/srv/repo"}, CallStatus.OK, log),
        Step(1, "git_show", {"repo_path": "/srv/repo", "revision": "4c1e9a0b7d"}, CallStatus.OK, GIT_SHOW, [0]),
    ]
    picked = GroundedWriter(None, []).candidates(ExploreResult(steps, pool, ExploreStats()), 100)  # type: ignore[arg-type]
    shows = [c for c in picked if c.chain[-1].index == 1]
    assert shows and all(["Fix the tax rounding", "4c1e9a0b7d"] in c.mentions for c in shows)
    assert all(len(c.chain) == 2 for c in shows)  # the log that found the hash comes with it


def test_a_list_marker_is_not_part_of_an_entry():
    # git marks the current branch with "* "; markdown lists use "- " or "* "; a sign is no marker
    assert result_data("- milk\n- eggs") == ["milk", "eggs"]
    assert result_data("\u2022 Oslo\n\u2022 Bergen") == ["Oslo", "Bergen"]
    assert result_data("-5\n-12") == ["-5", "-12"]
    facts = _facts_by_answer("  feature/charts\n  fix/rounding\n* main")
    assert "feature/charts, fix/rounding, main" in facts and not any("*" in a for a in facts)


def test_a_plain_listing_gives_a_count_and_its_entries():
    assert result_data(CITIES) == ["Tromso", "Bergen", "Stavanger"]
    facts = _facts_by_answer(CITIES)
    assert facts["3"].rule.kind == "count"
    entries = facts["Tromso, Bergen, Stavanger"]
    assert entries.rule == AnswerRule(kind="names", path=[])
    # JSON lists of plain strings get the same facts
    assert {f.answer for f in extract_facts(json.dumps(["red", "teal"]))} == {"2", "red, teal"}


def test_json_stays_json_and_other_text_stays_whole():
    text = '{"items": [{"name": "Kettle", "price": 24.5}]}'
    assert result_data(text) == result_json(text)
    assert result_data("3.048 m") is None  # one plain line: only the whole reply answers
    prose = "The report was sent.\n\nIt will arrive tomorrow, or the day after if the post is slow today."
    assert result_data(prose) is None
    assert result_data("12:30\n14:45") == ["12:30", "14:45"]  # clock times are no `Key: value`
    assert extract_facts("3.048 m")[0].rule.kind == "text"
    # a rule stored before text was data reads the same as it did
    assert apply_rule(AnswerRule(kind="text"), [CITIES]) == CITIES
    assert apply_rule(AnswerRule(kind="field", path=["price"]), ['{"price": 3}']) == "3"


def test_a_count_that_only_repeats_the_list_the_call_was_given_is_no_question():
    text = json.dumps({"count": 3, "mean": 12.6667, "maximum": 19.0})
    facts = extract_facts(text, {"numbers": [12.0, 7.0, 19.0]})
    assert not any(f.rule.path == ["count"] for f in facts)
    assert any(f.rule.path == ["maximum"] and f.answer == "19" for f in facts)
    ranked = json.dumps([{"name": "Bergen", "population": 291940}, {"name": "Tromso", "population": 77544}])
    assert not any(f.rule.kind == "count" for f in extract_facts(ranked, {"names": ["Tromso", "Bergen"]}))


def test_the_value_pool_learns_names_paths_and_listing_nouns_from_text():
    pool = ValuePool()
    pool.add_result(result_data(LISTING), step=2, arguments={"path": "/home/ana/work"}, tool="list_directory")
    assert [v.value for v in pool.candidates("path")] == [
        "/home/ana/work/budget.csv",
        "/home/ana/work/drafts",
        "/home/ana/work/readme.md",
    ]
    assert all(v.step == 2 for v in pool.candidates("file_path"))  # `file_path` <- `path`
    pool.add_result(result_data(CITIES), step=5, arguments={}, tool="cities")
    assert [v.value for v in pool.candidates("city")] == ["Tromso", "Bergen", "Stavanger"]
    assert "Bergen" in [v.value for v in pool.candidates("name")]
    pool.add_result(result_data("groceries\ntrip"), step=6, arguments={}, tool="note_titles")
    assert [(v.value, v.step) for v in pool.candidates("title")] == [("groceries", 6), ("trip", 6)]
    # what the call was given, at any depth, is an echo
    pool.add_result({"label": "monday", "value": 21.0}, 7, {"samples": [{"label": "monday", "value": 21.0}]})
    assert "label" not in pool.by_key and "value" not in pool.by_key


def test_grading_accepts_a_count_or_entries_read_from_a_text_listing():
    # a listing's length is a value the result holds, as a JSON list's length is
    assert unsupported_values("There are 3 cities.", "How many cities are there?", [CITIES]) == []
    assert reference_supported("3", [CITIES])
    assert reference_supported("Tromso, Bergen, Stavanger", [CITIES])
    assert unsupported_values("There are 4 cities.", "How many cities are there?", [CITIES]) == ["4"]


def test_a_csv_file_reads_as_rows_so_its_count_excludes_the_header():
    csv = "month,rainfall_mm\njanuary,88.5\nfebruary,61\nmarch,70.25\n"
    assert result_data(csv) == [
        {"month": "january", "rainfall_mm": 88.5},
        {"month": "february", "rainfall_mm": 61},
        {"month": "march", "rainfall_mm": 70.25},
    ]
    facts = {f.what: f for f in extract_facts(csv)}
    assert facts["how many entries"].answer == "3"
    rainfall = [f for f in facts.values() if "rainfall_mm" in f.what and "february" in f.what]
    assert rainfall and apply_rule(rainfall[0].rule, [csv]) == "61"
    # a list whose entries merely contain commas is no table
    assert result_data("passport\ncharger, phone\n") == ["passport", "charger, phone"]


def test_a_heading_line_is_not_an_entry_and_a_file_placeholder_is_no_answer():
    listing = "Allowed directories:\n/srv/a\n/srv/b"
    assert result_data(listing) == ["/srv/a", "/srv/b"]
    assert {f.answer for f in extract_facts(listing) if f.rule.kind == "count"} == {"2"}
    assert extract_facts("[resource file:///srv/a/x.md: application/octet-stream, 66 bytes]") == []


def test_a_node_date_reads_as_a_time_and_a_yes_no_fact_avoids_its_sibling_flags():
    from mcp_rl.answer_rule import parse_datetime

    assert parse_datetime("Tue May 13 2025 09:12:44 GMT+0000 (Coordinated Universal Time)").hour == 9
    facts = extract_facts(FILE_INFO, {"path": "/home/ana/work/budget.csv"})
    created = next(f for f in facts if f.rule.path == ["created"])
    assert created.answer == "09:12" and created.rule.transform == "time_hhmm"  # not the raw JS string
    is_file = next(f for f in facts if f.rule.path == ["is_file"])
    is_dir = next(f for f in facts if f.rule.path == ["is_directory"])
    # measured: "Is the file '/work/exp/tp/files' a directory?" was written for `isFile` (answer "no")
    assert "directory" in is_file.avoid and "file" not in is_file.avoid
    assert "file" in is_dir.avoid
    assert created.avoid == []  # the only time in this record: nothing to confuse it with


def test_a_time_fact_avoids_its_sibling_times():
    # measured: two filesystem questions asked when a file was created and read `modified`
    info = FILE_INFO + "\nmodified: Wed May 14 2025 17:40:02 GMT+0000"
    facts = extract_facts(info, {"path": "/home/ana/work/budget.csv"})
    modified = next(f for f in facts if f.rule.path == ["modified"])
    assert modified.answer == "17:40" and "created" in modified.avoid and "modified" not in modified.avoid
    created = next(f for f in facts if f.rule.path == ["created"])
    assert "modified" in created.avoid and "size" not in created.avoid


def test_counts_and_names_of_a_listing_of_several_kinds_carry_the_kinds():
    facts = _facts_by_answer(LISTING)
    for answer in ("3", "budget.csv, drafts, readme.md"):
        assert [k[0] for k in facts[answer].kinds] == ["file", "dir"]
        assert "directories" in facts[answer].kinds[1]
    assert _facts_by_answer("[FILE] a.csv\n[FILE] b.csv")["2"].kinds == []  # one kind: nothing to confuse


def test_a_report_of_nothing_found_or_of_an_error_is_no_answer():
    for text in (
        "No matches found",
        "/srv/files: Error - EISDIR: illegal operation on a directory, read",
        "(the tool returned no content)",  # git's remote branches of a repository with none
        "Diff with 43cb800cc5794472c8e3e7dd4d42ca423dd228ca:",  # a heading with nothing under it
    ):
        assert extract_facts(text) == []
    assert [f.answer for f in extract_facts("3.048 m")] == ["3.048 m"]


class _Scripted:
    """A writer model that replies with the questions it is given, in order (the checks on a question
    are what is under test, not the model's wording)."""

    name = "scripted"

    def __init__(self, questions):
        self.questions = list(questions)

    async def chat(self, messages, tools=None, n=1, sampling=None):
        from mcp_rl.models.base import Completion

        return [Completion(text=json.dumps({"question": self.questions.pop(0)}))]


def write(text, args, pick, questions):
    """The grounded task the writer keeps for the first fact `pick` chooses, and its problems."""
    import anyio

    from mcp_rl.servers.results import CallStatus
    from scenario_gen.explorer import Step
    from scenario_gen.grounded import Candidate, GroundedWriter

    step = Step(index=0, tool="stat", arguments=args, status=CallStatus.OK, result_text=text)
    fact = next(f for f in extract_facts(text, args) if pick(f))
    writer = GroundedWriter(_Scripted(questions), [], seed=0)
    task = anyio.run(writer.write, Candidate([step], fact, [[v] for v in args.values()]))
    return task, writer.problems


def test_the_grounded_writer_rejects_a_question_about_another_flag_or_only_some_kinds():
    path = {"path": "/home/ana/files/budget.csv"}
    is_file = lambda f: f.rule.path == ["is_file"]  # noqa: E731
    task, problems = write(FILE_INFO, path, is_file, [f"Is {path['path']} a directory?"] * 3)
    assert task is None and list(problems) == ["question rejected (asked for something else)"]
    task, _ = write(FILE_INFO, path, is_file, [f"Is {path['path']} a directory?", f"Is {path['path']} a file?"])
    assert task is not None and task.text.endswith("a file?") and task.reference_answer == "yes"

    listing = {"path": "/home/ana/files"}
    count = lambda f: f.rule.kind == "count"  # noqa: E731
    ask = [f"How many directories are in {listing['path']}?"] * 3
    task, problems = write(LISTING, listing, count, ask)
    assert task is None and list(problems) == ["question rejected (asked for something else)"]
    task, _ = write(LISTING, listing, count, [f"How many files and folders are in {listing['path']}?"])
    assert task is not None and task.reference_answer == "3"


GRAPH = json.dumps(
    {
        "entities": [
            {"type": "entity", "name": "Ines Moreau", "entityType": "person"},
            {"type": "entity", "name": "Paul Moreau", "entityType": "person"},
            {"type": "entity", "name": "Anna Weber", "entityType": "person"},
        ],
        "relations": [
            {"type": "relation", "from": "Ines Moreau", "to": "Paul Moreau", "relationType": "married to"},
            {"type": "relation", "from": "Anna Weber", "to": "Ines Moreau", "relationType": "friend of"},
            {"type": "relation", "from": "Paul Moreau", "to": "Anna Weber", "relationType": "knows"},
        ],
    }
)


def test_a_count_of_every_entry_may_not_name_some_entries_nor_talk_about_the_output():
    graph = {"graph": "family"}
    relations = lambda f: f.rule.kind == "count" and f.rule.path == ["relations"]  # noqa: E731
    # the question names two of the entries: it asks how many relations join them (1), not all 3
    narrowed = "How many relationships are there between 'Ines Moreau' and Paul Moreau in the family graph?"
    task, problems = write(GRAPH, graph, relations, [narrowed] * 3)
    assert task is None and list(problems) == ["question rejected (asked for something else)"]
    meta = "How many relations are listed in the output for the family graph?"
    task, problems = write(GRAPH, graph, relations, [meta] * 3)
    assert task is None and list(problems) == ["question rejected (talked about the data, not as a user)"]
    # a field the same in every entry (`type: relation`) names them all, not some
    task, _ = write(GRAPH, graph, relations, ["How many relations does the family graph hold?"])
    assert task is not None and task.reference_answer == "3"


def test_a_listing_of_names_that_are_not_files_gives_no_paths():
    pool = ValuePool()
    pool.add_result(result_data("  feature/charts\n  fix/rounding\n* main"), 0, {"repo_path": "/srv/repo"})
    assert "path" not in pool.by_key  # branch names, not files under the repository
    pool.add_result(result_data("notes.txt\ndocs/\nREADME.md"), 1, {"path": "/srv/repo"})
    assert [v.value for v in pool.by_key["path"]] == ["/srv/repo/notes.txt", "/srv/repo/docs/", "/srv/repo/README.md"]


def test_an_argument_that_changed_nothing_is_not_asked_of_a_question():
    from mcp_rl.servers.results import CallStatus
    from scenario_gen.explorer import ExploreResult, ExploreStats, Step
    from scenario_gen.grounded import GroundedWriter

    other = GIT_LOG.replace("Fix the tax rounding", "Fix the VAT rounding")
    steps = [
        Step(0, "git_log", {"repo_path": "/srv/r"}, CallStatus.OK, GIT_LOG),
        # a made-up date filter that returned the same log: its facts would make a question state it
        Step(1, "git_log", {"repo_path": "/srv/r", "since": "2 weeks ago"}, CallStatus.OK, GIT_LOG),
        # a filter that did change the result stays a question of its own
        Step(2, "git_log", {"repo_path": "/srv/r", "author": "Marta"}, CallStatus.OK, other),
    ]
    explore = ExploreResult(steps, ValuePool(), ExploreStats())
    picked = GroundedWriter(None, []).candidates(explore, 100)  # type: ignore[arg-type]
    used = {c.chain[-1].index for c in picked}
    assert used == {0, 2}
    assert not any(["2 weeks ago"] in c.mentions for c in picked)


def test_a_fact_two_calls_give_is_asked_through_the_one_with_fewer_given_values():
    from mcp_rl.servers.results import CallStatus
    from scenario_gen.explorer import ExploreResult, ExploreStats, Step
    from scenario_gen.grounded import GroundedWriter

    older = "\nCommit: '9e0c11d4aa'\nAuthor: Ana Lopes <ana@example.org>\nDate: 2025-05-02 10:00:00+01:00\nMessage: 'Init'\n"
    stamp = "2025-05-10 00:00:00+01:00"
    steps = [
        Step(0, "git_log", {"repo_path": "/srv/r"}, CallStatus.OK, GIT_LOG + older),
        Step(1, "git_log", {"repo_path": "/srv/r", "start_timestamp": stamp}, CallStatus.OK, GIT_LOG),
        # the same reply for another file: the same field and answer, yet another fact
        Step(2, "stat", {"path": "/srv/a.txt"}, CallStatus.OK, FILE_INFO),
        Step(3, "stat", {"path": "/srv/b.txt"}, CallStatus.OK, FILE_INFO),
    ]
    explore = ExploreResult(steps, ValuePool(), ExploreStats())
    picked = GroundedWriter(None, []).candidates(explore, 200)  # type: ignore[arg-type]
    dated = [c for c in picked if [stamp] in c.mentions]
    # Marta's message is in both logs: asked without the timestamp; only what the filter changed keeps it
    marta = [c for c in picked if c.fact.answer == "Fix the tax rounding"]
    assert marta and all([stamp] not in c.mentions for c in marta)
    assert dated and {c.fact.answer for c in dated} <= {"2", "Fix the tax rounding, First draft of the report"}
    perms = [c for c in picked if c.fact.answer == "644"]
    assert sorted(c.chain[-1].index for c in perms) == [2, 3]


def test_across_tools_a_fact_is_asked_through_the_call_with_fewer_given_values():
    """The memory graph's `open_nodes` on six names returns what `read_graph` returns with none: a
    question about them must not have to name all six (2026-12-07). Two tools reading the
    same fact from the same values both stay."""
    from mcp_rl.servers.results import CallStatus
    from scenario_gen.explorer import ExploreResult, ExploreStats, Step
    from scenario_gen.grounded import GroundedWriter

    names = ["Ines", "Paul", "Lycee Ampere"]
    steps = [
        Step(0, "read_graph", {}, CallStatus.OK, TWO_LISTS),
        Step(1, "open_nodes", {"names": names}, CallStatus.OK, TWO_LISTS),
        Step(2, "stat", {"path": "/srv/a.txt"}, CallStatus.OK, FILE_INFO),
        Step(3, "info", {"path": "/srv/a.txt"}, CallStatus.OK, FILE_INFO),
    ]
    explore = ExploreResult(steps, ValuePool(), ExploreStats())
    picked = GroundedWriter(None, []).candidates(explore, 200)  # type: ignore[arg-type]
    people = [c for c in picked if (c.fact.rule.where or {}).get("equals") == "person"]
    assert people and all(c.chain[-1].tool == "read_graph" for c in people)
    assert not any(c.chain[-1].tool == "open_nodes" for c in picked)  # each of its facts needs the six
    perms = [c for c in picked if c.fact.answer == "644"]
    assert sorted(c.chain[-1].tool for c in perms) == ["info", "stat"]


def test_a_refused_question_is_kept_as_an_example_of_its_reason():
    """The report shows what the writer offered and why it was refused, not only a count."""
    import anyio

    from mcp_rl.servers.results import CallStatus
    from scenario_gen.explorer import Step
    from scenario_gen.gen_report import GenReport
    from scenario_gen.grounded import Candidate, GroundedWriter

    path = {"path": "/home/ana/files/budget.csv"}
    step = Step(index=0, tool="stat", arguments=path, status=CallStatus.OK, result_text=FILE_INFO)
    fact = next(f for f in extract_facts(FILE_INFO, path) if f.rule.path == ["is_file"])
    no_path = ["Is the budget file a file?", "Is it a regular file?", "Is budget.csv a file?"]
    writer = GroundedWriter(_Scripted(no_path), [], seed=0)
    assert anyio.run(writer.write, Candidate([step], fact, [[path["path"]]])) is None
    label = "question rejected (did not name what it asks about)"
    assert list(writer.problems) == [label]
    (example,) = writer.examples[label]
    assert example.startswith("'Is budget.csv a file?': the question must mention '/home/ana/files/budget.csv'")

    report = GenReport()
    report.drop_all(writer.problems, writer.examples)  # as `generate` hands them over
    assert report.dropped == {label: 1} and report.drop_examples[label] == [example[:160]]


def test_a_path_no_result_showed_must_be_given_in_full():
    """The repository `mcp-server-git` was started on appears in no result: "in the repo" names nothing
    the solver can find, so only the whole path counts. A path a listing showed may go by its last part."""
    from mcp_rl.servers.results import CallStatus
    from scenario_gen.explorer import ExploreResult, ExploreStats, Step
    from scenario_gen.grounded import GroundedWriter

    listing = "[FILE] budget.csv\n[DIR] drafts"
    steps = [
        Step(0, "git_log", {"repo_path": "/srv/repo"}, CallStatus.OK, GIT_LOG),
        Step(1, "list_directory", {"path": "/srv/files"}, CallStatus.OK, listing),
        Step(2, "get_file_info", {"path": "/srv/files/budget.csv"}, CallStatus.OK, FILE_INFO),
    ]
    pool = ValuePool()
    pool.add_result(result_data(listing), 1, {"path": "/srv/files"})
    picked = GroundedWriter(None, []).candidates(ExploreResult(steps, pool, ExploreStats()), 100)  # type: ignore[arg-type]
    by_step = {c.chain[-1].index: c.mentions for c in picked}
    assert ["/srv/repo"] in by_step[0] and ["/srv/repo", "repo"] not in by_step[0]
    assert ["/srv/files/budget.csv", "budget.csv"] in by_step[2]
    # a digit in a path does not make it an opaque token whose name is offered first
    steps[2] = Step(2, "get_file_info", {"path": "/srv/files/2026.csv"}, CallStatus.OK, FILE_INFO, [1])
    pool.add_result(result_data("[FILE] 2026.csv\n[DIR] drafts"), 1, {"path": "/srv/files"})
    picked = GroundedWriter(None, []).candidates(ExploreResult(steps, pool, ExploreStats()), 100)  # type: ignore[arg-type]
    groups = {c.chain[-1].index: c.mentions for c in picked}[2]
    assert any(g[0] == "/srv/files/2026.csv" for g in groups)


def test_a_value_nothing_reveals_is_stated_in_every_task():
    """The repository a git server was started on: the only `repo_path` it accepted, in no result.
    A question or task that leaves it out gets it added; a value a result showed is not context."""
    import anyio

    from mcp_rl.servers.results import CallStatus
    from scenario_gen.context import server_context, state_context
    from scenario_gen.explorer import ExploreResult, ExploreStats, Step
    from scenario_gen.grounded import GroundedWriter

    steps = [
        Step(0, "git_log", {"repo_path": "/srv/repo"}, CallStatus.OK, GIT_LOG),
        Step(1, "git_status", {"repo_path": "/srv/repo"}, CallStatus.OK, "On branch main"),
        Step(2, "git_status", {"repo_path": "/srv/other"}, CallStatus.TOOL_ERROR, "outside the repository"),
        Step(3, "list_directory", {"path": "/srv/files"}, CallStatus.OK, "[FILE] a.csv"),
    ]
    pool = ValuePool(launch_paths=["/srv/repo", "/srv/files"])
    pool.add_result({"roots": ["/srv/files"]}, 3)  # a tool names this root: a solver can find it
    explore = ExploreResult(steps, pool, ExploreStats())
    assert server_context(explore) == {"repo_path": "/srv/repo"}
    assert state_context("What changed in my project?", {"repo_path": "/srv/repo"}) == (
        "What changed in my project? (repo path: /srv/repo)"
    )
    assert state_context("What changed in /srv/repo?", {"repo_path": "/srv/repo"}) == "What changed in /srv/repo?"

    writer = GroundedWriter(_Scripted(["Who is the author of the commit 'Fix the tax rounding' in the repo?"]), [])
    picked = writer.candidates(explore, 100)
    (c,) = [c for c in picked if c.fact.what == "the `author` of the entry with message 'Fix the tax rounding'"]
    assert ["/srv/repo"] in c.mentions
    task = anyio.run(writer.write, c)
    assert not writer.problems
    assert task is not None and task.text.endswith("in the repo? (repo path: /srv/repo)")

    # a path with an underscore is still context, and is asked for as it is spelled ("/srv/my_repo",
    # not "/srv/my repo": 2026-12-06, every git question on such a path was refused for leaving it out)
    steps = [Step(0, "git_log", {"repo_path": "/srv/my_repo"}, CallStatus.OK, GIT_LOG)]
    explore = ExploreResult(steps, ValuePool(launch_paths=["/srv/my_repo"]), ExploreStats())
    writer = GroundedWriter(_Scripted(["Who is the author of the commit 'Fix the tax rounding'?"]), [])
    picked = writer.candidates(explore, 100)
    (c,) = [c for c in picked if c.fact.what == "the `author` of the entry with message 'Fix the tax rounding'"]
    assert c.mentions[-1][0] == "/srv/my_repo"
    task = anyio.run(writer.write, c)
    assert task is not None and task.text.endswith("(repo path: /srv/my_repo)"), writer.examples


def test_a_written_task_gets_the_context_it_left_out():
    from mcp_rl.task import Task
    from scenario_gen.generate import _stated

    task = Task(id="w-1", text="I need to check the status of my project.", source="written")
    done = _stated(task, {"repo_path": "/srv/repo"})
    assert done.text == "I need to check the status of my project. (repo path: /srv/repo)" and done.id != task.id
    assert _stated(task, {}) is task


def test_a_list_gives_counts_and_names_of_each_group_its_entries_share():
    log = GIT_LOG + "\nCommit: '77ab01c3f9'\nAuthor: Marta Silva <marta@example.org>\nDate: 2025-05-10 09:00:00+01:00\nMessage: 'Start'\n"
    facts = [f for f in extract_facts(log) if f.rule.where]
    for f in facts:  # a grader re-derives each
        assert apply_rule(f.rule, [log]) == f.answer
    marta = {f.rule.kind: f for f in facts if f.rule.where["equals"] == "Marta Silva <marta@example.org>"}
    assert marta["count"].answer == "2" and marta["count"].mentions == [["Marta Silva <marta@example.org>"]]
    assert marta["names"].answer == "Fix the tax rounding, Start"
    # the rule counts the group in a fresh result, whatever the order
    assert apply_rule(marta["count"].rule, [log.split("\n\n", 1)[1]]) == "1"
    narrowing = marta["count"].narrowing  # naming one entry as well narrows the question further
    assert "Fix the tax rounding" in narrowing and "Marta Silva <marta@example.org>" not in narrowing


def test_the_grounded_writer_asks_for_one_kind_of_entry_by_its_words():
    listing = {"path": "/home/ana/files"}
    files = lambda f: f.rule.kind == "count" and f.rule.where == {"key": "type", "equals": "FILE"}  # noqa: E731
    both = f"How many files and folders are in {listing['path']}?"
    task, problems = write(LISTING, listing, files, [both, f"How many entries are in {listing['path']}?", both])
    assert task is None and list(problems) == ["question rejected (asked for something else)"]
    task, _ = write(LISTING, listing, files, [f"How many files does the folder {listing['path']} hold?"])
    assert task is not None and task.reference_answer == "2"
    assert apply_rule(task.answer_rule, ["[DIR] old\n[FILE] a.txt"]) == "1"


def test_no_group_is_formed_by_a_role_whose_values_fill_another_field_too():
    facts = [f for f in extract_facts(GRAPH) if f.rule.where]
    # `from` and `to` share their people: "how many relations has Ines" reads both; the relation types do not
    assert {f.rule.where["key"] for f in facts} <= {"relationType", "entityType"}
    assert all(f.rule.name_key not in ("from", "to") for f in facts)


def test_a_count_of_entries_that_touch_any_given_value_may_not_ask_for_those_between_them():
    import anyio

    from mcp_rl.servers.results import CallStatus
    from scenario_gen.explorer import Step
    from scenario_gen.grounded import Candidate, GroundedWriter

    # the memory server's `open_nodes` on three people returns every relation that touches one of them
    opened = json.loads(GRAPH)
    opened["relations"].append({"type": "relation", "from": "Paul Moreau", "to": "Lycee Ampere", "relationType": "works at"})
    text, args = json.dumps(opened), {"names": ["Ines Moreau", "Paul Moreau", "Anna Weber"]}
    fact = next(f for f in extract_facts(text, args) if f.rule.kind == "count" and f.rule.path == ["relations"])
    assert fact.answer == "4" and fact.reaches and "`from` or `to`" in fact.what
    step = Step(index=0, tool="open_nodes", arguments=args, status=CallStatus.OK, result_text=text)
    people = [[n] for n in args["names"]]
    between = "How many relationships are there between Ines Moreau, Paul Moreau and Anna Weber?"
    writer = GroundedWriter(_Scripted([between] * 3), [], seed=0)
    assert anyio.run(writer.write, Candidate([step], fact, people)) is None
    assert list(writer.problems) == ["question rejected (asked for something else)"]
    touching = "How many relationships involve Ines Moreau, Paul Moreau or Anna Weber?"
    task = anyio.run(GroundedWriter(_Scripted([between, touching]), [], seed=0).write, Candidate([step], fact, people))
    assert task is not None and task.text == touching and task.reference_answer == "4"
    # the same people's relations among themselves only: "between" is right, and nothing is added
    inside = json.dumps({"relations": json.loads(GRAPH)["relations"] + [opened["relations"][0]]})
    fact = next(f for f in extract_facts(inside, args) if f.rule.kind == "count")
    assert not fact.reaches and fact.what == "how many entries in `relations`"


def test_a_file_name_with_json_in_it_is_no_talk_about_the_data():
    # 17 filesystem questions were refused for naming `contacts.json` (2026-12-07)
    path = {"path": "/srv/files/contacts.json"}
    size = lambda f: f.rule.path == ["size"]  # noqa: E731
    task, _ = write(FILE_INFO, path, size, ["What is the size of the file /srv/files/contacts.json?"])
    assert task is not None and task.reference_answer == "2048"
    task, problems = write(FILE_INFO, path, size, ["What size does the JSON give for /srv/files/contacts.json?"] * 3)
    assert task is None and list(problems) == ["question rejected (talked about the data, not as a user)"]


TWO_LISTS = json.dumps(  # a knowledge graph as the memory server returns it: two lists
    {
        "entities": [
            {"name": "Ines", "entityType": "person", "observations": ["pharmacist"]},
            {"name": "Paul", "entityType": "person", "observations": ["teacher"]},
            {"name": "Lycee Ampere", "entityType": "organization", "observations": ["a school"]},
        ],
        "relations": [
            {"from": "Ines", "to": "Paul", "relationType": "married to"},
            {"from": "Paul", "to": "Lycee Ampere", "relationType": "works at"},
            {"from": "Ines", "to": "Lycee Ampere", "relationType": "works at"},
        ],
    }
)


def test_a_count_of_one_list_is_not_asked_in_the_words_of_another():
    """"How many people are married?" counts people (2), not `married to` relations (1): measured on
    the memory graph, 2 of 20 tasks read by hand were wrong this way (2026-12-07)."""
    works = lambda f: f.rule.kind == "count" and (f.rule.where or {}).get("equals") == "works at"  # noqa: E731
    task, problems = write(TWO_LISTS, {}, works, ["How many people work at an organization?"] * 3)
    assert task is None and list(problems) == ["question rejected (asked for something else)"]
    task, _ = write(TWO_LISTS, {}, works, ["How many 'works at' relations are there?"])
    assert task is not None and task.reference_answer == "2"
    # a count of entities may not be asked as one of relations, and a list alone has no such rule
    people = lambda f: f.rule.kind == "count" and f.rule.path == ["entities"] and f.rule.where is not None  # noqa: E731
    assert write(TWO_LISTS, {}, people, ["How many person relations are there?"] * 3)[0] is None
    assert write(TWO_LISTS, {}, people, ["How many people are in the graph?"])[0].reference_answer == "2"
    assert all(not f.avoid for f in extract_facts(CITIES))
    # nor may it copy the key it filters on: "entries in `relations` with `relationType` 'works at'"
    data_speak = ["How many entries in relations have relationType 'works at'?"] * 3
    assert write(TWO_LISTS, {}, works, data_speak)[0] is None


def test_a_count_of_one_list_avoids_the_kinds_the_other_list_held_anywhere_in_the_exploration():
    """`open_nodes` on one event gave its relations, to people, and no organization: "How many
    organizations are related to the Porto trip?" -> 1 was kept (memory graph, 2026-12-07)."""
    from mcp_rl.servers.results import CallStatus
    from scenario_gen.explorer import ExploreResult, ExploreStats, Step
    from scenario_gen.grounded import GroundedWriter

    trip = json.dumps(
        {
            "entities": [{"name": "Porto trip", "entityType": "event", "observations": ["in May"]}],
            "relations": [
                {"from": "Ines", "to": "Porto trip", "relationType": "attends"},
                {"from": "Paul", "to": "Porto trip", "relationType": "attends"},
            ],
        }
    )
    relation_count = lambda fs: next(f for f in fs if f.rule.kind == "count" and f.rule.path == ["relations"])  # noqa: E731
    assert "organizations" not in relation_count(extract_facts(trip, {"names": ["Porto trip"]})).avoid  # alone
    steps = [
        Step(0, "read_graph", {}, CallStatus.OK, TWO_LISTS),
        Step(1, "open_nodes", {"names": ["Porto trip"]}, CallStatus.OK, trip),
    ]
    picked = GroundedWriter(None, []).candidates(ExploreResult(steps, ValuePool(), ExploreStats()), 100)  # type: ignore[arg-type]
    count = relation_count([c.fact for c in picked if c.chain[-1].index == 1])
    assert {"organization", "organizations", "people", "person", "event"} <= set(count.avoid)


def test_a_comparison_diff_is_asked_as_a_comparison_and_a_filter_keeps_its_direction():
    """`git_diff` against a commit shows the changes between it and now; asked as the commit's own
    changes, and a log up to a date asked as "after" it, 8 of 20 git tasks were wrong (2026-12-07)."""
    diff = "Diff with 9f1c2ab:\n--- a/VERSION\n+++ b/VERSION\n@@ -1 +1 @@\n-0.1.0\n+0.2.0\n--- /dev/null\n+++ b/NEWS\n@@ -0,0 +1 @@\n+0.2.0\n"
    args = {"target": "9f1c2ab"}
    count = lambda f: f.rule.kind == "count"  # noqa: E731
    assert next(f for f in extract_facts(diff, args) if count(f)).compares == "9f1c2ab"
    assert not any(f.compares for f in extract_facts(GIT_SHOW, {"revision": "9f1c2ab"}))  # one commit's own
    own = ["How many files did commit 9f1c2ab change?"] * 3
    assert write(diff, args, count, own)[0] is None
    task, _ = write(diff, args, count, [own[0], "How many files have changed since commit 9f1c2ab?"])
    assert task is not None and task.reference_answer == "2"
    # a comparison word is not enough: against the commit's parent is still the commit's own change,
    # and a comparison with no present side says nothing of what is compared (3 of 20 git tasks)
    for wrong in (
        "How many files were changed in the commit 9f1c2ab since the previous commit?",
        "How many files changed when commit 9f1c2ab was made, compared to the one before it?",
        "How many entries in the release branch were made in comparison to the 9f1c2ab branch?",
        "How many files were modified in the commit 9f1c2ab since the last commit?",  # evening's set
    ):
        assert write(diff, args, count, [wrong] * 3)[0] is None, wrong
    now = "How many files differ between commit 9f1c2ab and the current working tree?"
    assert write(diff, args, count, [now])[0].reference_answer == "2"

    until = {"repo_path": "/srv/repo", "end_timestamp": "2025-05-13 00:00:00+01:00"}
    one = lambda f: f.rule.kind == "count" and f.rule.where is None  # noqa: E731
    after = [f"How many commits were made in /srv/repo after {until['end_timestamp']}?"] * 3
    task, problems = write(GIT_LOG, until, one, after)
    assert task is None and list(problems) == ["question rejected (asked for something else)"]
    before = f"How many commits were made in /srv/repo before {until['end_timestamp']}?"
    assert write(GIT_LOG, until, one, [after[0], before])[0] is not None
    # "between the date and the latest commit" is the after side too (1 of 20 git tasks)
    latest = [f"How many commits were made in /srv/repo between {until['end_timestamp']} and the latest commit?"] * 3
    assert write(GIT_LOG, until, one, latest)[0] is None
    first = f"How many commits were made in /srv/repo between the first commit and {until['end_timestamp']}?"
    assert write(GIT_LOG, until, one, [first])[0] is not None


def test_a_count_of_nothing_but_the_things_the_call_named_is_no_question():
    """`search_nodes` on "Lycee Ampere" finds the school itself: its count of 1 was asked as "How many
    organizations are associated with the Lycee Ampere school?" (memory graph, 2026-12-07)."""
    found = json.dumps(
        {
            "entities": [{"name": "Lycee Ampere", "entityType": "organization", "observations": []}],
            "relations": [
                {"from": "Paul", "to": "Lycee Ampere", "relationType": "works at"},
                {"from": "Ines", "to": "Lycee Ampere", "relationType": "visits"},
            ],
        }
    )
    counts = {tuple(f.rule.path): f.answer for f in extract_facts(found, {"query": "Lycee Ampere"}) if f.rule.kind == "count"}
    assert ("entities",) not in counts and counts[("relations",)] == "2"
    # a search that found other things than it was given still gives its count
    people = json.dumps({"entities": [{"name": "Ines Moreau"}, {"name": "Paul Moreau"}], "relations": []})
    assert any(f.rule.kind == "count" and f.answer == "2" for f in extract_facts(people, {"query": "Moreau"}))


def test_the_other_end_of_a_link_is_asked_with_who_or_which_not_the_key_s_preposition():
    """"Who is married to Paul Moreau?" asks for the `from` of that relation; the writer refused it for
    want of the word 'from' (memory graph, 2026-12-07). A question with no who/which/what still fails."""
    married = lambda f: f.rule.path[-1:] == ["from"] and "married to" in f.what  # noqa: E731
    task, _ = write(GRAPH, {}, married, ["Who is married to Paul Moreau?"])
    assert task is not None and task.reference_answer == "Ines Moreau"
    task, problems = write(GRAPH, {}, married, ["Is Paul Moreau married?"] * 3)
    assert task is None and list(problems) == ["question rejected (asked for something else)"]


def test_a_time_filter_is_asked_with_its_side_and_a_bound_an_entry_sits_at_is_no_strict_before():
    """A git log up to a commit's own time lists that commit: "Which commits were made before
    2026-10-03 17:40?" -> both, with the 17:40 one, and "How many entries ... with the commit timestamp
    of 'Document the CSV format'?" -> 4 says no side at all (2 of 20 git tasks read, 2026-12-07)."""
    bound = "2025-05-12 08:40:00+01:00"  # the second commit of GIT_LOG sits at it
    until = {"repo_path": "/srv/repo", "end_timestamp": bound}
    one = lambda f: f.rule.kind == "count" and f.rule.where is None  # noqa: E731
    for wrong in (
        f"How many commits were made in /srv/repo before {bound}?",
        f"How many commits in /srv/repo have the commit timestamp {bound}?",
    ):
        task, problems = write(GIT_LOG, until, one, [wrong] * 3)
        assert task is None and list(problems) == ["question rejected (asked for something else)"], wrong
    for right in (
        f"How many commits were made in /srv/repo up to {bound}?",
        f"How many commits were made in /srv/repo on or before {bound}?",
        f"How many commits were made in /srv/repo between 2025-05-01 and {bound}?",  # kept by a probe
    ):
        assert write(GIT_LOG, until, one, [right])[0].reference_answer == "2", right
    # a bound no entry sits at may be asked with "before"
    free = {"repo_path": "/srv/repo", "end_timestamp": "2025-05-13 00:00:00+01:00"}
    assert write(GIT_LOG, free, one, [f"How many commits were made in /srv/repo before {free['end_timestamp']}?"])[0] is not None


def test_a_list_asked_for_by_naming_every_entry_gives_its_answer_away():
    """"What are the local branches ..., including 'feature/charts', 'fix/rounding', and 'main'?" was
    kept (1 of 20 git tasks read, 2026-12-07): each entry alone is no answer, all of them are."""
    names = lambda f: f.rule.kind == "names"  # noqa: E731
    task, problems = write(CITIES, {}, names, ["Which cities are listed, including Tromso, Bergen and Stavanger?"] * 3)
    assert task is None and list(problems) == ["question rejected (gave the answer away)"]
    task, _ = write(CITIES, {}, names, ["Which cities are listed? Tromso is one, I think."])
    assert task is not None and task.reference_answer == "Tromso, Bergen, Stavanger"
