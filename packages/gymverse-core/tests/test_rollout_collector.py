"""The shared rollout collector: trajectories, horizon caps, complexity on the base env, fault isolation."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from gymverse.actions import parse_boxed
from gymverse.core import SUCCESS_REWARD, Env, EnvMetadata, StepResult, Wrapper
from gymverse.curriculum import AdaptiveHorizon, ComplexityController, CurriculumState, FixedHorizon
from gymverse.rollout import InProcessSession, PlainRenderer, RolloutCollector, Session, text_generate

LETTERS = "abcdefghij"


class Echo(Env):
    """Type back a word; its length is the complexity level (so a transcript reveals the level in effect)."""

    metadata = EnvMetadata(name="Echo", family="test", domain="other", description="echo a word", max_turns=4)
    complexity_params = {"length": (1, 10)}

    def _reset(self) -> tuple[str, dict[str, Any]]:
        self.word = "".join(LETTERS[int(i)] for i in self.rng.integers(0, 10, size=int(self.params["length"])))
        return f"Type: {self.word}", {}

    def _step(self, action: str) -> StepResult:
        if parse_boxed(action) == self.word:
            return StepResult("Correct.", SUCCESS_REWARD, True, False, {"success": True})
        return StepResult(f"Wrong. Type: {self.word}", 0.0, False, False, {})

    def solve(self) -> str:
        return r"\boxed{" + self.word + "}"


class Tag(Wrapper):
    """A do-nothing wrapper, stacked to check that complexity reaches the base env."""


RENDERER = PlainRenderer()


def echo_policy(wrong_first: int = 0) -> Any:
    async def policy(text: str) -> str:
        word = re.findall(r"Type: (\w+)", text)[-1]
        tries = text.count("Wrong.")
        return r"\boxed{nope}" if tries < wrong_first else r"\boxed{" + word + "}"

    return text_generate(policy, RENDERER)


async def _wrong(text: str) -> str:
    return r"\boxed{zzz}"


always_wrong = text_generate(_wrong, RENDERER)


def fixed(horizon: int) -> CurriculumState:
    return CurriculumState(horizon=FixedHorizon(horizon), evolution=False)


def test_trajectories_record_turns_returns_and_metadata() -> None:
    sessions = [InProcessSession(Echo(), "test:Echo") for _ in range(3)]
    col = RolloutCollector(echo_policy(wrong_first=2), gamma=0.5)
    trajs = col.collect_sync(sessions, seeds=[1, 2, 3])
    for t, seed in zip(trajs, [1, 2, 3]):
        assert (t.env_id, t.seed, t.complexity, t.success, t.truncated) == ("test:Echo", seed, 1, True, False)
        assert [turn.reward for turn in t.turns] == [0.0, 0.0, 1.0]
        assert [turn.ret for turn in t.turns] == [0.25, 0.5, 1.0]
        assert t.turns[0].observation.startswith("Type: ")
        assert t.turns[1].observation.startswith("Wrong.")
        assert t.turns[2].action.startswith(r"\boxed{")
        assert t.final_observation == "Correct."
        assert t.tokens is not None and len(t.tokens.turn_ends) == 3 and t.stop_reason == "terminated"
        text = RENDERER.decode(t.tokens.prompt_ids + t.tokens.response_ids)
        assert text.startswith("Observation: Type: ") and text.endswith(t.turns[2].action)
    again = RolloutCollector(echo_policy(wrong_first=2), gamma=0.5).collect_sync(
        [InProcessSession(Echo(), "test:Echo") for _ in range(3)], seeds=[1, 2, 3]
    )
    strip = [{**t.to_dict(), "episode_id": ""} for t in trajs]
    assert [{**t.to_dict(), "episode_id": ""} for t in again] == strip  # same seeds, same transcripts and tokens
    assert len({t.episode_id for t in [*trajs, *again]}) == 6


def test_horizon_caps_turns_and_env_budget_still_applies() -> None:
    col = RolloutCollector(always_wrong, curriculum=fixed(2), update_curricula=False)
    (t,) = col.collect_sync([InProcessSession(Echo(), "test:Echo")], seeds=[0])
    assert len(t.turns) == 2
    assert t.truncated
    assert not t.success
    assert t.metrics["horizon_truncated"] and t.stop_reason == "horizon"
    col = RolloutCollector(always_wrong, curriculum=fixed(50))
    (t,) = col.collect_sync([InProcessSession(Echo(), "test:Echo")], seeds=[0])
    assert len(t.turns) == 4
    assert t.truncated
    assert "horizon_truncated" not in t.metrics


def test_complexity_evolution_reaches_the_wrapped_base_env() -> None:
    # the reference's bug: the level was logged as raised while the wrapped base env stayed at level 1
    envs = [Tag(Tag(Echo())) for _ in range(4)]
    sessions = [InProcessSession(e, "test:Echo") for e in envs]
    ctrl = ComplexityController(promote_patience=2)
    col = RolloutCollector(echo_policy(), curriculum=CurriculumState(ctrl))
    seen = []
    for step in range(10):
        trajs = col.collect_sync(sessions, seeds=[100 * step + i for i in range(4)])
        for env, t in zip(envs, trajs):
            assert env.unwrapped.complexity == t.complexity
            assert len(re.findall(r"Type: (\w+)", t.turns[0].observation)[0]) == t.complexity  # really in effect
        seen.append(trajs[0].complexity)
        changes = col.last_level_changes
        assert [(c.old_level, c.new_level) for c in changes] == ([(seen[-1], seen[-1] + 1)] if step % 2 else [])
    assert seen == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    # the last update moved the controller to 6: the next episode runs there, on every base env
    assert ctrl.level("test:Echo") == 6
    trajs = col.collect_sync(sessions, seeds=[0, 1, 2, 3])
    assert [e.unwrapped.complexity for e in envs] == [6] * 4 == [t.complexity for t in trajs]


class IgnoresComplexity:
    """A broken session: accepts set_complexity but always resets at level 1."""

    env_id = "test:Echo"

    def __init__(self) -> None:
        self.env = Echo()

    def set_complexity(self, level: int) -> None:
        pass

    async def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        return self.env.reset(seed)

    async def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return tuple(self.env.step(action))  # type: ignore[return-value]

    async def close(self) -> None:
        pass


def test_level_mismatch_is_an_error_not_a_silent_log() -> None:
    ctrl = ComplexityController(initial_levels={"test:Echo": 3})
    col = RolloutCollector(echo_policy(), curriculum=CurriculumState(ctrl))
    assert isinstance(IgnoresComplexity(), Session)
    with pytest.raises(RuntimeError, match="requested complexity 3 but the env reset at complexity 1"):
        col.collect_sync([IgnoresComplexity()])


class Exploding(Echo):
    def _step(self, action: str) -> StepResult:
        raise OSError("disk on fire")


class CannotReset(Echo):
    def _reset(self) -> tuple[str, dict[str, Any]]:
        raise ValueError("bad instance")


def test_failing_session_ends_only_its_episode_and_is_left_out_of_curricula() -> None:
    ctrl = ComplexityController(promote_patience=1)
    sessions = [
        InProcessSession(Exploding(), "test:Boom"),
        InProcessSession(Echo(), "test:Echo"),
        InProcessSession(CannotReset(), "test:NoReset"),
    ]
    col = RolloutCollector(echo_policy(), curriculum=CurriculumState(ctrl))
    boom, ok, noreset = col.collect_sync(sessions, seeds=[0, 0, 0])
    assert noreset.error == "reset failed: ValueError: bad instance"
    assert noreset.turns == [] and noreset.stop_reason == "reset_error"
    assert boom.error == "OSError: disk on fire"
    assert boom.truncated and boom.stop_reason == "env_error"
    # the failed step is still a turn (its tokens are in the sequence), with reward 0 and the error
    assert [(t.reward, t.info["error"]) for t in boom.turns] == [(0.0, "OSError: disk on fire")]
    assert boom.tokens is not None and len(boom.tokens.turn_ends) == 1
    assert ok.success
    assert ok.error is None
    assert ctrl.levels() == {"test:Echo": 2}  # the failed envs never entered the statistics


class ReportsCrash(InProcessSession):
    """Like a vector backend: a crashed env comes back as a truncated step with info["error"]."""

    async def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return "", 0.0, False, True, {"error": "WorkerCrashed: exit code -9"}


def test_error_reported_in_info_marks_the_episode() -> None:
    ctrl = ComplexityController(promote_patience=1)
    col = RolloutCollector(echo_policy(), curriculum=CurriculumState(ctrl))
    (t,) = col.collect_sync([ReportsCrash(Echo(), "test:Echo")])
    assert t.error == "WorkerCrashed: exit code -9"
    assert t.truncated
    assert len(t.turns) == 1
    assert ctrl.levels() == {}


def test_text_policy_must_return_text_and_seeds_match_sessions() -> None:
    async def broken(text: str) -> Any:
        return 42

    with pytest.raises(TypeError, match="must return a str"):
        RolloutCollector(text_generate(broken, RENDERER)).collect_sync([InProcessSession(Echo(), "test:Echo")])
    with pytest.raises(ValueError, match="2 seeds for 1 sessions"):
        RolloutCollector(always_wrong).collect_sync([InProcessSession(Echo(), "test:Echo")], seeds=[1, 2])


def test_plain_renderer_layout() -> None:
    r = PlainRenderer(system_prompt="SYS")
    assert r.decode(r.initial("start")) == "SYS\n\nObservation: start\n\nAction:"
    assert r.decode(r.env_turn("o1", [])) == "\n\nObservation: o1\n\nAction:"
    assert r.action_text(list(b" <think>\nhmm\n</think>\n\n \\boxed{3} ")) == "\\boxed{3}"


def test_registry_env_text_policy_offload_and_adaptive_horizon() -> None:
    async def bisect(text: str) -> str:
        lo, hi = map(int, re.search(r"between (\d+) and (\d+)", text).groups())  # type: ignore[union-attr]
        for v, word in re.findall(r"(\d+) is too (low|high)", text):
            lo, hi = (int(v) + 1, hi) if word == "low" else (lo, int(v) - 1)
        return r"\boxed{" + str((lo + hi) // 2) + "}"

    # level 1 is 1..10: bisection needs at most 4 guesses, so every episode succeeds within a cap of 4
    horizon = AdaptiveHorizon(initial=4, maximum=20, increment=5, threshold=0.5)
    ctrl = ComplexityController(initial_level=1, promote_patience=10)
    sessions = [InProcessSession.make("game:GuessTheNumber", offload=True) for _ in range(4)]
    col = RolloutCollector(text_generate(bisect, RENDERER), curriculum=CurriculumState(ctrl, horizon))
    first = asyncio.run(col.collect(sessions, seeds=[1, 2, 3, 4]))
    assert all(t.complexity == 1 and t.success and len(t.turns) <= 4 for t in first)
    assert horizon.horizon() == 9
    for _ in range(3):
        trajs = asyncio.run(col.collect(sessions, seeds=[5, 6, 7, 8]))
    assert horizon.horizon() == 20
    assert all(t.success for t in trajs)
