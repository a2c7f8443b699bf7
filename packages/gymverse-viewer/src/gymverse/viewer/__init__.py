"""Trajectory viewer: browse `Trajectory` JSONL files in a local web page (``gymverse view PATH``).

`TrajectoryIndex` indexes the files (numpy columns, no episode kept in memory), `ViewerServer` serves the page and a
paged JSON API on the standard library's HTTP server, `export_html` writes one self-contained HTML file. The page is
plain HTML/CSS/JS shipped in ``static/``: no CDN, no internet.
"""

from gymverse.viewer.detail import episode_view, split_move
from gymverse.viewer.index import TrajectoryFileError, TrajectoryIndex, resolve_paths
from gymverse.viewer.page import export_html, render_page
from gymverse.viewer.query import Query, parse_query, summarize
from gymverse.viewer.server import ViewerServer

__all__ = [
    "Query",
    "TrajectoryFileError",
    "TrajectoryIndex",
    "ViewerServer",
    "episode_view",
    "export_html",
    "parse_query",
    "render_page",
    "resolve_paths",
    "split_move",
    "summarize",
]
