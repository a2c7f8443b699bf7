"""GEM interop: adapting objects with GEM's contract, loading GEM-style files without gem installed."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymverse.compat._gem_shim import SHIM_MODULES, TERMINAL_STATE, LanguageGameReward, gem_modules, real_gem_available
from gymverse.compat.gem import GemEnvAdapter, GemLoadError
from gymverse.compat.gem_files import load_gem_env_file
from gymverse.contract import EnvMetadata
from gymverse.core import Env, run_oracle
from gymverse.wrappers import EpisodeStatsWrapper, HistoryWrapper

FIXTURES = Path(__file__).parent / "gem_fixtures"
HIGHER_LOWER = FIXTURES / "gem_higher_lower.py"
REVERSE = FIXTURES / "gem_reverse_word.py"
BROKEN = FIXTURES / "gem_broken_ctor.py"

pytestmark = pytest.mark.skipif(
    real_gem_available(), reason="these tests exercise the stand-in used when gem-llm is not installed"
)


class DuckCoinFlip:
    """Not a subclass of anything: only GEM's reset/step contract, with success reported in info."""

    def __init__(self) -> None:
        self.max_turns = 3

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.coin = random.choice(["heads", "tails"])
        self.turns = 0
        return "Call the coin: \\boxed{heads} or \\boxed{tails}", {"note": "flip"}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.turns += 1
        won = self.coin in action
        return ("right" if won else "wrong"), (1.0 if won else 0.0), won, self.turns >= 3 and not won, {"success": won}

    def sample_random_action(self) -> str:
        return "\\boxed{" + random.choice(["heads", "tails"]) + "}"


def test_metadata_is_per_instance_unless_the_class_declares_it() -> None:
    """Two adapters name their own GEM classes; a subclass's class-level metadata (read without building) wins."""
    flip, other = GemEnvAdapter(DuckCoinFlip()), GemEnvAdapter(DuckCoinFlip(), name="Renamed")
    assert (flip.metadata.name, other.metadata.name) == ("DuckCoinFlip", "Renamed")
    assert "metadata" not in vars(GemEnvAdapter)  # an instance attribute, no property overriding Env's declaration

    class Declared(GemEnvAdapter):
        metadata = EnvMetadata(name="Declared", family="toys", domain="game", description="declared", max_turns=7)

    env = Declared(DuckCoinFlip(), name="ignored")
    assert env.metadata is Declared.metadata and "metadata" not in vars(env)
    assert env.max_turns == 3  # the GEM object's own budget still comes first


def test_adapter_wraps_any_object_with_gem_contract() -> None:
    env = GemEnvAdapter(DuckCoinFlip(), family="toys", seed=0)
    assert isinstance(env, Env)
    assert env.metadata.name == "DuckCoinFlip"
    assert env.metadata.family == "toys"
    assert env.max_turns == 3
    assert env.complexity_fixed
    obs, info = env.reset(seed=1)
    assert obs.startswith("Call the coin")
    assert info["note"] == "flip"
    assert info["complexity_fixed"] is True
    while not env.done:
        res = env.step(env.sample_random_action())
    assert res.info["success"] == (res.observation == "right")
    assert res.info["success_source"] == "info"
    with pytest.raises(NotImplementedError, match="has no oracle"):
        env.solve()


def test_adapter_does_not_touch_global_rngs_and_is_deterministic() -> None:
    random.seed(123)
    np.random.seed(123)  # noqa: NPY002 - the point is that the adapter leaves the legacy globals alone
    # the dict form: numpy types the legacy tuple as a union with it (the key array is the same)
    before = (random.getstate(), np.random.get_state(legacy=False)["state"]["key"].copy())  # noqa: NPY002

    def transcript(seed: int) -> list[str]:
        env = load_gem_env_file(REVERSE, word_length=8)
        obs, _ = env.reset(seed=seed)
        action = env.sample_random_action()
        assert env.gem_uses_numpy
        return [obs, action, env.step(action).observation]

    assert transcript(4) == transcript(4)
    assert transcript(4) != transcript(5)
    # a numpy-free file: its steps swap only `random` (NumPy's swap is most of a step's cost), resets both
    lean = load_gem_env_file(HIGHER_LOWER)
    assert not lean.gem_uses_numpy
    lean.reset(seed=1)
    for _ in range(3):
        lean.step(lean.sample_random_action())
    assert random.getstate() == before[0]
    assert np.array_equal(np.random.get_state(legacy=False)["state"]["key"], before[1])  # noqa: NPY002
    # unseeded resets draw their GEM seed from the adapter's own RNG: same adapter seed, same episodes
    a, b = load_gem_env_file(REVERSE, seed=9), load_gem_env_file(REVERSE, seed=9)
    assert [a.reset()[0] for _ in range(3)] == [b.reset()[0] for _ in range(3)]


def test_explicit_seed_matches_running_gem_directly() -> None:
    env = load_gem_env_file(HIGHER_LOWER, max_number=50)
    obs, info = env.reset(seed=17)
    cls = type(env.gem_env)
    with gem_modules():
        direct = cls(max_number=50)
        direct_obs, _ = direct.reset(seed=17)
        target = direct.target
    assert obs == direct_obs
    assert info["gem_seed"] == 17
    assert env.gem_env.target == target


def test_success_rules_are_explicit() -> None:
    # HigherLower signals success only through reward == LanguageGameReward.success_reward
    default = load_gem_env_file(HIGHER_LOWER)
    steps = run_oracle(default, seed=3)
    assert steps[-1].reward == LanguageGameReward.success_reward
    assert steps[-1].info["success"] is False
    assert steps[-1].info["success_source"] == "none"
    by_reward = load_gem_env_file(HIGHER_LOWER, success_from="reward")
    last = run_oracle(by_reward, seed=3)[-1]
    assert last.info["success"] is True
    assert last.info["success_source"] == "reward"
    mixed = load_gem_env_file(REVERSE, success_from="info_or_reward")
    mixed.reset(seed=0)
    word = mixed.gem_env.word
    res = mixed.step("\\boxed{" + word[::-1] + "}")
    assert res.observation == TERMINAL_STATE
    assert res.info["success"] is True
    assert res.info["success_source"] == "info"
    custom = load_gem_env_file(HIGHER_LOWER, success_from=lambda obs, r, term, trunc, info: "Correct" in obs)
    assert run_oracle(custom, seed=3)[-1].info["success_source"] == "callable"
    assert run_oracle(custom, seed=3)[-1].info["success"] is True
    # a step that runs out of turns: terminated by GEM with fail_reward, not a success under any rule
    loser = load_gem_env_file(HIGHER_LOWER, success_from="info_or_reward", max_turns=2)
    loser.reset(seed=0)
    loser.gem_env.target = 20
    loser.step("\\boxed{1}")
    end = loser.step("\\boxed{2}")
    assert end.terminated
    assert end.truncated
    assert end.info["success"] is False
    with pytest.raises(ValueError, match="success_from must be one of"):
        GemEnvAdapter(DuckCoinFlip(), success_from="reward~1")
    by_text = load_gem_env_file(HIGHER_LOWER, success_from="reward>=1")
    assert by_text.success_rule == "reward>=1"
    assert run_oracle(by_text, seed=3)[-1].info == {**run_oracle(by_text, seed=3)[-1].info, "success": True}
    assert run_oracle(by_text, seed=3)[-1].info["success_source"] == "reward>=1"


def test_complexity_kwargs_rebuild_at_next_reset() -> None:
    env = load_gem_env_file(HIGHER_LOWER, complexity_kwargs={1: {"max_number": 10}, 5: {"max_number": 1000}})
    assert not env.complexity_fixed
    assert "between 1 and 10;" in env.reset(seed=0)[0]
    env.set_complexity(7)  # 7 has no entry: nearest lower level (5) applies
    assert env.gem_env.max_number == 10  # nothing changes before the next reset
    obs, info = env.reset(seed=0)
    assert "between 1 and 1000;" in obs
    assert info["complexity"] == 7
    assert info["complexity_fixed"] is False
    by_fn = load_gem_env_file(HIGHER_LOWER, complexity_kwargs=lambda lvl: {"max_number": 10 * lvl}, complexity=4)
    assert "between 1 and 40;" in by_fn.reset(seed=0)[0]
    with pytest.raises(ValueError, match="needs a factory"):
        GemEnvAdapter(DuckCoinFlip(), complexity_kwargs={1: {}})
    with pytest.raises(ValueError, match=r"1\.\.10"):
        load_gem_env_file(HIGHER_LOWER, complexity_kwargs={0: {"max_number": 5}})


def test_fixed_complexity_is_recorded_not_applied() -> None:
    env = load_gem_env_file(HIGHER_LOWER, max_number=30)
    env.set_complexity(9)
    obs, info = env.reset(seed=0)
    assert info["complexity"] == 9
    assert info["complexity_fixed"] is True
    assert "between 1 and 30;" in obs


def test_loading_leaves_sys_modules_clean() -> None:
    before = {k for k in sys.modules if k == "gem" or k.startswith(("gem.", "gymverse_gem_file_"))}
    env = load_gem_env_file(REVERSE)
    env.reset(seed=0)
    env.step("\\boxed{x}")
    after = {k for k in sys.modules if k == "gem" or k.startswith(("gem.", "gymverse_gem_file_"))}
    assert before == after == set()
    assert set(SHIM_MODULES) >= {"gem", "gem.core", "gem.utils", "gem.utils.constants"}


def test_load_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(GemLoadError, match=r"gem_broken_ctor\.py: building BrokenBoardEnv.*board size must be"):
        load_gem_env_file(BROKEN)
    assert load_gem_env_file(BROKEN, size=3).reset(seed=0)[0] == "board"
    syntax = tmp_path / "gem_syntax.py"
    syntax.write_text("from gem.core import Env\n\nclass A(Env:\n    pass\n")
    with pytest.raises(GemLoadError, match=r"gem_syntax\.py:3: syntax error"):
        load_gem_env_file(syntax)
    missing = tmp_path / "gem_missing.py"
    missing.write_text("from gem.envs.registration import register\n")
    with pytest.raises(GemLoadError, match=r"gem_missing\.py: import failed: .*gem\.envs.*install gem-llm"):
        load_gem_env_file(missing)
    crash = tmp_path / "gem_crash.py"
    crash.write_text("TABLE = {}\nTABLE['x'] + 1\n")
    with pytest.raises(GemLoadError, match=r"gem_crash\.py: executing the file raised KeyError"):
        load_gem_env_file(crash)
    with pytest.raises(GemLoadError, match="no such file"):
        load_gem_env_file(tmp_path / "nope.py")
    two = tmp_path / "gem_two.py"
    two.write_text(HIGHER_LOWER.read_text() + "\n\nclass SecondEnv(HigherLowerEnv):\n    pass\n")
    assert load_gem_env_file(two).metadata.name == "HigherLowerEnv"  # several env classes: the base one
    assert load_gem_env_file(two, class_name="SecondEnv").metadata.name == "SecondEnv"
    with pytest.raises(GemLoadError, match=r"no class 'Third'.*HigherLowerEnv, SecondEnv"):
        load_gem_env_file(two, class_name="Third")


def test_gem_env_state_clone_and_wrappers() -> None:
    env = EpisodeStatsWrapper(HistoryWrapper(load_gem_env_file(HIGHER_LOWER, max_number=100), window=2))
    env.reset(seed=5)
    env.step("\\boxed{50}")
    twin = env.clone()
    snap = env.get_state()
    # GEM randomness lives in the global generators: the clone must branch it too
    a = [env.step(env.sample_random_action()).observation for _ in range(2)]
    b = [twin.step(twin.sample_random_action()).observation for _ in range(2)]
    assert a == b
    env.set_state(snap)
    assert [env.step(env.sample_random_action()).observation for _ in range(2)] == a
    assert "[Turn 0] Observation:\nGuess my number between 1 and 100" in a[-1]


def test_format_errors_by_reward_are_opt_in() -> None:
    plain = EpisodeStatsWrapper(load_gem_env_file(HIGHER_LOWER))
    plain.reset(seed=0)
    res = plain.step("seven")  # HigherLower ends the episode with format_error_reward
    assert res.reward == LanguageGameReward.format_error_reward
    assert res.info["format_error"] is False
    marked = EpisodeStatsWrapper(
        load_gem_env_file(HIGHER_LOWER, format_error_reward=LanguageGameReward.format_error_reward)
    )
    marked.reset(seed=0)
    res = marked.step("seven")
    assert res.info["format_error"] is True
    assert res.info["episode"]["format_errors"] == 1
