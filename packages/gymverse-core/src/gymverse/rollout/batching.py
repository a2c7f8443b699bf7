"""`BatchedGenerate`: one engine call for the replies of every episode that is waiting, for engines without a queue.

`run_episode` takes an async ``generate``; engines with their own request queue (vLLM's async server, SGLang's
router) take one request per episode. Engines driven by a synchronous batch call (oat's in-process vLLM, a local
HF model) need the concurrent episodes' prompts gathered: every episode awaits this callable, and it sends one
batch with the prompts of all episodes that are waiting, once every running episode is waiting (the batching of a
lockstep vectorized env, without the lockstep: episodes that finish early leave the batch).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from gymverse.rollout.episode import Generation

#: ``run_batch(prompts, max_tokens) -> generations``: the engine's synchronous batch call (run in a thread).
RunBatch = Callable[[list[list[int]], list[int | None]], list[Generation]]


class BatchedGenerate:
    """``await generate(prompt_ids, max_tokens)`` for many episodes, flushed as one engine call (module docstring).

    Call `episode_started` before an episode's first generation and `episode_finished` after its last.
    """

    def __init__(self, run_batch: RunBatch) -> None:
        self.run_batch = run_batch
        self.active = 0
        self.calls = 0
        self._pending: list[tuple[list[int], int | None, asyncio.Future[Generation]]] = []
        self._running = False

    def episode_started(self) -> None:
        """One more episode may ask for generations."""
        self.active += 1

    def episode_finished(self) -> None:
        """An episode will ask no more; the others may be waiting for it to flush."""
        self.active -= 1
        self._maybe_flush()

    async def __call__(self, prompt_ids: list[int], max_tokens: int | None) -> Generation:
        fut: asyncio.Future[Generation] = asyncio.get_running_loop().create_future()
        self._pending.append((list(prompt_ids), max_tokens, fut))
        self._maybe_flush()
        return await fut

    def _maybe_flush(self) -> None:
        if self._running or not self._pending or len(self._pending) < self.active:
            return
        batch, self._pending = self._pending, []
        self._running = True
        asyncio.get_running_loop().create_task(self._run(batch))

    async def _run(self, batch: list[tuple[list[int], int | None, asyncio.Future[Generation]]]) -> None:
        try:
            self.calls += 1
            outs = await asyncio.to_thread(self.run_batch, [b[0] for b in batch], [b[1] for b in batch])
            if len(outs) != len(batch):
                raise RuntimeError(f"the engine returned {len(outs)} generations for {len(batch)} prompts")
            for (_, _, fut), out in zip(batch, outs):
                fut.set_result(out)
        except Exception as err:  # a dead engine fails every waiting episode, loudly
            for _, _, fut in batch:
                if not fut.done():
                    fut.set_exception(err)
        finally:
            self._running = False
            self._maybe_flush()
