"""`gymverse.play`: the one scripted-episode loop (stop reasons, step cap, errors, hooks, named policies)."""

from __future__ import annotations

from typing import Any, cast

import pytest
from gymverse.conformance import step_type_problem
from gymverse.core import FORMAT_PENALTY, StepResult
from gymverse.deadline import CallTimeout
from gymverse.play import PlayResult, play, scripted
from gymverse.protocol import EnvLike
from gymverse.testing.vectest import Count


class Endless:
    """A bare env (only what `play` calls) that never ends an episode and may answer with a malformed step."""

    max_turns = 3

    def __init__(self, bad_at: int | None = None) -> None:
        self.bad_at, self.calls = bad_at, 0

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.calls = 0
        return "start", {}

    def step(self, action: str) -> Any:
        self.calls += 1
        if self.calls == self.bad_at:
            return ("obs", None, False, False, {})  # reward None breaks the value-type contract
        return StepResult(f"turn {self.calls}", 0.5, False, False, {})


def endless(bad_at: int | None = None) -> EnvLike:
    """An `Endless` typed as the env `play` takes (it implements only the members `play` calls)."""
    return cast(EnvLike, Endless(bad_at))


def oracle(env: Any, _obs: str) -> str:
    return str(env.solve())


def test_oracle_episode_ends_done_with_success_and_every_step() -> None:
    seen: list[tuple[str, str]] = []
    played = play(Count(), oracle, seed=3, on_step=lambda obs, action, _res: seen.append((obs, action)))
    assert played.stop == "done" and played.success and played.error is None
    assert played.start is not None and played.start[0].startswith("Reach ")
    assert played.turns == len(played.actions) == len(seen)
    assert sum(int(a[len("\\boxed{") : -1]) for a in played.actions) == played.start[1]["target"]
    assert played.rewards == [0.0] * (played.turns - 1) + [1.0] and played.total_reward == 1.0
    assert seen[0][0] == played.start[0]  # the policy and the hook see the observation before each step


def test_same_seed_same_transcript_other_seed_differs() -> None:
    def transcript(seed: int) -> list[Any]:
        env = Count(seed=0)
        played = play(env, scripted("random"), seed=seed, complexity=9)
        return [played.start, played.actions, [tuple(r) for r in played.steps]]

    assert transcript(5) == transcript(5)
    assert transcript(5) != transcript(6)


def test_complexity_is_applied_before_reset() -> None:
    played = play(Count(), oracle, seed=1, complexity=7)
    assert played.start[1]["complexity"] == 7


def test_step_cap_defaults_to_max_turns_plus_one_and_max_steps_overrides() -> None:
    default = play(endless(), lambda _env, _obs: "x")
    assert (default.stop, default.turns, default.max_steps, default.success) == ("max_steps", 4, 4, False)
    capped = play(endless(), lambda _env, _obs: "x", max_steps=2)
    assert (capped.stop, capped.turns) == ("max_steps", 2)


def test_policy_error_ends_the_episode_and_keeps_the_steps_before() -> None:
    def flaky(env: Any, obs: str) -> str:
        if obs == "turn 2":
            raise ValueError("policy broke on turn 3")
        return "x"

    played = play(endless(), flaky)
    assert played.stop == "error" and isinstance(played.error, ValueError) and played.turns == 2
    with pytest.raises(ValueError, match="policy broke on turn 3"):
        played.reraise()


def test_env_error_is_caught_but_a_deadline_is_not() -> None:
    def hang(_env: Any, _obs: str) -> str:
        raise CallTimeout("episode (seed 0) took too long")

    with pytest.raises(CallTimeout):
        play(Count(), hang, seed=0)
    broken = play(Count(), lambda _env, _obs: r"\boxed{1}", reset=False)  # never reset: the env refuses the step
    assert broken.stop == "error" and "before reset()" in str(broken.error) and broken.turns == 0


def test_malformed_action_gets_the_format_penalty_and_the_episode_goes_on() -> None:
    played = play(Count(), lambda _env, _obs: "no box here", seed=2)
    first = played.steps[0]
    assert first.reward == FORMAT_PENALTY and first.info["format_error"] is True
    assert played.stop == "done" and not played.success  # truncated at max_turns, never solved
    assert played.turns == Count.metadata.max_turns and played.total_reward == pytest.approx(30 * FORMAT_PENALTY)


def test_judge_ends_at_a_malformed_step_only_when_asked() -> None:
    judged = play(endless(bad_at=2), lambda _env, _obs: "x", judge=step_type_problem)
    assert (judged.stop, judged.turns) == ("bad_step", 2)
    unjudged = play(endless(bad_at=2), lambda _env, _obs: "x")
    assert (unjudged.stop, unjudged.turns) == ("max_steps", 4)


def test_a_step_the_hook_rejects_is_not_kept() -> None:
    def reject_second(_obs: str, _action: str, res: Any) -> None:
        if res[0] == "turn 2":
            raise TypeError("cannot record turn 2")

    played = play(endless(), lambda _env, _obs: "x", on_step=reject_second)
    assert played.stop == "error" and played.turns == 1 and played.actions == ["x"]


def test_scripted_policies() -> None:
    env = Count(seed=4)
    constant = play(env, scripted("constant"), seed=4)
    assert len(set(constant.actions)) == 1  # the first random action, sent every turn
    assert play(env, scripted("constant", r"\boxed{0}"), seed=4).actions[0] == r"\boxed{0}"
    mixed = play(env, scripted("mixed", "ooo"), seed=4, max_steps=3)
    assert mixed.actions == play(env, scripted("oracle"), seed=4, max_steps=3).actions
    with pytest.raises(ValueError, match="random, oracle, constant or mixed"):
        scripted("greedy")


def test_scripted_non_string_action_raises_a_type_error_naming_the_policy() -> None:
    class NumberOracle(Count):
        def solve(self) -> Any:
            return self.target - self.total

    played = play(NumberOracle(), scripted("oracle"), seed=0)
    assert isinstance(played.error, TypeError) and str(played.error) == "oracle action is int, expected str"
    assert played.turns == 0 and isinstance(played, PlayResult)
