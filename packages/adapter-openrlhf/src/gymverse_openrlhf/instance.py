"""OpenRLHF agent over GymVerse env sessions: `GymVerseAgentInstance` and the `AgentExecutor` OpenRLHF loads.

One instance runs one episode. ``reset`` builds the env from the label (env id, seed, complexity; the
curriculum actor's level when ``--gymverse.evolve`` is on) and returns the first observation as the prompt;
``step`` sends the model's text to the env and returns the reward, ``scores`` = success, the next observation as
a chat turn, ``done`` and numeric ``extra_logs``. An env that raises ends its own episode (reward 0, the error
as the last observation, ``gymverse_error`` = 1), never the rollout.

`AgentExecutor` is OpenRLHF's own `MultiTurnAgentExecutor` over this instance class. It only adds what the
instance cannot see through OpenRLHF's interface: the tokenizer (for chat formatting) and the last generated
token ids (to tell whether the model closed its turn), and it closes env sessions when an episode is cut short.
"""

from __future__ import annotations

import contextvars
import logging
from dataclasses import dataclass, field
from typing import Any

from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

from gymverse_openrlhf.chat import ChatTurns, plain_feedback, render_prompt
from gymverse_openrlhf.config import GymVerseConfig
from gymverse_openrlhf.labels import EnvLabel, initial_observation
from gymverse_openrlhf.sessions import open_session

logger = logging.getLogger("gymverse_openrlhf")

#: Keys of ``extra_logs`` (always all present: OpenRLHF batches logs key by key).
LOG_KEYS = ("gymverse_env_index", "gymverse_complexity", "gymverse_success", "gymverse_turns", "gymverse_error")


@dataclass
class Rollout:
    """Per-episode context `AgentExecutor` shares with its instance (one asyncio task each)."""

    tokenizer: Any
    last_token_ids: list[int] = field(default_factory=list)
    sessions: list[Any] = field(default_factory=list)
    _turns: ChatTurns | None = None
    _turns_read: bool = False

    def chat_turns(self) -> ChatTurns | None:
        """The tokenizer's chat template pieces (read once)."""
        if not self._turns_read:
            self._turns, self._turns_read = _chat_turns(self.tokenizer), True
        return self._turns


_CACHE: dict[int, tuple[Any, ChatTurns | None]] = {}


def _chat_turns(tokenizer: Any) -> ChatTurns | None:
    hit = _CACHE.get(id(tokenizer))
    if hit is None or hit[0] is not tokenizer:
        hit = (tokenizer, ChatTurns.from_tokenizer(tokenizer))
        _CACHE[id(tokenizer)] = hit
    return hit[1]


_ROLLOUT: contextvars.ContextVar[Rollout | None] = contextvars.ContextVar("gymverse_rollout", default=None)


def _tensor(value: float) -> Any:
    import torch

    return torch.tensor(float(value))


class GymVerseAgentInstance(AgentInstanceBase):
    """One GymVerse episode driven by OpenRLHF's multi-turn loop."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.label: EnvLabel | None = None
        self.session: Any = None
        self.level = 0
        self.turns = 0
        self.error: str | None = None

    async def reset(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Build the env from ``states["label"]`` and return the first observation as the prompt."""
        label = EnvLabel.parse(states.get("label"))
        self.label = label
        level = label.complexity
        if GymVerseConfig.from_env().evolve:
            from gymverse_openrlhf.curriculum import get_actor

            level = int(await get_actor().level.remote(label.env_id))
        self.session = await open_session(label.env_id, label.seed, level)
        rollout = _ROLLOUT.get()
        if rollout is not None:
            rollout.sessions.append(self.session)
        try:
            obs, info = await self.session.reset(seed=label.seed)
        except Exception as exc:  # sessions without fault isolation (InProcessSession)
            obs, info = f"The environment failed and this episode was stopped: {exc!r}", {"error": repr(exc)}
        self.level = int(info.get("complexity") or level or 0)
        if info.get("error"):
            self.error = f"{label.env_id} (seed {label.seed}) failed at reset: {info['error']}"
            logger.warning("GymVerse episode ended: %s", self.error)
        prompt = states.get("observation", "")
        return {"observation": self._prompt(prompt, obs, label, rollout)}

    def _prompt(self, given: str, obs: str, label: EnvLabel, rollout: Rollout | None) -> str:
        # The dataset prompt holds the observation at the label's complexity; keep the lab's own template
        # around it and swap in the observation actually in effect (it differs once the curriculum moved).
        if self.error is None and obs in given:
            return given
        if self.error is None:
            stale = initial_observation(label.env_id, label.seed, label.complexity)
            if stale and stale in given:
                return given.replace(stale, obs)
        rendered = render_prompt(rollout.tokenizer, obs) if rollout is not None else None
        return rendered if rendered is not None else obs

    async def step(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Apply ``states["action_text"]`` to the env; rewards, scores = success, chat feedback, done, logs."""
        if self.label is None or self.session is None:
            raise RuntimeError("GymVerseAgentInstance.step() called before reset()")
        self.turns += 1
        if self.error is not None:  # the reset failed: this episode ends at its first action
            return await self._finish(0.0, False, f"The environment failed: {self.error}")
        try:
            obs, reward, terminated, truncated, info = await self.session.step(states.get("action_text", ""))
        except Exception as exc:
            obs, reward, terminated, truncated, info = "", 0.0, False, True, {"error": repr(exc)}
        if info.get("error"):
            self.error = f"{self.label.env_id} (seed {self.label.seed}) failed at turn {self.turns}: {info['error']}"
            logger.warning("GymVerse episode ended: %s", self.error)
            return await self._finish(0.0, False, f"The environment failed: {self.error}")
        if terminated or truncated:
            return await self._finish(float(reward), bool(info.get("success", False)), None)
        return self._result(float(reward), False, self._feedback(obs), done=False)

    def _feedback(self, obs: str) -> str:
        rollout = _ROLLOUT.get()
        turns = rollout.chat_turns() if rollout is not None else None
        if turns is None or rollout is None:
            return plain_feedback(obs)
        return turns.feedback(obs, rollout.last_token_ids, rollout.tokenizer)

    async def _finish(self, reward: float, success: bool, message: str | None) -> dict[str, Any]:
        if self.session is not None and hasattr(self.session, "close"):
            res = self.session.close()
            if hasattr(res, "__await__"):
                await res
        # the episode is over: only an error gets a last observation (so transcripts say why it stopped)
        feedback = self._feedback(message) if message is not None else ""
        return self._result(reward, success, feedback, done=True)

    def _result(self, reward: float, success: bool, feedback: str, *, done: bool) -> dict[str, Any]:
        assert self.label is not None
        logs = dict(
            zip(
                LOG_KEYS,
                (self.label.env_index, self.level, float(success), self.turns, float(self.error is not None)),
            )
        )
        return {
            "rewards": _tensor(reward),
            "scores": float(success),
            "environment_feedback": feedback,
            "done": done,
            "extra_logs": logs,
        }


class _RecordingEngine:
    """The rollout engine, recording each generation's token ids for the instance (everything else delegates)."""

    def __init__(self, engine: Any, rollout: Rollout) -> None:
        self._engine = engine
        self._rollout = rollout

    async def generate(self, *args: Any, **kwargs: Any) -> Any:
        """Generate through the wrapped engine and remember the action tokens."""
        out = await self._engine.generate(*args, **kwargs)
        self._rollout.last_token_ids = list(out.outputs[0].token_ids)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


class AgentExecutor(MultiTurnAgentExecutor):
    """What ``--train.agent_func_path`` loads: OpenRLHF's multi-turn executor over `GymVerseAgentInstance`."""

    def __init__(self) -> None:
        super().__init__(GymVerseAgentInstance)

    async def execute(
        self,
        prompt: Any,
        label: Any,
        sampling_params: Any,
        max_length: int,
        hf_tokenizer: Any,
        llm_engine: Any,
        images: Any = None,
    ) -> dict[str, Any]:
        """Run one episode with OpenRLHF's loop; sessions of episodes cut short (token budget) are closed."""
        rollout = Rollout(hf_tokenizer)
        token = _ROLLOUT.set(rollout)
        try:
            engine = _RecordingEngine(llm_engine, rollout)
            return await super().execute(prompt, label, sampling_params, max_length, hf_tokenizer, engine, images)
        finally:
            _ROLLOUT.reset(token)
            for session in rollout.sessions:
                if hasattr(session, "close"):
                    res = session.close()
                    if hasattr(res, "__await__"):
                        await res
