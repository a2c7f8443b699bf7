"""Server counters: sessions, steps and their rate, env failures, HTTP errors, step latency percentiles."""

from __future__ import annotations

import time
from collections import Counter, deque
from typing import Any

import numpy as np


class Metrics:
    """Cheap counters updated on the event loop thread (no locking needed there)."""

    WINDOW_S = 10.0
    LATENCY_SAMPLES = 4096

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.sessions_created = 0
        self.sessions_closed = 0
        self.sessions_collected = 0
        self.steps_total = 0
        self.resets_total = 0
        self.env_errors: Counter[str] = Counter()
        self.http_errors: Counter[int] = Counter()
        self._buckets: deque[list[float]] = deque()  # [second, steps]
        self._latency: deque[float] = deque(maxlen=self.LATENCY_SAMPLES)

    def step_done(self, seconds: float, error_type: str | None) -> None:
        """Count one env step that took `seconds` (and its failure, if any)."""
        self.steps_total += 1
        self._latency.append(seconds)
        if error_type is not None:
            self.env_errors[error_type] += 1
        now = float(int(time.monotonic()))
        buckets = self._buckets
        if buckets and buckets[-1][0] == now:
            buckets[-1][1] += 1
        else:
            buckets.append([now, 1])
            while buckets and buckets[0][0] < now - self.WINDOW_S:
                buckets.popleft()

    def steps_per_s(self) -> float:
        """Steps per second over the last `WINDOW_S` seconds (or since start, if younger)."""
        now = time.monotonic()
        horizon = min(self.WINDOW_S, max(now - self.started, 1e-9))
        recent = sum(n for second, n in self._buckets if second >= now - horizon - 1)
        return recent / max(horizon, 1.0)

    def snapshot(self, active_sessions: int) -> dict[str, Any]:
        """The ``/metrics`` document."""
        lat = np.asarray(self._latency, dtype=np.float64)
        p50, p99 = (float(np.percentile(lat, 50) * 1e3), float(np.percentile(lat, 99) * 1e3)) if lat.size else (0, 0)
        return {
            "uptime_s": round(time.monotonic() - self.started, 3),
            "active_sessions": active_sessions,
            "sessions_created": self.sessions_created,
            "sessions_closed": self.sessions_closed,
            "sessions_collected_idle": self.sessions_collected,
            "steps_total": self.steps_total,
            "resets_total": self.resets_total,
            "steps_per_s": round(self.steps_per_s(), 1),
            "step_latency_ms": {"p50": round(p50, 3), "p99": round(p99, 3), "samples": int(lat.size)},
            "env_errors_total": sum(self.env_errors.values()),
            "env_errors": dict(self.env_errors),
            "http_errors": {str(k): v for k, v in sorted(self.http_errors.items())},
        }
