"""What a benchmark run reports: BFCL accuracy with a Wilson 95% interval per category and per
backend (an entry counts once for each class it involves), the agreement of our strict checks with
BFCL's checker, and the per-entry Parquet (verdicts, calls, the whole episode as JSON)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from judges.success import wilson_interval
from mcp_rl.bench.runner import EntryResult
from mcp_rl.figures import rate_text


def rate(passed: int, n: int) -> dict[str, Any]:
    """A rate record `figures.rate_text` writes: "42% [25%, 61%] (n=24)", or not measured at n=0."""
    if n == 0:
        return {"success": None}
    low, high = wilson_interval(passed, n)
    return {"success": passed / n, "success_low": low, "success_high": high, "success_n": n, "passed": passed}


def accuracy(results: list[EntryResult]) -> dict[str, dict[str, dict[str, Any]]]:
    """{"category": {name: rate}, "backend": {name: rate}}."""
    groups: dict[str, dict[str, list[bool]]] = {"category": defaultdict(list), "backend": defaultdict(list)}
    for r in results:
        groups["category"][r.category].append(r.bfcl.valid)
        for b in r.backends:
            groups["backend"][b].append(r.bfcl.valid)
    return {
        kind: {name: rate(sum(v), len(v)) for name, v in sorted(by.items())} for kind, by in groups.items()
    }


def agreement(results: list[EntryResult]) -> dict[str, int]:
    """Counts over the comparable entries: both pass, both fail, BFCL only, ours only."""
    out = {"comparable": 0, "agree": 0, "both_pass": 0, "both_fail": 0, "bfcl_only": 0, "strict_only": 0}
    for r in results:
        if r.strict is None:
            continue
        out["comparable"] += 1
        key = {(True, True): "both_pass", (False, False): "both_fail", (True, False): "bfcl_only", (False, True): "strict_only"}
        out[key[(r.bfcl.valid, r.strict)]] += 1
        out["agree"] += int(r.agree is True)
    return out


def summary_lines(results: list[EntryResult]) -> list[str]:
    acc = accuracy(results)
    lines = [f"BFCL accuracy, model {results[0].model if results else '-'} (graded by BFCL's multi-turn checker):"]
    for kind in ("category", "backend"):
        for name, r in acc[kind].items():
            lines.append(f"  {kind:<8} {name:<24} {rate_text(r)}")
    a = agreement(results)
    lines.append(
        f"agreement with our strict checks: {a['agree']}/{a['comparable']} comparable entries agree "
        f"(both pass {a['both_pass']}, both fail {a['both_fail']}, BFCL only {a['bfcl_only']}, ours only {a['strict_only']})"
    )
    return lines


def rows(results: list[EntryResult]) -> list[dict[str, Any]]:
    return [
        {
            "id": r.id,
            "category": r.category,
            "backends": ",".join(r.backends),
            "model": r.model,
            "bfcl_valid": r.bfcl.valid,
            "bfcl_error_type": r.bfcl.error_type,
            "bfcl_error": r.bfcl.error_message,
            "strict": r.strict,
            "strict_reason": r.strict_reason,
            "agree": r.agree,
            "n_calls": len(r.episode.tool_calls),
            "user_turns_done": len(r.turns),
            "end": r.episode.end,
            "seconds": r.seconds,
            "calls": json.dumps(r.episode.metadata.get("decoded", [])),
            "episode": r.episode.model_dump_json(),
        }
        for r in results
    ]


def write_results(results: list[EntryResult], out_dir: Path) -> tuple[Path, Path]:
    """results.parquet (one row per entry) and summary.json (accuracy and agreement)."""
    import polars as pl

    out_dir.mkdir(parents=True, exist_ok=True)
    parquet = out_dir / "results.parquet"
    pl.DataFrame(rows(results)).write_parquet(parquet)
    summary = out_dir / "summary.json"
    summary.write_text(
        json.dumps({"accuracy": accuracy(results), "agreement": agreement(results), "lines": summary_lines(results)}, indent=2)
    )
    return parquet, summary
