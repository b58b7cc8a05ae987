"""`mcp-rl bench`: outside yardsticks. BFCL's multi-turn categories, each backend class served as a
real MCP server, worked through our agent loop and graded by BFCL's own checker.

    bfcl_data    the installed `bfcl-eval` package: entries, ground truth, function docs, backends
    bfcl_server  one or more BFCL backend classes as a stdio MCP server
    calls        BFCL's call strings <-> (tool, arguments)
    oracle       a model that replays the ground-truth calls (calibration)
    grade        BFCL's multi-turn checker, and our strict checks on the same episodes
    runner       one entry's user turns in order through the agent loop; a whole benchmark
    results      accuracy with Wilson intervals per category and backend; the per-entry Parquet
"""
