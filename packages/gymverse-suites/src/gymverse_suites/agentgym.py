r"""A client of AgentGym's env-server protocol: an AgentGym server is the env id ``agentgym+http://host:port[/path]``.

AgentGym serves one env family per server: ``POST /create`` -> an integer id; ``POST /reset {id, data_idx}``;
``POST /step {id, action}`` -> ``{"observation", "reward", "done"}``; ``GET /observation?id=``; ``POST /close
{id}``. The ``env_idx`` dialect (WebShop) names the id ``env_idx``, answers ``/create`` with a bare integer,
``/reset`` with ``[observation, info]`` and ``/step`` with ``{"state", "reward", "done", "info"}``. The dialect is
detected from the shape of the ``/create`` answer (``dialect="auto"``) or given. Every request is sent in the
detected dialect's field names, as AgentGym's own clients send them.

* **Seeds.** ``reset(seed=s)`` resets task ``data_idx = s`` (AgentGym's task index: same index, same task);
  ``reset()`` draws an index in ``[0, num_tasks)`` from the env's own RNG.
* **Success.** ``info["success"]`` when the server sends a boolean one, else the final step's reward against
  `success_rule` (default ``reward>=1``; AgentGym's TextCraft and BabyAI pay 1 on success).
* **Errors.** A server that answers with ``{"error": ...}`` (AgentGym's failure convention, HTTP 200 or not)
  ends the episode truncated with ``info["error"]``; a failed create or reset raises `AgentGymError`.
* **Complexity** is fixed (the protocol has no level): `set_complexity` is recorded, infos say
  ``complexity_fixed: True``. There is no oracle over the protocol.
"""

from __future__ import annotations

import contextlib
from typing import Any, Literal

from gymverse.compat.gem_conventions import RewardRule, parse_success_rule
from gymverse.core import Env, EnvMetadata, StepResult
from gymverse.registry import EnvSpec, RegistryError, register_scheme

SCHEME = "agentgym+"
Dialect = Literal["auto", "id", "env_idx"]
_ID_FIELD = {"id": "id", "env_idx": "env_idx"}


class AgentGymError(RuntimeError):
    """The AgentGym server refused to create or reset an environment."""


def _error_of(payload: Any) -> str | None:
    if isinstance(payload, dict) and payload.get("error") not in (None, ""):
        return str(payload.get("message") or payload["error"])
    return None


class AgentGymEnv(Env):
    """One environment on an AgentGym env server at `url` (its ``/create`` is ``{url}/create``)."""

    metadata = EnvMetadata(
        name="AgentGym",
        family="agentgym",
        domain="other",
        description="An environment served by an AgentGym env server (its protocol: create/reset/step/close)",
        action_format="the server family's own action text",
        max_turns=50,
        reward_range=(-1.0, 1.0),
        extra={"source": "agentgym"},
    )

    def __init__(
        self,
        url: str,
        complexity: int = 1,
        seed: int | None = None,
        max_turns: int | None = None,
        *,
        dialect: Dialect = "auto",
        success_rule: str = "reward>=1",
        num_tasks: int = 1000,
        timeout: float = 60.0,
        retries: int = 0,
    ) -> None:
        super().__init__(complexity=complexity, seed=seed, max_turns=max_turns)
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"AgentGym server url must start with http:// or https://, got {url!r}")
        if dialect not in ("auto", "id", "env_idx"):
            raise ValueError(f"dialect must be 'auto', 'id' or 'env_idx', got {dialect!r}")
        if num_tasks < 1:
            raise ValueError(f"num_tasks must be >= 1, got {num_tasks}")
        rule = parse_success_rule(success_rule)
        if not isinstance(rule, RewardRule):
            raise ValueError(f"success_rule must be a reward rule such as 'reward>=1', got {success_rule!r}")
        from gymverse.client.http import RemoteClient  # the HTTP client: gymverse-server

        self.url = url.rstrip("/")
        self.dialect: Dialect = dialect
        self.success_rule = rule
        self.num_tasks = num_tasks
        self._http = RemoteClient(self.url, timeout=timeout, retries=retries)
        self.server_id: int | None = None
        self.data_idx = 0
        self._explicit_seed: int | None = None
        self.observation = ""

    # ----------------------------------------------------------------- protocol
    def _body(self, **fields: Any) -> dict[str, Any]:
        return {_ID_FIELD[self.dialect]: self.server_id, **fields}

    def _create(self) -> None:
        from gymverse.client.http import RemoteError

        try:
            created = self._http._request("POST", "/create", {})
        except RemoteError as err:
            raise AgentGymError(f"{self.url}/create failed: {err}") from err
        if isinstance(created, int) and not isinstance(created, bool):
            detected: Dialect = "env_idx"
            self.server_id = created
        elif isinstance(created, dict) and isinstance(created.get("id"), int):
            detected = "id"
            self.server_id = int(created["id"])
        else:
            raise AgentGymError(f"{self.url}/create answered {str(created)[:200]!r}: expected an id or {{'id': n}}")
        if self.dialect == "auto":
            self.dialect = detected

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode; an explicit `seed` is AgentGym's task index ``data_idx``."""
        self._explicit_seed = seed
        return super().reset(seed=seed)

    def _reset(self) -> tuple[str, dict[str, Any]]:
        from gymverse.client.http import RemoteError

        if self.server_id is None:
            self._create()
        drawn = int(self.rng.integers(0, self.num_tasks))
        self.data_idx = self._explicit_seed if self._explicit_seed is not None else drawn
        try:
            answer = self._http._request("POST", "/reset", self._body(data_idx=self.data_idx))
        except RemoteError as err:
            raise AgentGymError(f"{self.url}/reset (data_idx {self.data_idx}) failed: {err}") from err
        error = _error_of(answer)
        if error is not None:
            raise AgentGymError(f"{self.url}/reset (data_idx {self.data_idx}) failed: {error}")
        if isinstance(answer, list) and answer:  # env_idx dialect: [observation, info]
            obs = answer[0]
        elif isinstance(answer, dict) and "observation" in answer:
            obs = answer["observation"]
        else:  # servers whose reset answers nothing useful: ask for the observation
            obs = self._http._request("GET", f"/observation?{_ID_FIELD[self.dialect]}={self.server_id}")
        self.observation = str(obs)
        info = {"data_idx": self.data_idx, "server_id": self.server_id, "dialect": self.dialect}
        return self.observation, {**info, "complexity_fixed": True}

    def _step(self, action: str) -> StepResult:
        from gymverse.client.http import RemoteError

        try:
            answer = self._http._request("POST", "/step", self._body(action=action))
        except RemoteError as err:
            return StepResult(self.observation, 0.0, False, True, {"error": str(err), "success": False})
        error = _error_of(answer)
        if not isinstance(answer, dict) or (error is not None and "reward" not in answer):
            why = error or f"unexpected /step answer {str(answer)[:200]!r}"
            return StepResult(self.observation, 0.0, False, True, {"error": why, "success": False})
        obs = answer.get("observation", answer.get("state", ""))
        self.observation = str(obs)
        reward = float(answer.get("reward") or 0.0)
        done = bool(answer.get("done", False))
        told_info = answer.get("info")
        server_info: dict[str, Any] = told_info if isinstance(told_info, dict) else {}
        info: dict[str, Any] = {"complexity_fixed": True}
        if error is not None:  # the env failed on the server: the episode ends there
            info["error"] = error
        if done or error is not None:
            told = server_info.get("success")
            info["success"] = told if isinstance(told, bool) else self.success_rule(obs, reward, True, False, {})
        failed = error is not None  # a crashed step is truncated (core failure policy), never a terminal state
        return StepResult(self.observation, reward, done and not failed, failed, info)

    def solve(self) -> str:
        """No oracle: the protocol has none."""
        raise NotImplementedError("an AgentGym env server exposes no oracle")

    def close(self) -> None:
        """Close the server-side environment (if one was created) and the connection."""
        if self.server_id is not None:
            from gymverse.client.http import RemoteConnectionError, RemoteError

            # already gone on the server: nothing is left to release there
            with contextlib.suppress(RemoteError, RemoteConnectionError):
                self._http._request("POST", "/close", self._body())
            self.server_id = None
        self._http.close()

    def get_state(self) -> dict[str, Any]:
        """Not supported: the episode's state lives on the server."""
        raise NotImplementedError("an AgentGym env's state lives on its server; it cannot be snapshotted")

    def clone(self) -> Env:
        """Not supported: the episode's state lives on the server."""
        raise NotImplementedError("an AgentGym env's state lives on its server; it cannot be cloned")


def resolve(env_id: str) -> EnvSpec:
    """The spec of ``agentgym+http://host:port[/path]``: the server whose ``/create`` is at ``.../create``."""
    url = env_id[len(SCHEME) :]
    if not url.startswith(("http://", "https://")) or len(url.split("://", 1)[1]) == 0:
        raise RegistryError(f"AgentGym env id {env_id!r} must look like 'agentgym+http://host:port[/path]'")
    return EnvSpec(env_id, AgentGymEnv, {"url": url})


def register_scheme_hook() -> None:
    """Let ``agentgym+http://...`` ids resolve to `AgentGymEnv`."""
    register_scheme(SCHEME, resolve)
