"""The train / val / test split: tasks that share a reference call, an id or a name never straddle
two splits; keys too common to identify anything are ignored and reported; the split is the same in any
order; all three splits survive every file format; `mcp-rl split` re-splits a file from the command line."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from itertools import pairwise

import pytest

from conftest import REPO
from scenario_gen import ReferenceCall, Task, load_tasks, save_tasks
from scenario_gen.split import leaks, split_report, split_tasks
from scenario_gen.split_keys import find_groups, text_tokens

INVENTORY_48 = REPO / "examples" / "tasks" / "inventory-48.jsonl"
TIME_48 = REPO / "examples" / "tasks" / "time-48.jsonl"
ITM_017 = 'call get_item {"item_id":"ITM-017"}'


def _grounded(tid: str, *calls: tuple[str, dict], text: str = "") -> Task:
    return Task(
        id=tid,
        text=text or f"question {tid}",
        source="grounded",
        reference_calls=[ReferenceCall(tool=tool, arguments=args) for tool, args in calls],
        reference_answer="1",
    )


def _written(tid: str, text: str) -> Task:
    return Task(id=tid, text=text)


def _chains(tasks: list[Task]) -> dict[str, set[str]]:
    """Each reference call (tool + arguments) -> the splits of the tasks that make it."""
    out: dict[str, set[str]] = {}
    for t in tasks:
        for c in t.reference_calls:
            out.setdefault(f"{c.tool} {json.dumps(c.arguments, sort_keys=True)}", set()).add(t.split)
    return out


def _by_id(tasks: list[Task]) -> dict[str, str]:
    return {t.id: t.split for t in tasks}


# --- the measured leak ------------------------------------------------------------------------


def test_the_price_and_the_stock_of_itm_017_land_in_one_split_of_inventory_48():
    tasks = split_tasks(load_tasks(INVENTORY_48), 0.25, test_fraction=0.35, seed=0)
    itm_017 = [t for t in tasks if any(c.arguments.get("item_id") == "ITM-017" for c in t.reference_calls)]
    assert len(itm_017) == 2 and len({t.split for t in itm_017}) == 1
    # no call with arguments is made in two splits (the bare `filter_items {}` and `list_categories {}`
    # that most tasks start with identify nothing: they are the ignored keys)
    shared = {call for call, splits in _chains(tasks).items() if len(splits) > 1}
    assert shared <= {"filter_items {}", "list_categories {}"}
    assert leaks(tasks) == []
    assert {t.split for t in tasks} == {"train", "val", "test"}


@pytest.mark.parametrize("path", [INVENTORY_48, TIME_48], ids=["inventory", "time"])
def test_the_committed_example_sets_are_split_three_ways_sharing_nothing(path):
    tasks = load_tasks(path)
    assert {t.split for t in tasks} == {"train", "val", "test"}
    assert leaks(tasks) == []
    # as `mcp-rl split --val-fraction 0.25 --test-fraction 0.35 --seed 0` wrote them
    assert _by_id(tasks) == _by_id(split_tasks(tasks, 0.25, test_fraction=0.35, seed=0))


def test_leaks_names_a_call_made_in_two_splits():
    tasks = load_tasks(INVENTORY_48)
    price, stock = (
        t for t in tasks if any(c.arguments.get("item_id") == "ITM-017" for c in t.reference_calls)
    )
    leaky = [
        t.model_copy(
            update={"split": "val" if t.id == price.id else "train" if t.id == stock.id else t.split}
        )
        for t in tasks
    ]
    assert ITM_017 in leaks(leaky) and "entity itm-017" in leaks(leaky)
    assert ITM_017 in split_report(leaky).leaks


# --- components ---------------------------------------------------------------------------------


def _linked_set() -> list[Task]:
    """24 tasks in known groups: calls shared, ids and names shared, and written tasks naming them."""
    tasks = [
        _grounded("price-17", ("get_item", {"item_id": "ITM-017"})),
        _grounded("stock-17", ("get_item", {"item_id": "ITM-017"})),
        _grounded("search-17", ("search_items", {"query": "itm-017"})),  # the same id, other case
        _written("restock-17", "Update the stock of item 'ITM-017' by adding 10 units."),
        _grounded("kettle-a", ("search_items", {"query": "Camp Kettle 1L"})),
        _written("kettle-b", "Find the 'Camp Kettle 1L' and show its details."),
        _grounded("ny-now", ("get_current_time", {"timezone": "America/New_York"})),
        _written("ny-written", "What time is it in New York right now?"),
    ]
    tasks += [_grounded(f"solo-{i}", ("get_item", {"item_id": f"ITM-1{i:02d}"})) for i in range(10)]
    tasks += [_written(f"free-{i}", f"recommend gear for trip number {i}") for i in range(6)]
    return tasks


def test_tasks_that_share_a_call_an_id_or_a_name_share_a_split_for_every_seed():
    tasks = _linked_set()
    labels = find_groups(tasks).labels
    label = dict(zip((t.id for t in tasks), labels, strict=True))
    assert label["price-17"] == label["stock-17"] == label["search-17"] == label["restock-17"]
    assert label["kettle-a"] == label["kettle-b"]
    assert label["ny-now"] == label["ny-written"]  # a timezone is named by its city
    assert len(set(labels)) == 3 + 10 + 6
    seen: set[str] = set()
    for seed in range(12):
        out = split_tasks(tasks, 0.25, test_fraction=0.35, seed=seed)
        splits = _by_id(out)
        for group in (["price-17", "stock-17", "search-17", "restock-17"], ["kettle-a", "kettle-b"]):
            assert len({splits[i] for i in group}) == 1, (seed, group)
        assert leaks(out) == []
        seen.add(splits["price-17"])
    assert seen == {"train", "val", "test"}  # the group moves with the seed, whole


def test_entity_like_tokens_of_a_text():
    toks = text_tokens("Set the price of item 'ITM-024' to 10 USD; compare Etc/UTC with Solar String Lights.")
    assert {"itm-024", "etc/utc", "solar string lights", "usd"} <= toks
    assert "string lights" in toks  # a capitalized run, also without its first word
    assert "the" not in toks and "price" not in toks


def test_a_key_most_tasks_share_is_ignored_and_reported():
    # every grounded task starts with the same bare call: as a key it would make one component of all
    tasks = [
        _grounded(f"g{i}", ("list_categories", {}), ("get_item", {"item_id": f"ITM-{i:03d}"}))
        for i in range(20)
    ]
    tasks += [_written(f"w{i}", f"plan trip {i}") for i in range(8)]
    out = split_tasks(tasks, 0.25, test_fraction=0.35, seed=0)
    report = split_report(out)
    assert report.ignored_keys == {"call list_categories {}": 20}
    assert report.components == 28 and report.largest_component == 1
    assert all(report.counts[s]["grounded"] >= 1 for s in ("train", "val", "test"))
    # with the key counted, the 20 grounded tasks could only go to one split together
    assert split_report(out, max_key_share=1.0).largest_component == 20


def test_a_hub_that_glues_a_giant_component_is_ignored_but_a_chain_of_pairs_stays_whole():
    # 5 of 24 tasks share "hub" (under a quarter), each also shares an id with one other task:
    # one component of 10 (over a quarter of the set), held together by the hub alone
    tasks = [_grounded(f"a{i}", ("lookup", {"zone": "hub", "id": f"X-{i}"})) for i in range(5)]
    tasks += [_grounded(f"b{i}", ("get_item", {"item_id": f"X-{i}"})) for i in range(5)]
    # a chain c0-c1-c2-...-c7: each link shared by two tasks only, so splitting it anywhere leaks
    tasks += [_grounded(f"c{i}", ("follow", {"from": f"L{i}", "to": f"L{i + 1}"})) for i in range(7)]
    tasks += [_written(f"w{i}", f"free question {i}") for i in range(7)]
    out = split_tasks(tasks, 0.2, test_fraction=0.2, seed=0)
    report = split_report(out)
    assert "entity hub" in report.ignored_keys
    assert report.largest_component == 7
    splits = _by_id(out)
    assert all(splits[f"a{i}"] == splits[f"b{i}"] for i in range(5))
    assert {splits[f"c{i}"] for i in range(7)} == {"train"}  # too large for val or test (5 each)
    assert leaks(out) == []


# --- assignment ------------------------------------------------------------------------------------


def test_the_split_is_the_same_in_any_order_and_moves_with_the_seed():
    for path in (INVENTORY_48, TIME_48):
        tasks = load_tasks(path)
        first = _by_id(split_tasks(tasks, 0.25, test_fraction=0.35, seed=0))
        for r in range(5):
            shuffled = list(tasks)
            random.Random(r).shuffle(shuffled)
            out = split_tasks(shuffled, 0.25, test_fraction=0.35, seed=0)
            assert _by_id(out) == first
            assert [t.id for t in out] == [t.id for t in shuffled]  # copies, in the order given
        assert _by_id(split_tasks(tasks, 0.25, test_fraction=0.35, seed=1)) != first


@pytest.mark.parametrize("path", [INVENTORY_48, TIME_48], ids=["inventory", "time"])
def test_each_split_is_near_its_fraction_and_val_and_test_hold_grounded_tasks(path):
    tasks = load_tasks(path)
    grounded = sum(t.grounded for t in tasks)
    for seed in range(4):
        report = split_report(split_tasks(tasks, 0.25, test_fraction=0.35, seed=seed))
        assert abs(report.total("test") - 0.35 * len(tasks)) <= 3
        assert abs(report.total("val") - 0.25 * len(tasks)) <= 3
        for s in ("val", "test"):
            assert report.counts[s]["grounded"] >= 1
        assert report.counts["test"]["grounded"] >= 0.35 * grounded - 2
        assert report.leaks == []


def test_fractions_that_leave_nothing_to_train_are_refused():
    tasks = _linked_set()
    with pytest.raises(ValueError, match="below 1"):
        split_tasks(tasks, 0.6, test_fraction=0.4)
    with pytest.raises(ValueError, match="test_fraction"):
        split_tasks(tasks, 0.2, test_fraction=1.2)
    assert {t.split for t in split_tasks(tasks, 0.25, test_fraction=0.0)} == {"train", "val"}


# --- files ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["tasks.jsonl", "tasks.parquet", "hfdir", "hfdir-parquet"])
def test_every_format_keeps_the_test_split(tmp_path, name):
    tasks = split_tasks(load_tasks(INVENTORY_48), 0.25, test_fraction=0.35, seed=0)
    if name == "hfdir-parquet":
        path = save_tasks(tasks, tmp_path / name, fmt="hf", hf_files="parquet")
    else:
        path = save_tasks(tasks, tmp_path / name)
    back = load_tasks(path)
    assert sorted(back, key=lambda t: t.id) == sorted(tasks, key=lambda t: t.id)
    assert sum(t.split == "test" for t in back) == sum(t.split == "test" for t in tasks) > 0
    if path.is_dir():
        ext = "parquet" if name == "hfdir-parquet" else "jsonl"
        assert (path / f"test.{ext}").is_file()
        assert f"- split: test\n    path: test.{ext}" in (path / "README.md").read_text()


def test_a_two_split_file_and_directory_still_load(tmp_path):
    rows = [json.loads(line) for line in INVENTORY_48.read_text().splitlines()[:6]]
    for r, split in zip(rows, ["train", "val"] * 3, strict=True):
        r["split"] = split
    old = tmp_path / "old.jsonl"
    old.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [t.split for t in load_tasks(old)] == ["train", "val"] * 3
    d = save_tasks(load_tasks(old), tmp_path / "olddir")
    assert not (d / "test.jsonl").exists()
    assert sorted(t.split for t in load_tasks(d)) == ["train"] * 3 + ["val"] * 3


# --- the command -----------------------------------------------------------------------------------


def _mcp_rl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mcp_rl", *args], cwd=REPO, capture_output=True, text=True, timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


def test_mcp_rl_split_writes_three_disjoint_splits_and_refuses_to_overwrite(tmp_path):
    out = tmp_path / "inventory.jsonl"
    r = _mcp_rl(
        "split", str(INVENTORY_48), "-o", str(out), "--val-fraction", "0.25", "--test-fraction", "0.35"
    )
    assert r.returncode == 0, r.stderr
    tasks = load_tasks(out)
    assert [t.id for t in tasks] == [t.id for t in load_tasks(INVENTORY_48)]
    assert _by_id(tasks) == _by_id(split_tasks(load_tasks(INVENTORY_48), 0.25, test_fraction=0.35, seed=0))
    assert leaks(tasks) == []
    report = split_report(tasks)
    for s in ("train", "val", "test"):
        assert f"│ {s:<5} │ {report.total(s):>5} │" in r.stdout
    assert "call filter_items {} (20 tasks)" in r.stdout and "leaks: 0" in r.stdout

    before = out.read_bytes()
    r = _mcp_rl("split", str(INVENTORY_48), "-o", str(out), "--seed", "5")
    assert r.returncode == 2 and "exists and is not empty" in r.stderr and "--force" in r.stderr
    assert "Traceback" not in r.stderr and out.read_bytes() == before
    # in place, with --force: read, re-split, written over the file it came from
    r = _mcp_rl("split", str(out), "-o", str(out), "--seed", "5", "--force")
    assert r.returncode == 0, r.stderr
    assert _by_id(load_tasks(out)) == _by_id(split_tasks(load_tasks(INVENTORY_48), seed=5))
    assert [p.name for p in tmp_path.iterdir()] == ["inventory.jsonl"]  # no stage left behind


def test_mcp_rl_split_into_a_datasets_directory_replaces_it_whole_with_force(tmp_path):
    out = tmp_path / "ds"
    out.mkdir()
    (out / "stale.txt").write_text("from before")
    r = _mcp_rl("split", str(TIME_48), "-o", str(out))
    assert r.returncode == 2 and (out / "stale.txt").exists()
    r = _mcp_rl("split", str(TIME_48), "-o", str(out), "--force")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "README.md", "dataset_info.json", "test.jsonl", "train.jsonl", "validation.jsonl",
    ]  # fmt: skip
    assert len(load_tasks(out)) == 48 and leaks(load_tasks(out)) == []
    r = _mcp_rl(
        "split",
        str(TIME_48),
        "-o",
        str(tmp_path / "x.jsonl"),
        "--val-fraction",
        "0.5",
        "--test-fraction",
        "0.5",
    )
    assert r.returncode == 2 and "leave nothing to train on" in r.stderr
    assert not (tmp_path / "x.jsonl").exists()
    r = _mcp_rl("split", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "y.jsonl"))
    assert r.returncode == 2 and "not found" in r.stderr and "Traceback" not in r.stderr


def test_a_chain_of_links_is_one_component_in_any_order():
    tasks = [_grounded(f"c{i}", ("follow", {"from": f"L{i}", "to": f"L{i + 1}"})) for i in range(6)]
    for r in range(3):
        shuffled = list(tasks)
        random.Random(r).shuffle(shuffled)
        labels = find_groups(shuffled).labels
        assert len(set(labels)) == 1
    assert all(a.split == b.split for a, b in pairwise(split_tasks(tasks, seed=3)))
