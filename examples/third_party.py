"""Seeded state for third-party MCP servers, so task sets and training on them can be reproduced.

    python -m examples.third_party DIR            # writes DIR/files, DIR/repo, DIR/memory.jsonl
                                                  # and DIR/servers.json (mcpServers, with resetCommand)
    python -m examples.third_party DIR --print    # and prints how to point mcp-rl at each

The servers are real packages run in their own environments (never in the trainer's):
- `@modelcontextprotocol/server-filesystem` (npm, 14 tools) on DIR/files: a small household folder;
- `mcp-server-git` (PyPI, 12 tools) on DIR/repo: a repository with dated commits by three authors;
- `@modelcontextprotocol/server-memory` (npm, 9 tools) on DIR/memory.jsonl: a knowledge graph.
The content is ordinary on purpose (nothing in it is shaped for our task writer), and every run of
this script writes the same bytes, with the same commit ids.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

FILES = {
    "README.md": "# Household\n\nBills, recipes and trip plans for the Moreau family.\n",
    "bills/2026-09.csv": "item,amount_eur\nrent,1150\nelectricity,64.20\ninternet,29.99\nwater,31.50\n",
    "bills/2026-10.csv": "item,amount_eur\nrent,1150\nelectricity,71.85\ninternet,29.99\nwater,28.10\n",
    "bills/2026-11.csv": "item,amount_eur\nrent,1175\nelectricity,88.40\ninternet,29.99\nwater,30.05\n",
    "recipes/lentil-soup.md": "# Lentil soup\n\nServes 4. 45 minutes.\n\n- 250 g red lentils\n- 1 onion\n"
    "- 2 carrots\n- 1 l vegetable stock\n",
    "recipes/pancakes.md": "# Pancakes\n\nServes 2. 20 minutes.\n\n- 125 g flour\n- 2 eggs\n- 250 ml milk\n",
    "recipes/shakshuka.md": "# Shakshuka\n\nServes 3. 30 minutes.\n\n- 6 eggs\n- 400 g tomatoes\n"
    "- 1 red pepper\n- 1 tsp cumin\n",
    "trips/porto-2027.md": "# Porto, May 2027\n\nFlights: TP1953 on 14 May, back on 18 May.\n"
    "Hotel: Casa do Rio, 4 nights, 96 EUR a night.\n",
    "trips/packing-list.txt": "passport\ncharger\nrain jacket\nwalking shoes\nsunscreen\n",
    "contacts.json": json.dumps(
        [
            {"name": "Ines Moreau", "phone": "+33 6 12 34 56 78", "city": "Lyon"},
            {"name": "Paul Moreau", "phone": "+33 6 98 76 54 32", "city": "Lyon"},
            {"name": "Dr. Anna Weber", "phone": "+49 30 1234567", "city": "Berlin"},
        ],
        indent=2,
    )
    + "\n",
}

# (author, email, date, message, {path: content}) applied in order
COMMITS = [
    (
        "Lena Park",
        "lena@example.org",
        "2026-10-01T09:12:00+02:00",
        "Start the budget tool",
        {
            "README.md": "# budget\n\nTrack monthly spending from CSV exports.\n",
            "budget/__init__.py": "",
            "budget/load.py": "import csv\n\n\ndef load(path):\n    with open(path) as f:\n        return list(csv.DictReader(f))\n",
        },
    ),
    (
        "Lena Park",
        "lena@example.org",
        "2026-10-03T17:40:00+02:00",
        "Sum spending per category",
        {
            "budget/report.py": "from collections import Counter\n\n\ndef per_category(rows):\n    total = Counter()\n"
            "    for r in rows:\n        total[r['category']] += float(r['amount'])\n    return total\n",
        },
    ),
    (
        "Omar Haddad",
        "omar@example.org",
        "2026-10-08T11:05:00+02:00",
        "Add tests for the loader",
        {
            "tests/test_load.py": "from budget.load import load\n\n\ndef test_load(tmp_path):\n"
            "    p = tmp_path / 'a.csv'\n    p.write_text('category,amount\\nfood,3\\n')\n    assert load(p)[0]['amount'] == '3'\n",
        },
    ),
    (
        "Mei Chen",
        "mei@example.org",
        "2026-10-15T14:30:00+02:00",
        "Document the CSV format",
        {
            "docs/format.md": "# CSV format\n\nColumns: date, category, amount (EUR, dot decimal).\n",
        },
    ),
    (
        "Omar Haddad",
        "omar@example.org",
        "2026-10-21T10:00:00+02:00",
        "Round totals to cents",
        {
            "budget/report.py": "from collections import Counter\n\n\ndef per_category(rows):\n    total = Counter()\n"
            "    for r in rows:\n        total[r['category']] += float(r['amount'])\n"
            "    return {k: round(v, 2) for k, v in total.items()}\n",
        },
    ),
    (
        "Lena Park",
        "lena@example.org",
        "2026-11-02T16:20:00+01:00",
        "Release 0.1.0",
        {
            "VERSION": "0.1.0\n",
        },
    ),
]
BRANCHES = ["feature/charts", "fix/rounding"]

MEMORY = [
    {"type": "entity", "name": "Ines Moreau", "entityType": "person",
     "observations": ["lives in Lyon", "works as a pharmacist", "born in 1988"]},
    {"type": "entity", "name": "Paul Moreau", "entityType": "person",
     "observations": ["lives in Lyon", "teaches mathematics at a lycee", "plays the cello"]},
    {"type": "entity", "name": "Anna Weber", "entityType": "person",
     "observations": ["lives in Berlin", "is a dentist", "speaks French and German"]},
    {"type": "entity", "name": "Pharmacie du Parc", "entityType": "organization",
     "observations": ["a pharmacy in Lyon", "open Monday to Saturday"]},
    {"type": "entity", "name": "Lycee Ampere", "entityType": "organization",
     "observations": ["a secondary school in Lyon", "about 1400 students"]},
    {"type": "entity", "name": "Porto trip", "entityType": "event",
     "observations": ["planned for 14-18 May 2027", "hotel Casa do Rio booked"]},
    {"type": "relation", "from": "Ines Moreau", "to": "Paul Moreau", "relationType": "married to"},
    {"type": "relation", "from": "Ines Moreau", "to": "Pharmacie du Parc", "relationType": "works at"},
    {"type": "relation", "from": "Paul Moreau", "to": "Lycee Ampere", "relationType": "works at"},
    {"type": "relation", "from": "Anna Weber", "to": "Ines Moreau", "relationType": "friend of"},
    {"type": "relation", "from": "Ines Moreau", "to": "Porto trip", "relationType": "organizes"},
]  # fmt: skip


def seed_files(root: Path) -> Path:
    d = root / "files"
    shutil.rmtree(d, ignore_errors=True)
    for rel, text in FILES.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(text)
    return d


def seed_repo(root: Path) -> Path:
    d = root / "repo"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)

    def git(*args: str, env: dict[str, str] | None = None) -> None:
        subprocess.run(
            ["git", *args], cwd=d, check=True, capture_output=True, env={**os.environ, **(env or {})}
        )

    git("init", "-q", "-b", "main")
    for author, email, date, message, files in COMMITS:
        for rel, text in files.items():
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).write_text(text)
        git("add", "-A")
        who = {"GIT_AUTHOR_NAME": author, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date}
        who |= {"GIT_COMMITTER_NAME": author, "GIT_COMMITTER_EMAIL": email, "GIT_COMMITTER_DATE": date}
        git("commit", "-q", "-m", message, env=who)
    for b in BRANCHES:
        git("branch", b)
    (d / "notes.txt").write_text("ideas: monthly chart, export to PDF\n")  # one untracked file for status
    return d


def seed_memory(root: Path) -> Path:
    f = root / "memory.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in MEMORY))
    return f


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--print", action="store_true", help="print the server command lines")
    args = parser.parse_args()
    root = args.dir.resolve()
    root.mkdir(parents=True, exist_ok=True)
    files, repo, memory = seed_files(root), seed_repo(root), seed_memory(root)
    reset = [sys.executable, str(Path(__file__).resolve()), str(root)]
    servers = {
        "filesystem": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", str(files)],
        },
        "git": {"command": "uvx", "args": ["mcp-server-git", "--repository", str(repo)]},
        "memory": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-memory"],
            "env": {"MEMORY_FILE_PATH": str(memory)},
        },
    }
    for entry in servers.values():
        entry["resetCommand"] = reset
    config = root / "servers.json"
    config.write_text(json.dumps({"mcpServers": servers}, indent=2) + "\n")
    if args.print:
        for name in servers:
            print(f"mcp-rl generate --config {config} --name {name} ...")


if __name__ == "__main__":
    main()
