"""The Python 3.10 backports in `gymverse.pycompat`, exercised on whatever interpreter runs the tests."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

import pytest
from gymverse.pycompat import TIMEOUT_ERRORS, _timeout_backport, timeout


@pytest.mark.parametrize("cm", [_timeout_backport, timeout])
def test_timeout_raises_builtin_timeout_error_and_cancels_in_place(cm: Any) -> None:
    reached_after_sleep = []

    async def body() -> None:
        async with cm(0.05):
            await asyncio.sleep(5)
            reached_after_sleep.append(True)

    with pytest.raises(TimeoutError):
        asyncio.run(asyncio.wait_for(body(), 3))
    assert not reached_after_sleep


@pytest.mark.parametrize("cm", [_timeout_backport, timeout])
def test_timeout_passes_results_and_other_cancellations_through(cm: Any) -> None:
    async def quick() -> int:
        async with cm(5):
            await asyncio.sleep(0)
            return 7

    async def unbounded() -> int:
        async with cm(None):
            return 8

    assert asyncio.run(quick()) == 7
    assert asyncio.run(unbounded()) == 8

    async def cancelled_from_outside() -> None:
        async def inner() -> None:
            async with cm(5):
                await asyncio.sleep(5)

        task = asyncio.ensure_future(inner())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled_from_outside())


def test_timeout_errors_cover_every_timeout_class() -> None:
    for cls in (TimeoutError, asyncio.TimeoutError, concurrent.futures.TimeoutError):
        assert issubclass(cls, TIMEOUT_ERRORS)
