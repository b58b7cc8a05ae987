"""`mcp-rl dashboard`: watch runs live in a browser, read every group, compare runs.

root = RunsRoot("runs/")                 # runs.py: reading run directories, read-only
app = create_app(root, token=None)       # app.py: the page, JSON under /api, server-sent events
uvicorn.run(app, host="127.0.0.1", port=8050)

The page (static/: HTML, JS, CSS) ships in the package: no CDN, works offline.
"""

from mcp_rl.dashboard.app import create_app
from mcp_rl.dashboard.runs import NotFound, Run, RunsRoot, mask_secrets

__all__ = ["NotFound", "Run", "RunsRoot", "create_app", "mask_secrets"]
