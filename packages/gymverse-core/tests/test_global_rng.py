"""The process-global generators under threads: a private-state swap in one thread is never judged as another
thread's env touching them (the inline evaluator runs envs of several files in threads of one process)."""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymverse
from gymverse import EnvLike
from gymverse.checker.checks import check_global_rng
from gymverse.global_rng import GlobalRngScope, GlobalRngSnapshot


def _mastermind(level: int) -> EnvLike:
    return gymverse.make("game:Mastermind", complexity=level)


def test_swaps_and_judgements_in_other_threads_are_not_blamed_on_the_checked_env() -> None:
    stop = threading.Event()

    def swapping() -> None:  # what a GEM or suite adapter does around each call into its env
        scope = GlobalRngScope(7)
        while not stop.is_set():
            with scope.active():
                random.random()
                time.sleep(0.002)

    thread = threading.Thread(target=swapping)
    thread.start()
    try:
        with ThreadPoolExecutor(2) as pool:  # two judgements at once must not undo each other's starting point
            outcomes = list(pool.map(lambda seed: check_global_rng(_mastermind, 3, seed, None), range(20)))
    finally:
        stop.set()
        thread.join()
    assert outcomes == [(True, "")] * 20


def test_an_env_that_draws_from_the_global_generator_is_still_caught_and_the_callers_state_kept() -> None:
    def build(level: int) -> EnvLike:
        env = _mastermind(level)
        real_reset = env.reset

        def reset(seed: int | None = None) -> tuple[str, dict[str, Any]]:
            random.random()
            return real_reset(seed=seed)

        env.reset = reset  # type: ignore[method-assign]
        return env

    random.seed(123)
    before = GlobalRngSnapshot.take()
    passed, reason = check_global_rng(build, 3, 0, None)
    assert not passed and "global `random`" in reason
    assert before.changed() == []  # the caller's generators are put back
