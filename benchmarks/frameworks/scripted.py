"""What the oat and RL2 rollout benchmarks share: the envs, the fixed replies of the zero-cost generator, sizes.

The scripted generator returns the same reply tokens every turn, instantly, in the engine's own response type;
each env gets a reply that is a valid action (so every episode runs its env's full 10-turn budget and the env
does real work each turn). The reply carries a Qwen3-style thinking block, which GymVerse strips before the env
sees the action and RL2's/oat's text path passes on as is (the envs parse the ``\\boxed{}`` either way).
"""

from __future__ import annotations

from collections.abc import Sequence

#: env id -> the fixed reply text (without the end-of-turn token, which the generator appends)
REPLIES: dict[str, str] = {
    "game:GuessTheNumber": "<think>\nStart low.\n</think>\n\\boxed{1}",
    "game:Mastermind": "<think>\nThree pegs.\n</think>\n\\boxed{1 2 3}",
    "tool-use:UnitConversion": "<think>\nList the units first.\n</think>\n\\boxed{units}",
}
QUICK_ENVS = ("game:GuessTheNumber", "tool-use:UnitConversion")
CONCURRENCY = (1, 8, 64)
QUICK_CONCURRENCY = (1, 8)
TURN_TARGET = 1.05  # GymVerse ms/turn at most 5% above the framework's native path (64 concurrent episodes)
ADV_TARGET = 2.0  # PERPO advantage step within 2x the framework's own estimator


def envs_of(quick: bool) -> Sequence[str]:
    """The envs a run covers."""
    return QUICK_ENVS if quick else tuple(REPLIES)


def concurrency_of(quick: bool) -> Sequence[int]:
    """The concurrent-episode counts a run covers (the target is stated at the largest)."""
    return QUICK_CONCURRENCY if quick else CONCURRENCY


def reply_ids(tokenizer: object, env_id: str) -> list[int]:
    """The generator's fixed reply for `env_id`: the text's ids plus the tokenizer's eos (end of turn)."""
    ids = [int(i) for i in tokenizer.encode(REPLIES[env_id], add_special_tokens=False)]  # type: ignore[attr-defined]
    return [*ids, int(tokenizer.eos_token_id)]  # type: ignore[attr-defined]
