"""The viewer page: one HTML document with its CSS and JS inlined (served live, or exported with the data inside)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from gymverse.viewer.detail import episode_view
from gymverse.viewer.index import TrajectoryIndex


def _asset(name: str) -> str:
    return resources.files("gymverse.viewer").joinpath("static").joinpath(name).read_text(encoding="utf-8")


def _finite(obj: Any) -> Any:
    # JSON has no NaN/Infinity and JSON.parse rejects them: a diverged reward is shown as text, not a broken page
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def to_json(obj: Any) -> str:
    """Strict JSON (non-finite floats become strings, unknown objects their repr)."""
    try:
        return json.dumps(obj, ensure_ascii=False, allow_nan=False, default=repr)
    except ValueError:
        return json.dumps(_finite(obj), ensure_ascii=False, allow_nan=False, default=repr)


def render_page(embedded: dict[str, Any] | None = None) -> str:
    """The page; `embedded` (``{"meta", "episodes"}``) makes it work without a server."""
    html = _asset("viewer.html").replace("/*GV_CSS*/", _asset("viewer.css")).replace("/*GV_JS*/", _asset("viewer.js"))
    # "<" is escaped so no text inside an episode can close the <script> element that carries the data
    data = "null" if embedded is None else to_json(embedded).replace("<", "\\u003c")
    before, after = html.split("__GV_DATA__")
    return before + data + after


def export_html(index: TrajectoryIndex, out: str | Path, progress: Callable[[int, int], None] | None = None) -> Path:
    """Write one self-contained HTML file with every episode of `index`; returns its path."""
    episodes = []
    for i in range(len(index)):
        episodes.append(episode_view(index.record(i), index.row(i)))
        if progress is not None and (i + 1) % 5000 == 0:
            progress(i + 1, len(index))
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_page({"meta": index.meta(), "episodes": episodes}), encoding="utf-8")
    return path


__all__ = ["export_html", "render_page", "to_json"]
