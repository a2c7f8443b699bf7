"""`TrajectoryIndex`: per-episode columns of trajectory JSONL files, filtered, sorted and paged in milliseconds.

Loading reads every line once: the episode's summary (env id, seed, complexity, turns, return, success, error,
training step, format errors) goes into numpy columns, its observations and actions into one lower-cased byte
corpus for text search, and its file offset is kept so `episode` re-reads only that line. 100k episodes need the
columns (a few MB) plus the corpus (about the size of the text); no episode is held as a Python object.

Bad lines never stop a load: each is skipped and reported in `problems` with its file and line number.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from gymverse.viewer.query import NO_POLICY, NO_STEP, Query, summarize
from gymverse.viewer.records import load_record, summarize_record

#: ``progress(files_done, files_total, episodes_so_far, current_path)`` while loading.
ProgressFn = Callable[[int, int, int, str], None]
NO_SEED = np.iinfo(np.int64).min
_SEP = b"\x00"  # between texts in the search corpus: a query never spans two observations/actions
MAX_PROBLEMS = 200


class TrajectoryFileError(ValueError):
    """A path that holds no readable trajectory records."""


def looks_like_trajectories(path: Path) -> bool:
    """Whether the first non-empty line of `path` is a trajectory record (to pick files inside run directories)."""
    try:
        with open(path, "rb") as fh:
            for line in fh:
                if line.strip():
                    rec = load_record(line)
                    return isinstance(rec, dict) and "env_id" in rec and "turns" in rec
    except (OSError, ValueError):
        return False
    return False


def resolve_paths(paths: Iterable[str | Path]) -> tuple[list[Path], list[str]]:
    """The JSONL files named by `paths` (directories searched recursively), plus notes on files skipped."""
    files: list[Path] = []
    notes: list[str] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(f for f in p.rglob("*.jsonl") if f.is_file())
            for f in found:
                if looks_like_trajectories(f):
                    files.append(f)
                else:
                    notes.append(f"{f}: skipped (not trajectory records)")
            if not any(f in files for f in found):
                raise TrajectoryFileError(f"{p}: no trajectory JSONL files (*.jsonl with env_id and turns) inside")
        elif p.is_file():
            files.append(p)
        else:
            raise TrajectoryFileError(f"{p}: no such file or directory")
    return list(dict.fromkeys(files)), notes


@dataclass
class _Columns:
    """Python lists filled while loading; turned into numpy arrays at the end."""

    file: list[int] = field(default_factory=list)
    offset: list[int] = field(default_factory=list)
    line: list[int] = field(default_factory=list)
    env: list[int] = field(default_factory=list)
    policy: list[int] = field(default_factory=list)
    seed: list[int] = field(default_factory=list)
    complexity: list[int] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)
    ret: list[float] = field(default_factory=list)
    success: list[bool] = field(default_factory=list)
    has_error: list[bool] = field(default_factory=list)
    step: list[int] = field(default_factory=list)
    format_errors: list[int] = field(default_factory=list)
    truncated: list[bool] = field(default_factory=list)


class TrajectoryIndex:
    """Episodes of one or more trajectory JSONL files, as columns (see the module docstring)."""

    def __init__(self, paths: Sequence[str | Path], progress: ProgressFn | None = None) -> None:
        t0 = time.perf_counter()
        self.files, self.notes = resolve_paths(paths)
        self.problems: list[str] = []
        self.n_problems = 0
        self.env_names: list[str] = []
        self.policy_names: list[str] = []
        self.errors: dict[int, str] = {}
        env_code: dict[str, int] = {}
        policy_code: dict[str, int] = {}
        cols = _Columns()
        corpus: list[bytes] = []
        starts = [0]
        for fi, path in enumerate(self.files):
            if progress is not None:
                progress(fi, len(self.files), len(cols.env), str(path))
            with open(path, "rb") as fh:
                offset = 0
                for lineno, line in enumerate(fh, 1):
                    here, offset = offset, offset + len(line)
                    if not line.strip():
                        continue
                    try:
                        r = summarize_record(load_record(line))
                    except (ValueError, TypeError, OverflowError) as exc:  # JSON/Unicode errors are ValueErrors
                        self._problem(f"{path}:{lineno}: skipped: {exc}")
                        continue
                    i = len(cols.env)
                    if r.error is not None:
                        self.errors[i] = r.error
                    cols.file.append(fi)
                    cols.offset.append(here)
                    cols.line.append(lineno)
                    cols.env.append(env_code.setdefault(r.env_id, len(env_code)))
                    cols.policy.append(
                        NO_POLICY if r.policy is None else policy_code.setdefault(r.policy, len(policy_code))
                    )
                    cols.seed.append(NO_SEED if r.seed is None else r.seed)
                    cols.complexity.append(r.complexity)
                    cols.turns.append(r.turns)
                    cols.ret.append(r.total)
                    cols.success.append(r.success)
                    cols.has_error.append(r.error is not None)
                    cols.step.append(NO_STEP if r.step is None else r.step)
                    cols.format_errors.append(r.format_errors)
                    cols.truncated.append(r.truncated)
                    blob = "\x00".join(r.texts).lower().encode("utf-8", "replace") + _SEP
                    corpus.append(blob)
                    starts.append(starts[-1] + len(blob))
                    if progress is not None and len(cols.env) % 20_000 == 0:
                        progress(fi, len(self.files), len(cols.env), str(path))
        if not cols.env:
            where = ", ".join(str(f) for f in self.files) or ", ".join(str(p) for p in paths)
            first = f" (first problem: {self.problems[0]})" if self.problems else ""
            raise TrajectoryFileError(f"no trajectory records in {where}{first}")
        self.env_names = list(env_code)
        self.policy_names = list(policy_code)
        self.file = np.asarray(cols.file, dtype=np.int32)
        self.offset = np.asarray(cols.offset, dtype=np.int64)
        self.line = np.asarray(cols.line, dtype=np.int64)
        self.env = np.asarray(cols.env, dtype=np.int32)
        self.policy = np.asarray(cols.policy, dtype=np.int32)
        self.seed = np.asarray(cols.seed, dtype=np.int64)
        self.complexity = np.asarray(cols.complexity, dtype=np.int64)
        self.turns = np.asarray(cols.turns, dtype=np.int64)
        self.ret = np.asarray(cols.ret, dtype=np.float64)
        self.success = np.asarray(cols.success, dtype=bool)
        self.has_error = np.asarray(cols.has_error, dtype=bool)
        self.step = np.asarray(cols.step, dtype=np.int64)
        self.format_errors = np.asarray(cols.format_errors, dtype=np.int64)
        self.truncated = np.asarray(cols.truncated, dtype=bool)
        self._corpus = b"".join(corpus)
        self._starts = starts
        self._orders: dict[tuple[str, bool], np.ndarray] = {}
        self._masks: OrderedDict[Query, np.ndarray] = OrderedDict()
        self.load_seconds = time.perf_counter() - t0
        if progress is not None:
            progress(len(self.files), len(self.files), len(self), "")

    def _problem(self, message: str) -> None:
        self.n_problems += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(message)

    def __len__(self) -> int:
        return int(self.env.shape[0])

    @property
    def has_step(self) -> bool:
        """Whether any episode carries a training step (``metrics["step"]``)."""
        return bool((self.step != NO_STEP).any())

    def meta(self) -> dict[str, Any]:
        """What the page shows before any query: files, envs, ranges and load problems."""
        return {
            "files": [str(f) for f in self.files],
            "episodes": len(self),
            "envs": sorted(self.env_names),
            "policies": sorted(self.policy_names),
            "complexity": [int(self.complexity.min()), int(self.complexity.max())],
            "has_step": self.has_step,
            "problems": self.problems,
            "n_problems": self.n_problems,
            "notes": self.notes,
            "load_seconds": round(self.load_seconds, 3),
        }

    # ------------------------------------------------------------------------------------------------ querying
    def text_mask(self, text: str) -> np.ndarray:
        """Episodes whose observations or actions contain `text` (case-insensitive substring)."""
        needle = text.lower().encode("utf-8", "replace").replace(_SEP, b"")
        mask = np.zeros(len(self), dtype=bool)
        if not needle:
            mask[:] = True
            return mask
        corpus, starts, find = self._corpus, self._starts, self._corpus.find
        hits: list[int] = []
        pos = corpus.find(needle)
        while pos >= 0:
            ep = bisect_right(starts, pos) - 1
            hits.append(ep)
            pos = find(needle, starts[ep + 1])  # one hit per episode is enough: jump to the next one
        mask[hits] = True
        return mask

    def mask(self, q: Query) -> np.ndarray:
        """Boolean mask of the episodes `q` selects (the last few masks are cached for paging)."""
        if q in self._masks:
            self._masks.move_to_end(q)
            return self._masks[q]
        m = np.ones(len(self), dtype=bool)
        if q.envs:
            codes = [self.env_names.index(e) for e in q.envs if e in self.env_names]
            m &= np.isin(self.env, np.asarray(codes, dtype=np.int32))
        if q.policies:
            codes = [self.policy_names.index(p) for p in q.policies if p in self.policy_names]
            m &= np.isin(self.policy, np.asarray(codes, dtype=np.int32))
        if q.cmin is not None:
            m &= self.complexity >= q.cmin
        if q.cmax is not None:
            m &= self.complexity <= q.cmax
        if q.success is not None:
            m &= self.success == q.success
        if q.error is not None:
            m &= self.has_error == q.error
        if q.format_error is not None:
            m &= (self.format_errors > 0) == q.format_error
        if q.text:
            m &= self.text_mask(q.text)
        self._masks[q] = m
        if len(self._masks) > 16:
            self._masks.popitem(last=False)
        return m

    def _sort_key(self, key: str) -> np.ndarray:
        if key in ("env", "policy"):
            names, codes = (self.env_names, self.env) if key == "env" else (self.policy_names, self.policy)
            rank = np.argsort(np.argsort(np.asarray([*names, ""], dtype=object)))  # "" (no policy) sorts first
            return rank[codes]  # NO_POLICY (-1) indexes the trailing ""
        column = {
            "id": None,
            "seed": self.seed,
            "complexity": self.complexity,
            "turns": self.turns,
            "return": self.ret,
            "success": self.success,
            "error": self.has_error,
            "step": self.step,
            "format_errors": self.format_errors,
        }[key]
        return np.arange(len(self)) if column is None else column

    def order(self, key: str, descending: bool = False) -> np.ndarray:
        """Episode ids sorted by `key` (ties by id, ascending), computed once per key and direction."""
        cached = self._orders.get((key, descending))
        if cached is None:
            values = self._sort_key(key)
            if descending:
                values = -values.astype(np.float64) if values.dtype == bool else -values
            cached = np.lexsort((np.arange(len(self)), values))
            self._orders[(key, descending)] = cached
        return cached

    def query(self, q: Query, offset: int = 0, limit: int = 100, with_summary: bool = True) -> dict[str, Any]:
        """One page of rows for `q`, the number of matches and (optionally) the summary panels' data."""
        t0 = time.perf_counter()
        m = self.mask(q)
        order = self.order(q.sort, q.descending)
        selected = order[m[order]]
        page = selected[offset : offset + limit]
        rows = [self.row(int(i)) for i in page]
        out: dict[str, Any] = {"total": int(selected.shape[0]), "offset": offset, "rows": rows}
        if with_summary:
            out["summary"] = summarize(self, m)
        out["server_ms"] = round((time.perf_counter() - t0) * 1000, 2)
        return out

    # ----------------------------------------------------------------------------------------------- episodes
    def row(self, i: int) -> dict[str, Any]:
        """The list row of episode `i`."""
        seed, step = int(self.seed[i]), int(self.step[i])
        return {
            "id": i,
            "env": self.env_names[int(self.env[i])],
            "policy": self.policy_name(i),
            "seed": None if seed == NO_SEED else seed,
            "complexity": int(self.complexity[i]),
            "turns": int(self.turns[i]),
            "return": float(self.ret[i]),
            "success": bool(self.success[i]),
            "error": self.errors.get(i),
            "step": None if step == NO_STEP else step,
            "format_errors": int(self.format_errors[i]),
            "truncated": bool(self.truncated[i]),
            "source": f"{self.files[int(self.file[i])].name}:{int(self.line[i])}",
        }

    def policy_name(self, i: int) -> str | None:
        """The policy that played episode `i`, if its record says."""
        code = int(self.policy[i])
        return None if code == NO_POLICY else self.policy_names[code]

    def record(self, i: int) -> dict[str, Any]:
        """The raw JSON record of episode `i`, re-read from its file."""
        if not 0 <= i < len(self):
            raise IndexError(f"no episode {i}: the index holds {len(self)}")
        path = self.files[int(self.file[i])]
        with open(path, "rb") as fh:
            fh.seek(int(self.offset[i]))
            line = fh.readline()
        try:
            rec = load_record(line)
            summarize_record(rec)
        except (ValueError, TypeError, OverflowError) as exc:
            raise ValueError(f"{path}:{int(self.line[i])} changed since it was indexed: {exc}") from None
        return rec


__all__ = ["NO_SEED", "NO_STEP", "ProgressFn", "TrajectoryFileError", "TrajectoryIndex", "resolve_paths"]
