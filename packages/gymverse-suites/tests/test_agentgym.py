"""The AgentGym protocol client against a server speaking that protocol over loopback (core's AgentGym routes)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gymverse
import pytest
from gymverse.registry import RegistryError
from gymverse_suites.agentgym import AgentGymEnv, AgentGymError

pytest.importorskip("fastapi")


@pytest.fixture
def serve() -> Iterator[Any]:
    """``serve(**ServerConfig fields)``: a real HTTP env server on 127.0.0.1; all stop after the test."""
    import gymverse.testing.vectest  # noqa: F401 - registers vectest:Faulty, an env whose steps fail
    from gymverse.server import EnvServer, ServerConfig

    started: list[Any] = []

    def start(**config: Any) -> Any:
        server = EnvServer(ServerConfig(**config), port=0).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def _local_run(seed: int) -> list[Any]:
    env = gymverse.make("game:Mastermind")
    obs, _ = env.reset(seed=seed)
    out: list[Any] = [obs]
    while True:
        res = env.step(env.solve())
        out.append((res.observation, res.reward, res.done, res.info["success"] if res.done else None))
        if res.done:
            return out


def _remote_run(env: gymverse.Env, seed: int, actions: list[str]) -> list[Any]:
    obs, info = env.reset(seed=seed)
    assert info["data_idx"] == seed and info["complexity_fixed"] is True
    out: list[Any] = [obs]
    for action in actions:
        res = env.step(action)
        out.append((res.observation, res.reward, res.done, res.info["success"] if res.done else None))
    return out


def _oracle_actions(seed: int) -> list[str]:
    env = gymverse.make("game:Mastermind")
    env.reset(seed=seed)
    actions = []
    while True:
        actions.append(env.solve())
        if env.step(actions[-1]).done:
            return actions


@pytest.mark.parametrize(("dialect", "prefix"), [("id", ""), ("id", "/agentgym/game:Mastermind"), ("env_idx", "")])
def test_agentgym_server_is_an_env_id(serve: Any, dialect: str, prefix: str) -> None:
    srv = serve(agentgym="game:Mastermind", agentgym_dialect=dialect)
    env = gymverse.make(f"agentgym+{srv.url}{prefix}")
    assert isinstance(env, AgentGymEnv)
    # the task index is the seed: the served episode is the local one, step for step, success included
    assert _remote_run(env, 5, _oracle_actions(5)) == _local_run(5)
    assert env.dialect == dialect
    again = _remote_run(env, 5, _oracle_actions(5))  # a second episode on the same server-side env
    assert again == _local_run(5)
    env.close()
    assert env.server_id is None and len(srv.manager.leases) == 0


def test_failed_server_step_truncates_with_the_error(serve: Any) -> None:
    srv = serve(agentgym="vectest:Faulty")
    env = gymverse.make(f"agentgym+{srv.url}")
    env.reset(seed=0)  # task 0's first step draws an injected failure
    res = env.step("\\boxed{1}")
    assert res.truncated and not res.terminated and res.info["success"] is False
    assert res.info["error"].startswith("ValueError: injected step failure")
    env.close()


def test_unknown_server_env_and_bad_ids(serve: Any) -> None:
    srv = serve()  # no AgentGym env at the root
    with gymverse.make(f"agentgym+{srv.url}") as env, pytest.raises(AgentGymError, match="--agentgym"):
        env.reset(seed=0)
    with pytest.raises(RegistryError, match="agentgym\\+http://host:port"):
        gymverse.make("agentgym+ftp://nowhere")
    with pytest.raises(ValueError, match="dialect"):
        AgentGymEnv(srv.url, dialect="soap")  # type: ignore[arg-type]
    gymverse.registry.check_env_ids([f"agentgym+{srv.url}"])  # a scheme id counts as known
