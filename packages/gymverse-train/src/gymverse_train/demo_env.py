r"""Demo envs a 135M model can learn by RL on a CPU in minutes; ``demo:EchoTarget`` is the one the demo learns on.

The built-in envs are multi-turn puzzles that SmolLM2-135M cannot solve at any level, so nothing would move in a
CPU-sized run. This one isolates what a tiny model *can* learn by RL in minutes: following an answer format and
copying the target. It is a real `gymverse.Env` (format errors through `ActionFormatError`, seeded RNG, oracle,
complexity), registered through the ``gymverse.envs`` entry point when `gymverse-train` is installed.

Complexity: level 1 is one short word; each level adds words (1 → 6) and draws from a longer word list, so a
higher level is never easier. Rewards: 1.0 for the exact words, 0 for a wrong box, the format penalty (-0.1) when
there is no ``\boxed{...}``.

Two siblings make a 3-env mix (the training ablation) whose envs differ in format, difficulty and reward scale, so
per-env normalization (PERPO) and batch or group normalization weight them differently:

* ``demo:TagEcho`` — the words between ``<answer>`` and ``</answer>`` (a format SmolLM2 rarely uses unasked);
  2 → 7 words. Scored, not binary: the reward is the number of words right in place (0 … 7), success is all of
  them.
* ``demo:ReverseWords`` — the words in reverse order inside ``\boxed{}``; 2 → 6 distinct words. Binary. The
  prompt's example shows the format but not the instance's answer, so copying is not enough.
"""

from __future__ import annotations

import re
from typing import Any

from gymverse.actions import ActionFormatError, parse_boxed
from gymverse.core import FORMAT_PENALTY, SUCCESS_REWARD, Env, EnvMetadata, StepResult
from gymverse.registry import register

_WORD_BLOCK = (
    "cat dog sun red box cup hat pen map key car egg ice jam owl bee fox ant bus fan "
    "apple river stone cloud green table chair light water paper music horse house plant bread tiger "
    "window garden silver rocket bottle castle pillow guitar lemon planet orange butter yellow marble "
    "thunder blanket diamond lantern feather blossom compass pyramid volcano harbor meadow crystal"
)
WORDS = tuple(_WORD_BLOCK.split())  # short, common words first: a level's vocabulary is a prefix


def _draw(env: Env, *, distinct: bool) -> list[str]:
    """The instance's words: a level's vocabulary is a prefix of `WORDS`."""
    vocab = WORDS[: int(env.params["vocab"])]
    picks = env.rng.choice(len(vocab), size=int(env.params["words"]), replace=not distinct)
    return [vocab[int(i)] for i in picks]


class EchoTarget(Env):
    r"""Reply with the given words inside ``\boxed{...}`` (one turn)."""

    metadata = EnvMetadata(
        name="EchoTarget",
        family="demo",
        domain="other",
        description="Repeat the given words inside \\boxed{}; a format-following env small models can learn.",
        action_format=r"\boxed{<the words>}",
        max_turns=1,
    )
    complexity_params = {"words": (1, 6), "vocab": (20, len(WORDS))}

    def _reset(self) -> tuple[str, dict[str, Any]]:
        self.target = " ".join(_draw(self, distinct=False))
        what = "word" if " " not in self.target else "words"
        obs = f"Write the {what} {self.target} inside \\boxed{{}}, like this: \\boxed{{{self.target}}}"
        return obs, {"target": self.target}

    def _step(self, action: str) -> StepResult:
        answer = " ".join(parse_boxed(action, what="the words").split())
        if answer.lower() == self.target:
            return StepResult("Correct.", SUCCESS_REWARD, True, False, {"success": True})
        return StepResult(f"Wrong: expected {self.target!r}.", 0.0, True, False, {"success": False})

    def solve(self) -> str:
        """The oracle answer."""
        return f"\\boxed{{{self.target}}}"

    def sample_random_action(self) -> str:
        """A well-formed guess of one random word."""
        return f"\\boxed{{{WORDS[int(self.rng.integers(0, len(WORDS)))]}}}"


_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)


class TagEcho(Env):
    """Reply with the given words between ``<answer>`` and ``</answer>``; one point per word right in place."""

    metadata = EnvMetadata(
        name="TagEcho",
        family="demo",
        domain="other",
        description="Repeat the given words between <answer> and </answer>; scored by words right in place.",
        action_format="<answer><the words></answer>",
        max_turns=1,
        reward_range=(FORMAT_PENALTY, 7.0),
    )
    complexity_params = {"words": (2, 7), "vocab": (20, len(WORDS))}

    def _reset(self) -> tuple[str, dict[str, Any]]:
        self.target = _draw(self, distinct=False)
        words = " ".join(self.target)
        return f"Write the words {words} between <answer> and </answer>, like this: <answer>{words}</answer>", {
            "target": words
        }

    def _step(self, action: str) -> StepResult:
        found = _ANSWER_TAG.findall(action)
        if not found or not found[-1].strip():
            raise ActionFormatError("no non-empty <answer>...</answer> found; put the words between the tags")
        answer = found[-1].lower().split()
        score = sum(a == b for a, b in zip(answer, self.target))
        ok = answer == self.target
        return StepResult(f"{score} of {len(self.target)} words right.", float(score), True, False, {"success": ok})

    def solve(self) -> str:
        """The oracle answer."""
        return f"<answer>{' '.join(self.target)}</answer>"

    def sample_random_action(self) -> str:
        """A well-formed guess of one random word."""
        return f"<answer>{WORDS[int(self.rng.integers(0, len(WORDS)))]}</answer>"


class ReverseWords(Env):
    r"""Reply with the given words in reverse order inside ``\boxed{...}`` (one turn)."""

    metadata = EnvMetadata(
        name="ReverseWords",
        family="demo",
        domain="other",
        description="Write the given words in reverse order inside \\boxed{}.",
        action_format=r"\boxed{<the words, last first>}",
        max_turns=1,
    )
    complexity_params = {"words": (2, 6), "vocab": (20, len(WORDS))}

    def _reset(self) -> tuple[str, dict[str, Any]]:
        self.words = _draw(self, distinct=True)
        obs = (
            f"Write the words {' '.join(self.words)} in reverse order, last word first, inside \\boxed{{}}. "
            "For example, for the words one two three the answer is \\boxed{three two one}."
        )
        return obs, {"target": " ".join(reversed(self.words))}

    def _step(self, action: str) -> StepResult:
        answer = parse_boxed(action, what="the reversed words").lower().split()
        if answer == self.words[::-1]:
            return StepResult("Correct.", SUCCESS_REWARD, True, False, {"success": True})
        return StepResult(f"Wrong: expected {' '.join(reversed(self.words))!r}.", 0.0, True, False, {"success": False})

    def solve(self) -> str:
        """The oracle answer."""
        return f"\\boxed{{{' '.join(reversed(self.words))}}}"

    def sample_random_action(self) -> str:
        """A well-formed guess: the words in their given order."""
        return f"\\boxed{{{' '.join(self.words)}}}"


register("demo:EchoTarget", f"{__name__}:EchoTarget")
register("demo:TagEcho", f"{__name__}:TagEcho")
register("demo:ReverseWords", f"{__name__}:ReverseWords")
