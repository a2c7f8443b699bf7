"""`EnvLike` (what consumers accept) apart from `Env` (the authoring template), and the one `Wrapper` base."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymverse
import pytest
from gymverse import Env, EnvLike, Wrapper, registry
from gymverse.envs.game.guess_number import GuessTheNumber
from gymverse.pool import EnvPool
from gymverse.protocol import ENV_LIKE_MEMBERS, is_env_like
from gymverse.wrappers import EpisodeStatsWrapper, HistoryWrapper, LiveWrapper

PACKAGES = Path(__file__).resolve().parents[2]


def guess(n: int) -> str:
    return rf"\boxed{{{n}}}"


def make_stack(seed: int = 0) -> EpisodeStatsWrapper:
    return EpisodeStatsWrapper(Wrapper(HistoryWrapper(GuessTheNumber(seed=seed, max_turns=6), window=3)))


def test_wrappers_are_env_like_without_being_envs() -> None:
    stack = make_stack()
    assert LiveWrapper is Wrapper  # one base; the former name still imports
    assert is_env_like(stack) and is_env_like(stack.unwrapped) and isinstance(stack.unwrapped, Env)
    assert not isinstance(stack, Env)  # a wrapper authors nothing: no skipped Env.__init__, no stubbed hooks
    assert not is_env_like(GuessTheNumber)  # a class is not an env
    assert not is_env_like(object())
    with pytest.raises(TypeError, match="wraps an env \\(EnvLike\\), got str"):
        Wrapper("game:Mastermind")  # type: ignore[arg-type]


def test_the_runtime_check_runs_no_property() -> None:
    """A proxy's `metadata` may be a network call: recognising one must not make it."""

    class Lazy(Wrapper):
        calls = 0

        @property
        def metadata(self) -> Any:
            type(self).calls += 1
            raise ConnectionError("would open a session")

    lazy = Lazy(GuessTheNumber())
    assert is_env_like(lazy) and Lazy.calls == 0
    assert Wrapper(lazy).env is lazy and Lazy.calls == 0


def test_one_explicit_read_and_write_path_through_a_stack() -> None:
    stack = make_stack()
    base = stack.unwrapped
    assert isinstance(base, GuessTheNumber)
    stack.set_complexity(5)
    stack.reset(seed=3)
    # reads: the outermost layer that has the attribute, live
    assert stack.get_wrapper_attr("window") == 3  # the innermost wrapper's own field
    base.target = 1234
    assert stack.get_wrapper_attr("target") == 1234
    # writes: the layer that has it; forwarded read-only properties are skipped on the way down
    stack.set_wrapper_attr("target", 77)
    assert base.target == 77 and "target" not in vars(stack)
    assert stack.step(guess(77)).info["success"]
    stack.set_wrapper_attr("done", False)  # the wrappers' `done` is a read: the base env's field
    assert base.done is False
    # a typo is an error naming the stack, not a new field on some layer
    with pytest.raises(AttributeError, match=r"no layer of .* has an attribute 'targt' to set"):
        stack.set_wrapper_attr("targt", 1)
    with pytest.raises(AttributeError, match="'targt'"):
        stack.get_wrapper_attr("targt")
    with pytest.raises(AttributeError):
        _ = stack.target  # type: ignore[attr-defined]  # no magic __getattr__: the base's fields stay the base's
    stack.note = "mine"  # type: ignore[attr-defined]  # a plain write stays on the wrapper written to
    assert not hasattr(base, "note")


def test_every_protocol_member_passes_through_a_stack() -> None:
    stack, base = EpisodeStatsWrapper(HistoryWrapper(GuessTheNumber(seed=5))), GuessTheNumber(seed=5)
    stack.set_complexity(4)
    base.set_complexity(4)
    assert stack.reset(seed=5)[1] == base.reset(seed=5)[1]
    for name in set(ENV_LIKE_MEMBERS) - {"unwrapped"}:
        value = getattr(stack, name)
        if not callable(value):
            assert value == getattr(base, name), name
    assert isinstance(stack.env, HistoryWrapper) and stack.unwrapped is stack.env.env
    assert stack.complexity_spec() == base.complexity_spec()
    assert stack.solve() == base.solve()


@pytest.fixture
def wrapped_id() -> Iterator[str]:
    env_id = "prototest:Wrapped"
    registry.register(env_id, lambda **kw: HistoryWrapper(GuessTheNumber(**kw), window=2))
    yield env_id
    registry.deregister(env_id)


def test_make_and_the_pool_accept_an_env_like_that_is_not_an_env(wrapped_id: str) -> None:
    env: EnvLike = gymverse.make(wrapped_id, complexity=2, max_turns=2)
    assert not isinstance(env, Env) and env.complexity == 2

    async def main() -> list[Any]:
        with EnvPool(2) as pool:
            session = await pool.session(wrapped_id, seed=1, complexity=2, max_turns=2)
            await session.reset()
            steps = [await session.step(guess(0)) for _ in range(2)]
            await session.close()
            return steps

    steps = asyncio.run(main())
    assert not steps[0].truncated and steps[-1].truncated  # the make kwarg capped the env inside the wrapper


def test_no_proxy_or_wrapper_overrides_env_members_with_an_ignore() -> None:
    """Proxies implement `EnvLike` instead of subclassing `Env`, so mypy needs no override ignore for them."""
    sources = list(PACKAGES.glob("*/src/**/*.py"))
    assert len(sources) > 50
    hits = {p.relative_to(PACKAGES).as_posix() for p in sources if "type: ignore[override]" in p.read_text()}
    # left: asyncio's Protocol signature (stdlib typing's); the GEM adapter sets a per-instance `metadata`, which
    # `Env` declares as an attribute
    assert hits <= {"gymverse-server/src/gymverse/server/runner.py"}
