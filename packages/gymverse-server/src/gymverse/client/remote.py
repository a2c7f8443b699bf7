"""`RemoteEnv`: an env served by ``gymverse serve``, driven through the plain `Env` API (sync and async).

``gymverse.make("remote+http://host:port/game:Mastermind")`` builds one, so do `make_vec` (every backend),
`EnvPool` and the adapters. The env's rules run on the server: complexity requested here is sent with the next
reset, seeds mean what they mean locally (same seed, same instance), and a raising or hung env comes back as an
error-truncated step (``info["error"]``) exactly like the vector backends report it. A client that restarts can
take its session back, mid-episode, by opening it with the same ``idempotency_key`` (or ``session_id=``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from typing import Any

from gymverse.client.http import AsyncRemoteClient, RemoteClient, RemoteError
from gymverse.complexity import ComplexitySpec
from gymverse.contract import FORMAT_PENALTY, EnvMetadata, StepResult
from gymverse.core import EpisodeBookkeeping
from gymverse.protocol import EnvLike

TOKEN_ENV_VAR = "GYMVERSE_TOKEN"


class RemoteEnvFailed(RuntimeError):
    """The remote env failed to reset (the server ended the episode with this error)."""


class RemoteEnv(EpisodeBookkeeping):
    """A remote env session. `url` is the server (``http://host:port``), `env_id` a served id; extra keyword
    arguments go to the env's constructor on the server. The token defaults to ``$GYMVERSE_TOKEN``; ``token=""``
    sends none.

    An `EnvLike` proxy, not an `Env`: the episode (seeding, turn counting, format errors) runs on the server, so
    none of the authoring template applies here; it mirrors the server's level and turn bookkeeping."""

    #: The contract's default; the served document does not carry the env's own (the server applies it).
    format_penalty: float = FORMAT_PENALTY

    def __init__(
        self,
        url: str,
        env_id: str,
        complexity: int | None = None,
        seed: int | None = None,
        max_turns: int | None = None,
        *,
        token: str | None = None,
        timeout: float = 60.0,
        retries: int = 5,
        idempotency_key: str | None = None,
        session_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        # `rng` here draws this client's random actions only; the env's own generator lives on the server
        super().__init__(complexity if complexity is not None else 1, seed, max_turns)
        self.url = url.rstrip("/")
        self.env_id = env_id
        self.kwargs = dict(kwargs) if max_turns is None else {**kwargs, "max_turns": max_turns}
        self.token = (token if token is not None else os.environ.get(TOKEN_ENV_VAR)) or None  # "": send none
        self.idempotency_key = idempotency_key or uuid.uuid4().hex
        self.session_id = session_id
        self._create_args = (seed, complexity)
        self._timeout, self._retries = timeout, retries
        self._seq = 0
        self._doc: dict[str, Any] = {}
        self._sync: RemoteClient | None = None
        self._async: tuple[asyncio.AbstractEventLoop, AsyncRemoteClient] | None = None
        self.closed = False
        if session_id is not None:
            self._adopt(self._client().state(session_id))

    # ------------------------------------------------------------------ plumbing
    def _client(self) -> RemoteClient:
        if self._sync is None:
            self._sync = RemoteClient(self.url, token=self.token, timeout=self._timeout, retries=self._retries)
        return self._sync

    def _aclient(self) -> AsyncRemoteClient:
        loop = asyncio.get_running_loop()
        if self._async is None or self._async[0] is not loop:
            self._drop_async()
            client = AsyncRemoteClient(self.url, token=self.token, timeout=self._timeout, retries=self._retries)
            self._async = (loop, client)
        return self._async[1]

    def _drop_async(self) -> None:
        if self._async is None:
            return
        loop, client = self._async
        self._async = None
        if loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            if loop.is_running():
                asyncio.run_coroutine_threadsafe(client.aclose(), loop)
            else:
                loop.run_until_complete(client.aclose())

    def _create_body(self) -> dict[str, Any]:
        seed, complexity = self._create_args
        return {
            "env_id": self.env_id,
            "kwargs": self.kwargs,
            "seed": seed,
            "complexity": complexity,
            "idempotency_key": self.idempotency_key,
        }

    def _created(self, response: dict[str, Any]) -> bool:
        self.session_id = response["session_id"]
        self._doc = response.get("env") or {}
        return bool(response["created"])

    def _adopt(self, state: dict[str, Any]) -> None:
        """Take over a session that already exists (a restarted client): its call count, turn and episode state."""
        self.session_id = state["session_id"]
        self._seq = int(state["seq"])
        self.turn = int(state["turn"])
        self.done = bool(state["ended"])
        self._needs_reset = int(state["episode"]) == 0 or self.done
        if state.get("complexity") is not None:
            self._level = int(state["complexity"])
            self._fill_params()

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _resync(self, state: dict[str, Any]) -> None:
        self._seq = int(state["seq"])

    def _lost(self, err: RemoteError) -> bool:
        """True (and the session forgotten) when the server no longer has it: closed, collected idle, restarted."""
        if err.status != 404 or err.kind != "unknown_session":
            return False
        self.session_id, self.idempotency_key = None, uuid.uuid4().hex
        self._seq, self._needs_reset, self.done = 0, True, True
        return True

    def _fill_params(self) -> None:
        table = self._doc.get("complexity_params") or {}
        self.params = dict(table.get(str(self._level), {}))

    def _pending(self) -> int | None:
        return self._pending_level

    def _after_reset(self, res: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        info: dict[str, Any] = res["info"]
        if res.get("env_error") is not None:
            self._needs_reset, self.done = True, True
            raise RemoteEnvFailed(str(res["env_error"]))
        self._pending_level = None
        self._level = int(info.get("complexity", self._level))
        self._fill_params()
        self.turn, self.done, self._needs_reset = 0, False, False
        return res["observation"], info

    def _check_step(self) -> None:
        if self.closed:
            raise RuntimeError(f"RemoteEnv {self.env_id} is closed")
        if self._needs_reset:
            raise RuntimeError(f"RemoteEnv({self.env_id}).step() called before reset()")
        if self.done:
            raise RuntimeError(f"RemoteEnv({self.env_id}).step() called after the episode ended; call reset()")

    def _after_step(self, res: dict[str, Any]) -> StepResult:
        info: dict[str, Any] = res["info"]
        self.turn = int(info.get("turn", self.turn + 1))
        result = StepResult(
            res["observation"], float(res["reward"]), bool(res["terminated"]), bool(res["truncated"]), info
        )
        self.done = result.done
        return result

    # ------------------------------------------------------------------ EnvLike API (blocking)
    @classmethod
    def complexity_spec(cls) -> ComplexitySpec:
        """Empty: the served env's params come with its document (`params`), its declaration stays on the server."""
        return ComplexitySpec({}, {})

    def _declared_max_turns(self) -> int:
        return self.metadata.max_turns

    @property
    def unwrapped(self) -> RemoteEnv:
        """Itself: the proxy wraps nothing local."""
        return self

    @property
    def metadata(self) -> EnvMetadata:
        """The served env's metadata (opens the session if needed)."""
        if not self._doc:
            self._ensure()
        md = dict(self._doc["metadata"])
        md["reward_range"] = tuple(md["reward_range"])
        return EnvMetadata(**md)

    def _ensure(self) -> str:
        if self.closed:
            raise RuntimeError(f"RemoteEnv {self.env_id} is closed")
        if self.session_id is None:
            client = self._client()
            response = client.create_session(**self._create_body())
            if not self._created(response):
                self._adopt(client.state(response["session_id"]))
        assert self.session_id is not None
        return self.session_id

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode on the server (a seed reseeds; a pending complexity level is sent along)."""
        sid = self._ensure()
        try:
            res = self._client().reset(sid, seed, self._pending(), self._next_seq())
        except RemoteError as err:
            if not self._lost(err):
                self._resync(self._client().state(sid))
                raise
            # a reset needs nothing of the old session: a fresh one (same seed and settings) takes over
            res = self._client().reset(self._ensure(), seed, self._pending(), self._next_seq())
        return self._after_reset(res)

    def step(self, action: str) -> StepResult:
        """Apply one text action on the server."""
        self._check_step()
        sid = self._ensure()
        try:
            res = self._client().step(sid, action if isinstance(action, str) else str(action), self._next_seq())
        except RemoteError as err:
            if not self._lost(err):  # a lost session loses its episode: the next reset opens a fresh one
                self._resync(self._client().state(sid))
            raise
        return self._after_step(res)

    def observation(self) -> str | None:
        """The session's latest observation, read from the server (e.g. after taking a session back)."""
        result: str | None = self._client().observation(self._ensure())["observation"]
        return result

    def close(self) -> None:
        """Close the remote session and this env's connections (idempotent)."""
        if self.closed:
            return
        self.closed = True
        try:
            if self.session_id is not None:
                self._client().close_session(self.session_id)
        finally:
            if self._sync is not None:
                self._sync.close()
            self._drop_async()

    # ------------------------------------------------------------------ EnvLike API (asyncio)
    async def _aensure(self) -> str:
        if self.closed:
            raise RuntimeError(f"RemoteEnv {self.env_id} is closed")
        if self.session_id is None:
            client = self._aclient()
            response = await client.create_session(**self._create_body())
            if not self._created(response):
                self._adopt(await client.state(response["session_id"]))
        assert self.session_id is not None
        return self.session_id

    async def areset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """`reset` without blocking the event loop."""
        sid = await self._aensure()
        try:
            res = await self._aclient().reset(sid, seed, self._pending(), self._next_seq())
        except RemoteError as err:
            if not self._lost(err):
                self._resync(await self._aclient().state(sid))
                raise
            res = await self._aclient().reset(await self._aensure(), seed, self._pending(), self._next_seq())
        return self._after_reset(res)

    async def astep(self, action: str) -> StepResult:
        """`step` without blocking the event loop."""
        self._check_step()
        sid = await self._aensure()
        try:
            res = await self._aclient().step(sid, action if isinstance(action, str) else str(action), self._next_seq())
        except RemoteError as err:
            if not self._lost(err):
                self._resync(await self._aclient().state(sid))
            raise
        return self._after_step(res)

    async def aclose(self) -> None:
        """`close` without blocking the event loop."""
        if self.closed:
            return
        self.closed = True
        if self.session_id is not None:
            await self._aclient().close_session(self.session_id)
        if self._async is not None:
            await self._async[1].aclose()
            self._async = None
        if self._sync is not None:
            self._sync.close()

    # ------------------------------------------------------------------ not available remotely
    def solve(self) -> str:
        """Not served: the oracle stays on the server."""
        raise NotImplementedError(f"the oracle of {self.env_id} is not served over HTTP")

    def get_state(self) -> dict[str, Any]:
        """Not available: the state lives on the server."""
        raise NotImplementedError("a RemoteEnv's state lives on the server and cannot be snapshotted")

    def set_state(self, state: Any) -> None:
        """Not available: the state lives on the server."""
        raise NotImplementedError("a RemoteEnv's state lives on the server and cannot be restored")

    def clone(self) -> EnvLike:
        """Not available: two clients would share one server session."""
        raise NotImplementedError("a RemoteEnv cannot be cloned (open another session instead)")

    def __repr__(self) -> str:
        return f"<RemoteEnv {self.url}/{self.env_id} session={self.session_id}>"

    def __enter__(self) -> RemoteEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: Checked by mypy: the proxy implements the whole protocol (a missing or mistyped member fails the type check).
_IMPLEMENTS: type[EnvLike] = RemoteEnv


class RemoteSession:
    """`RemoteEnv` as an async episode session (``set_complexity`` / ``await reset/step/close``): the rollout
    session protocol, so episode loops drive remote envs like pool sessions."""

    def __init__(self, env: RemoteEnv) -> None:
        self.env = env
        self.env_id = env.env_id

    @classmethod
    def open(cls, url: str, env_id: str, **kwargs: Any) -> RemoteSession:
        """A session on `env_id` at `url` (arguments as for `RemoteEnv`); the server is contacted at reset."""
        return cls(RemoteEnv(url, env_id, **kwargs))

    def set_complexity(self, level: int) -> None:
        """Use `level` from the next reset on (sent with it)."""
        self.env.set_complexity(level)

    async def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode; ``info["complexity"]`` is the level in effect."""
        return await self.env.areset(seed)

    async def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply one action."""
        return tuple(await self.env.astep(action))  # type: ignore[return-value]

    async def close(self) -> None:
        """Close the remote session (idempotent)."""
        await self.env.aclose()

    async def __aenter__(self) -> RemoteSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
