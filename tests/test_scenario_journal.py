"""A generation stopped halfway goes on from its journal: nothing made before is lost or asked again.
Against the real inventory server over stdio; the writer is the scripted fake of
`test_scenario_generate.py` (the offline writer takes an hour for what this checks in seconds)."""

from __future__ import annotations

import math
import re

import anyio
import pytest
from test_scenario_generate import FakeTaskWriter

from conftest import INVENTORY
from mcp_rl.errors import TaskError
from mcp_rl.servers import ServerSession, ServerSpec
from scenario_gen import GenerateConfig, generate_tasks
from scenario_gen.journal import Journal

RUN = {"server": "inventory", "language": "en"}


class Stopped(Exception):
    """Stands in for the kill: raised at a chosen point, after which nothing more reaches the disk."""


class KilledAfter(Journal):
    """A journal whose process dies after `n` records: the next one, and every later one, is lost."""

    def __init__(self, path, run, n: int) -> None:
        self.left = n
        super().__init__(path, run)

    def _append(self, record) -> None:
        if "run" not in record:
            if self.left <= 0:
                raise Stopped
            self.left -= 1
        super()._append(record)


def _generate(model, cfg, journal, stop_at: str | None = None):
    def progress(msg, _report):
        if stop_at and msg.startswith(stop_at):
            raise Stopped(msg)

    async def go():
        spec = ServerSpec.parse(INVENTORY).with_connection(result_budget=20000)
        async with ServerSession(spec) as s:
            return await generate_tasks(s, model, cfg, progress=progress, journal=journal)

    return anyio.run(go)


def test_a_generation_stopped_in_its_grounded_phase_goes_on_from_what_it_wrote(tmp_path):
    path, cfg = tmp_path / "tasks.jsonl.journal.jsonl", GenerateConfig(n=24, seed=3)
    journal = KilledAfter(path, RUN, 5)
    with pytest.raises(Stopped):  # killed after 5 questions of the first page, before any re-run
        _generate(FakeTaskWriter(), cfg, journal)
    journal.close()

    journal = Journal(path, RUN)
    made = dict(journal.grounded)
    assert journal.resumed and len(made) + len(journal.asked) == 5 and len(made) >= 3 and not any("verified" in t.notes for t in made.values())
    fake = FakeTaskWriter()
    tasks, report = _generate(fake, cfg, journal)
    journal.close(remove=True)
    assert len(tasks) == cfg.n and report.resumed == len(made)
    # what it wrote is in the set (but for near-duplicates, as in any run), re-run and checked now
    kept = set(made) & {t.id for t in tasks}
    duplicates = report.dropped.get("duplicate", 0)
    assert len(kept) >= len(made) - duplicates and all(t.notes.get("verified") for t in tasks if t.id in kept)
    assert report.verification.get("stable", 0) >= len(made)
    # and only the rest of the questions were asked: a page for what was still missing
    want = math.ceil(cfg.n * cfg.grounded_share)
    asked = sum("Write one question" in p for p in fake.prompts)
    assert 0 < asked == report.candidates_grounded <= math.ceil((want - len(kept)) * 1.5) + 1
    assert not path.exists()


def test_a_generation_stopped_in_its_written_phase_keeps_both_kinds(tmp_path):
    path, cfg = tmp_path / "j.jsonl", GenerateConfig(n=12, seed=3)
    journal = Journal(path, RUN)
    with pytest.raises(Stopped):
        _generate(FakeTaskWriter(), cfg, journal, stop_at="written:")
    journal.close()

    journal = Journal(path, RUN)
    grounded, written = dict(journal.grounded), dict(journal.written)
    assert written and all(t.notes.get("verified") for t in grounded.values())
    fake = FakeTaskWriter()
    tasks, report = _generate(fake, cfg, journal)
    journal.close()
    assert len(tasks) == 12 and report.resumed == len(grounded) + len(written)
    # its written tasks were enough: none written again, every one in the set is from the journal
    assert not any(re.search(r"Write \d+ different", p) for p in fake.prompts)
    assert {t.id for t in tasks if t.source == "written"} <= set(written)
    assert report.candidates_grounded == 0  # every grounded task came from the journal
    assert not any("Write one question" in p for p in fake.prompts)


def test_a_torn_last_line_is_ignored_and_another_run_s_journal_is_refused(tmp_path):
    path = tmp_path / "j.jsonl"
    journal = Journal(path, RUN)
    journal.add_asked("g-0123456789ab")
    journal.close()
    with path.open("a") as f:
        f.write('{"written": {"id": "w-1", "te')  # the kill came mid-line
    again = Journal(path, RUN)
    assert again.resumed and again.asked == {"g-0123456789ab"} and again.made == 0
    again.close()
    with pytest.raises(TaskError, match="asked something else") as e:
        Journal(path, {**RUN, "language": "fr"})
    assert "'en' then, 'fr' now" in str(e.value) and "delete" in e.value.hint
