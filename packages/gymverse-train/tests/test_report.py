"""The training plot reads truthfully: whole complexity levels on a readable axis, a mean that does not lag."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gymverse_train.report import _smooth, plot


def test_the_moving_mean_is_centered_so_a_jump_shows_where_it_happens() -> None:
    values = [0.0] * 10 + [1.0] * 10
    smooth = _smooth(values, window=5)
    assert smooth[9] < 0.5 < smooth[10]  # the step is drawn between steps 9 and 10, not two steps later
    assert smooth[0] == 0.0 and smooth[-1] == 1.0
    assert _smooth([float("nan"), 1.0, float("nan")], window=3) == [1.0, 1.0, 1.0]


def test_a_constant_level_gets_integer_ticks_and_room(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    axes: list[Any] = []
    monkeypatch.setattr(plt, "close", lambda fig: axes.extend(fig.axes))
    metrics = [
        {"step": i, "success_by_env": {"a:B": i / 10}, "complexity_by_env": {"a:B": 1}, "level_changes": []}
        for i in range(10)
    ]
    assert plot(metrics, tmp_path / "p.png")
    level_axis = axes[1]
    lo, hi = level_axis.get_ylim()
    assert lo <= 0.5 and hi >= 4  # not a 0.96..1.04 sliver around the constant
    ticks = [t for t in level_axis.get_yticks() if lo <= t <= hi]
    assert ticks and all(float(t).is_integer() for t in ticks)
