"""The viewer's index: loading run directories, filters/sort/paging against brute force, summaries, episode detail."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymverse.actions import boxed_spans, find_boxed
from gymverse.trajectory import Trajectory, Turn, write_jsonl
from gymverse.viewer import Query, TrajectoryFileError, TrajectoryIndex, episode_view, parse_query, split_move
from gymverse.viewer.page import to_json

PAIR = {"game:LightsOut", "broken:Crashes"}


def _records(index: TrajectoryIndex) -> list[dict[str, Any]]:
    return [index.record(i) for i in range(len(index))]


def _text(rec: dict[str, Any]) -> str:
    parts = [p for t in rec["turns"] for p in (t["observation"], t["action"])]
    return "\x00".join([*parts, rec["final_observation"]]).lower()


def _ids(index: TrajectoryIndex, q: Query) -> list[int]:
    return [r["id"] for r in index.query(q, 0, 1000, with_summary=False)["rows"]]


@pytest.fixture(scope="module")
def index(trajectory_run: Path) -> TrajectoryIndex:
    return TrajectoryIndex([trajectory_run])


def test_boxed_spans_agree_with_find_boxed() -> None:
    for text in [r"a \boxed{1} b \boxed{x{y}z}", r"\boxed{\boxed{3}", r"no box", r"\boxed{}", "\\boxed{" * 50]:
        assert [text[s:e] for s, e in boxed_spans(text)] == find_boxed(text)
    assert split_move("think \\boxed{2} then \\boxed{swap 1 2}!") == {
        "before": "think \\boxed{2} then \\boxed{",
        "move": "swap 1 2",
        "after": "}!",
    }
    assert split_move("no box here") is None


def test_run_directory_is_searched_and_bad_lines_reported(index: TrajectoryIndex, trajectory_run: Path) -> None:
    names = sorted(f.relative_to(trajectory_run).as_posix() for f in index.files)
    assert names == ["collector.jsonl", "mixed.jsonl", "rollouts/steps.jsonl"]
    assert len(index) == 120 + 3 + 1
    assert any("notes.jsonl: skipped (not trajectory records)" in n for n in index.notes)
    assert index.n_problems == 1
    assert "mixed.jsonl:2: skipped:" in index.problems[0]
    meta = index.meta()
    assert meta["episodes"] == 124
    assert "broken:Crashes" in meta["envs"]
    assert meta["has_step"] is True


def test_filters_match_brute_force(index: TrajectoryIndex) -> None:
    recs = _records(index)

    def brute(pred: Any) -> list[int]:
        return [i for i, r in enumerate(recs) if pred(r)]

    def fmt_errors(r: dict[str, Any]) -> int:
        return sum(bool(t["info"].get("format_error")) for t in r["turns"])

    cases = [
        (Query(envs=("game:Mastermind",)), lambda r: r["env_id"] == "game:Mastermind"),
        (Query(envs=("game:LightsOut", "broken:Crashes")), lambda r: r["env_id"] in PAIR),
        (Query(cmin=2, cmax=3), lambda r: 2 <= r["complexity"] <= 3),
        (Query(success=False), lambda r: r["success"] is not True),
        (Query(error=True), lambda r: r["error"] is not None),
        (Query(format_error=True), lambda r: fmt_errors(r) > 0),
        (Query(text="ZEBRA-needle"), lambda r: "zebra-needle" in _text(r)),
        (Query(text="5 is too"), lambda r: "5 is too" in _text(r)),
        (
            Query(envs=("game:GuessTheNumber",), success=True, text="boxed"),
            lambda r: r["env_id"] == "game:GuessTheNumber" and r["success"] and "boxed" in _text(r),
        ),
        (Query(envs=("no:SuchEnv",)), lambda r: False),
    ]
    for q, pred in cases:
        want = brute(pred)
        assert _ids(index, q) == want, q
    # the two GuessTheNumber episodes, and the crashed one: its failed step is recorded as a turn (the action is
    # part of the episode's tokens) with the error in its info
    assert len(brute(lambda r: "zebra-needle" in _text(r))) == 3
    assert _ids(index, Query(error=True)) == [next(i for i, r in enumerate(recs) if r["env_id"] == "broken:Crashes")]


def test_text_search_never_spans_two_texts(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_jsonl([Trajectory("a:B", 0, 1, [Turn("ends with abc", "def starts", 0.0)])], path)
    idx = TrajectoryIndex([path])
    assert idx.text_mask("abc").tolist() == [True]
    assert idx.text_mask("abcdef").tolist() == [False]
    assert idx.text_mask("abc\ndef").tolist() == [False]
    assert idx.text_mask("").tolist() == [True]


def test_sort_and_paging(index: TrajectoryIndex) -> None:
    q = Query(sort="return", descending=True)
    rows = index.query(q, 0, 1000, with_summary=False)["rows"]
    rets = [r["return"] for r in rows]
    assert rets == sorted(rets, reverse=True)
    for a, b in itertools.pairwise(rows):
        if a["return"] == b["return"]:
            assert a["id"] < b["id"]  # ties keep file order in both directions
    pages = [index.query(q, off, 50, with_summary=False) for off in (0, 50, 100)]
    assert [r["id"] for p in pages for r in p["rows"]] == [r["id"] for r in rows]
    assert all(p["total"] == len(index) for p in pages)
    envs = [r["env"] for r in index.query(Query(sort="env"), 0, 1000, with_summary=False)["rows"]]
    assert envs == sorted(envs)


def test_summary_matches_records(index: TrajectoryIndex) -> None:
    recs = _records(index)
    q = Query(envs=("game:GuessTheNumber", "game:Mastermind"))
    s = index.query(q, 0, 10)["summary"]
    sel = [r for r in recs if r["env_id"] in q.envs]
    assert s["episodes"] == len(sel)
    assert s["success_rate"] == pytest.approx(np.mean([r["success"] is True for r in sel]))
    for env, points in s["success_by_complexity"].items():
        for level, n, rate in points:
            group = [r for r in sel if r["env_id"] == env and r["complexity"] == level]
            assert n == len(group)
            assert rate == pytest.approx(np.mean([r["success"] for r in group]))
    steps = s["complexity_by_step"]["game:Mastermind"]
    assert [p[0] for p in steps] == [0, 1, 2, 3]
    for step, mean, n in steps:
        levels = [r["complexity"] for r in sel if r["env_id"] == "game:Mastermind" and r["metrics"]["step"] == step]
        assert (mean, n) == (pytest.approx(np.mean(levels)), len(levels))
    hist = s["return_histogram"]
    assert sum(hist["counts"]) == len(sel)
    assert len(hist["edges"]) == len(hist["counts"]) + 1


def test_episode_view_marks_moves_format_errors_and_advantages(index: TrajectoryIndex) -> None:
    recs = _records(index)
    i = next(k for k, r in enumerate(recs) if r["env_id"] == "game:GuessTheNumber" and "zebra" in _text(r))
    ep = episode_view(index.record(i), index.row(i))
    first, second = ep["turn_list"][0], ep["turn_list"][1]
    assert first["format_error"] is True and first["move"] is None
    assert "boxed" in first["error_message"]
    assert second["format_error"] is False and second["move"]["move"] == "1"
    assert ep["turns"] == len(ep["turn_list"]) == len(recs[i]["turns"])
    assert all(t["ret"] is not None for t in ep["turn_list"])
    crashed = next(k for k, r in enumerate(recs) if r["env_id"] == "broken:Crashes")
    assert "simulated env crash" in episode_view(index.record(crashed), index.row(crashed))["error"]
    k = next(k for k, r in enumerate(recs) if "step" in r["metrics"])
    sampled = episode_view(index.record(k), index.row(k))
    assert all(isinstance(t["advantage"], float) for t in sampled["turn_list"])
    assert ep["turn_list"][0]["advantage"] is None  # the collector fills returns, not advantages


def test_bad_inputs_are_named(tmp_path: Path) -> None:
    with pytest.raises(TrajectoryFileError, match="no such file"):
        TrajectoryIndex([tmp_path / "missing.jsonl"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(TrajectoryFileError, match="no trajectory JSONL files"):
        TrajectoryIndex([tmp_path / "empty"])
    junk = tmp_path / "junk.jsonl"
    junk.write_text('{"a": 1}\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(TrajectoryFileError, match=r"no trajectory records in .*junk\.jsonl.*junk\.jsonl:1"):
        TrajectoryIndex([junk])
    for params, word in [({"sort": "bogus"}, "sort"), ({"cmin": "x"}, "cmin"), ({"limit": "5000"}, "limit"),
                         ({"success": "maybe"}, "success")]:  # fmt: skip
        with pytest.raises(ValueError, match=word):
            parse_query(params)


def test_nan_rewards_and_files_changed_after_indexing(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_jsonl([Trajectory("a:B", 0, 1, [Turn("o", "a", math.nan, {"x": math.inf})])] * 2, path)
    idx = TrajectoryIndex([path])
    out = idx.query(Query(), 0, 10)
    assert json.loads(to_json(out))["rows"][0]["return"] == "nan"  # strict JSON a browser can parse
    assert json.loads(to_json(episode_view(idx.record(0), idx.row(0))))["turn_list"][0]["info"]["x"] == "inf"
    path.write_text("garbage\n" * 10, encoding="utf-8")
    with pytest.raises(ValueError, match="changed since it was indexed"):
        idx.record(1)
    with pytest.raises(IndexError, match="no episode 7"):
        idx.record(7)


def test_hostile_lines_are_skipped_and_reported_not_fatal(tmp_path: Path) -> None:
    good = {"env_id": "a:B", "seed": 1, "complexity": 2, "turns": [{"observation": "o", "action": "a", "reward": 1}]}
    hostile = {
        "infinite complexity": '{"env_id": "a:B", "complexity": Infinity, "turns": []}',
        "huge seed": json.dumps({**good, "seed": 2**63}),
        "huge step": json.dumps({**good, "metrics": {"step": -(2**70)}}),
        "huge complexity": json.dumps({**good, "complexity": 10**30}),
        "deep nesting": '{"env_id": "a:B", "turns": [], "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
        "nan complexity": '{"env_id": "a:B", "complexity": NaN, "turns": []}',
    }
    path = tmp_path / "t.jsonl"
    lines = [
        json.dumps(good),
        *hostile.values(),
        json.dumps({**good, "turns": [{"observation": "o", "action": "a", "reward": math.inf}]}),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    idx = TrajectoryIndex([path])
    assert len(idx) == 2  # the two good lines, whatever came between them
    assert idx.n_problems == len(hostile)
    assert [p.split(":")[1] for p in idx.problems] == [str(n) for n in range(2, 2 + len(hostile))]
    assert any("64-bit" in p for p in idx.problems) and any("too deeply" in p for p in idx.problems)
    assert json.loads(to_json(idx.query(Query(), 0, 10)))["total"] == 2
    assert idx.record(1)["seed"] == 1
