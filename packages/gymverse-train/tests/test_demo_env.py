"""The demo envs: registered, checker-clean, and scored as their docstrings say."""

from __future__ import annotations

import pytest
from gymverse.checker import check_env
from gymverse.core import FORMAT_PENALTY
from gymverse.registry import make

DEMO_ENVS = ["demo:EchoTarget", "demo:TagEcho", "demo:ReverseWords"]


@pytest.mark.parametrize("env_id", DEMO_ENVS)
def test_demo_env_passes_the_checker(env_id: str) -> None:
    report = check_env(env_id, levels=(1, 10), seeds=(0, 1))
    assert report.passed, report.summary()


def test_tag_echo_scores_words_in_place_and_needs_the_tags() -> None:
    env = make("demo:TagEcho", complexity=10, seed=3)
    env.reset(seed=3)
    words = env.solve().removeprefix("<answer>").removesuffix("</answer>").split()
    assert len(words) == 7
    wrong_last = " ".join([*words[:-1], "zzz"])
    r = env.step(f"Sure! <answer>{wrong_last}</answer>")
    assert (r.reward, r.info["success"]) == (6.0, False)
    env.reset(seed=3)
    r = env.step(f"\\boxed{{{' '.join(words)}}}")  # the right words in the wrong format
    assert r.reward == FORMAT_PENALTY and r.info["format_error"] and not r.info["success"]
    env.reset(seed=3)
    r = env.step(f"<ANSWER>{' '.join(words).upper()}</ANSWER>")
    assert (r.reward, r.info["success"]) == (7.0, True)


def test_reverse_words_rejects_the_given_order() -> None:
    env = make("demo:ReverseWords", complexity=1, seed=0)
    obs, info = env.reset(seed=0)
    given = info["target"].split()[::-1]
    assert " ".join(given) in obs and len(set(given)) == len(given) == 2
    r = env.step(f"\\boxed{{{' '.join(given)}}}")  # copying is not reversing
    assert (r.reward, r.info["success"]) == (0.0, False)
    env.reset(seed=0)
    r = env.step(f"So the answer is \\boxed{{{info['target']}}}.")
    assert (r.reward, r.info["success"]) == (1.0, True)
