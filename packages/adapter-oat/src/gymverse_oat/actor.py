"""`GymVerseActor`: oat's multi-turn PPO actor; ``collect_experience`` plays GymVerse episodes with `run_episode`
on shared-pool sessions (default step/reset timeouts, sized for ``--num_env``), the core renderer, vLLM calls
batched across concurrent episodes (`BatchedGenerate`), the curriculum replica's env, level and turn cap, and
``--max_model_len`` as each episode's token budget, ``num_env`` at a time until the batch holds
``rollout_batch_size_per_device`` transitions (``one_env``: a batch from one env, envs taking turns)."""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any

import vllm
from gymverse.curriculum import CurriculumState
from gymverse.failures import GenerationError
from gymverse.pool import configure_shared_pool, pool_size_for
from gymverse.rollout import BatchedGenerate, Generation, open_session, renderer_for, run_episode
from gymverse.trajectory import Trajectory
from oat.algorithms.ppo_multiturn import PPOMultiTurnActor

from gymverse_oat.args import GymVerseArgs
from gymverse_oat.compat import patch_oat_for_torch
from gymverse_oat.episodes import GymVerseTransition, episode_transitions, generations_from_vllm

patch_oat_for_torch()
logger = logging.getLogger(__name__)
MAX_EMPTY_WAVES = 8


class GymVerseActor(PPOMultiTurnActor):
    """Collects GymVerse episodes for oat's learner (module docstring)."""

    args: GymVerseArgs

    def init(self, actor_id: int, save_path: str) -> None:
        """oat's actor init (vLLM engine, plasma client), then the renderer, curriculum replica and sampler."""
        super().init(actor_id, save_path)
        args = self.args
        # replace: this process may already have run a pool with other limits (a test); a run configures once
        configure_shared_pool(pool_size_for(args.num_env), replace=True)
        self.renderer = renderer_for(self.tokenizer, system_prompt=args.system_prompt)
        stop = sorted(getattr(self.renderer, "stop_ids", ()) or [self.tokenizer.eos_token_id])
        # log-probs are what oat's learner compares its own against (truncated importance sampling)
        self.sampling_params = vllm.SamplingParams(
            temperature=args.temperature,
            top_p=args.top_p,
            top_k=args.top_k,
            max_tokens=args.generate_max_length,
            n=1,
            logprobs=1,
            stop_token_ids=stop,
        )
        self.curriculum = CurriculumState.from_config(args.curriculum_config())
        self.episodes_started = 0
        self._loop = asyncio.new_event_loop()

    def load_curriculum(self, state: dict[str, Any]) -> dict[str, int]:
        """Adopt the learner's curriculum state (levels, streaks, horizon); returns the levels now in effect."""
        self.curriculum.load_state_dict(state)
        return self.curriculum.levels()

    def curriculum_state(self) -> dict[str, Any]:
        """This replica's state (its mixer position is the one the learner checkpoints)."""
        return self.curriculum.state_dict()

    def collect_experience(self) -> tuple[list[list[GymVerseTransition]], dict[str, Any]]:
        """One batch of finished episodes as oat transitions (void episodes left out), plus collection metrics."""
        trajectories = self._loop.run_until_complete(self._collect())
        stop_ids = frozenset(getattr(self.renderer, "stop_ids", ()))
        episodes = [
            ep
            for t in trajectories
            if (ep := episode_transitions(t, self.renderer, ignore_no_eos=self.args.ignore_no_eos, stop_ids=stop_ids))
        ]
        void = [t for t in trajectories if t.error is not None]
        for t in void:
            logger.warning("episode %s on %s is void (%s): %s", t.episode_id, t.env_id, t.stop_reason, t.error)
        if not episodes:
            raise RuntimeError(f"actor {self.actor_id}: no episode produced a trained turn ({len(void)} void)")
        info = {
            "actor/gymverse_void_episodes": float(len(void)),
            "actor/gymverse_episodes": float(len(episodes)),
            "actor/gymverse_generate_calls": float(self._batched.calls),
        }
        return episodes, info

    def _run_batch(self, prompts: list[list[int]], caps: list[int | None]) -> list[Generation]:
        by_cap: dict[int | None, Any] = {}  # one SamplingParams per distinct cap (vLLM only reads them)
        for cap in caps:
            if cap not in by_cap:
                p = by_cap[cap] = copy.copy(self.sampling_params)
                if cap is not None:
                    p.max_tokens = cap if p.max_tokens is None else min(p.max_tokens, cap)
        return generations_from_vllm(self.generate(prompts, [by_cap[cap] for cap in caps]))

    async def _generate(self, prompt_ids: list[int], max_tokens: int | None) -> Generation:
        """A prompt vLLM would refuse (``--max_model_len``) ends its own episode, not the engine's whole batch."""
        limit = self.args.max_model_len
        if limit is not None and len(prompt_ids) >= limit:
            raise GenerationError(f"prompt of {len(prompt_ids)} tokens reaches --max_model_len {limit}")
        return await self._batched(prompt_ids, max_tokens)

    async def _collect(self) -> list[Trajectory]:
        args = self.args
        self._batched = BatchedGenerate(self._run_batch)
        batch_env = self.curriculum.sample_envs(1)[0] if args.env_mix == "one_env" else None
        trajectories: list[Trajectory] = []
        empty = 0
        while sum(len(t.turns) for t in trajectories if t.error is None) < args.rollout_batch_size_per_device:
            envs = [batch_env] * args.num_env if batch_env else self.curriculum.sample_envs(args.num_env)
            for _ in envs:
                self._batched.episode_started()
            wave = await asyncio.gather(*(self._episode(e) for e in envs))
            trajectories += wave
            empty = empty + 1 if all(t.error is not None or not t.turns for t in wave) else 0
            if empty >= MAX_EMPTY_WAVES:
                raise RuntimeError(f"{MAX_EMPTY_WAVES} rounds of episodes without a trained turn: {wave[0].error}")
        return trajectories

    async def _episode(self, env_id: str) -> Trajectory:
        args = self.args
        n = self.episodes_started
        self.episodes_started += 1
        seed = args.seed * 1_000_003 + self.actor_id * 100_003 + n  # distinct per actor, reproducible per run
        cfg = self.curriculum.episode_config(env_id)
        try:
            session = await open_session(env_id, seed=seed, complexity=cfg.complexity)
            try:
                return await run_episode(
                    session,
                    self._generate,
                    renderer=self.renderer,
                    horizon=cfg.max_turns,
                    seed=seed,
                    complexity=cfg.complexity,
                    max_tokens_per_turn=args.generate_max_length,
                    max_sequence_tokens=args.max_model_len,
                    episode_id=f"a{self.actor_id}-e{n}",
                )
            finally:
                await session.close()
        finally:
            self._batched.episode_finished()
