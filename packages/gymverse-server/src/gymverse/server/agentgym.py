"""AgentGym-compatible routes, so AgentGym's env clients (``agentenv.envs.*EnvClient``) work unchanged.

AgentGym serves one env family per server: ``POST /create`` -> integer id; ``POST /reset {id, data_idx}``;
``POST /step {id, action}``; ``GET /observation?id=``; ``GET /detail?id=``; ``POST /close {id}``. Most families
name the id ``id`` and answer ``{"observation", "reward", "done"}`` (TextCraft, BabyAI, SciWorld, ALFWorld, the
LMRL-Gym games); WebShop names it ``env_idx``, answers ``/create`` with a bare integer, ``/step`` with
``{"state", "reward", "done", "info"}`` and ``/reset`` with ``[observation, null]``. Requests may use either field
name; ``ServerConfig.agentgym_dialect`` picks the answer shapes. The task index a client resets with (``data_idx``,
``game``, ``idx``, ``seed`` or ``session_id``) is the episode seed, so the same index gives the same instance.

The env is ``ServerConfig.agentgym`` on the root routes, or any served env under ``/agentgym/{env_id}/``. Unlike
AgentGym, failures are real HTTP errors with a JSON body (which also carries ``"error"``, the key AgentGym's
clients look for); ``score`` is the episode's return so far (BabyAI's and SciWorld's clients read it).
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import Response
from gymverse.server.config import ApiError
from gymverse.server.leases import ClientLease, LeaseManager
from gymverse.server.protocol import dumps, parse_object

ID_FIELDS = ("id", "env_idx")
INDEX_FIELDS = ("data_idx", "game", "idx", "seed", "session_id")


def _int_field(data: dict[str, Any], names: tuple[str, ...], *, required: bool) -> int | None:
    for name in names:
        value = data.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ApiError(400, "bad_request", f"{name!r} must be a non-negative integer, got {value!r}")
        return value
    if required:
        raise ApiError(400, "bad_request", f"missing the environment id (field {' or '.join(map(repr, names))})")
    return None


def add_agentgym_routes(app: Any, mgr: LeaseManager) -> None:
    """Mount the AgentGym routes on `app`: at the root for ``config.agentgym``, and under ``/agentgym/{env_id}``."""

    webshop = mgr.config.agentgym_dialect == "env_idx"

    def ok(payload: Any) -> Response:
        return Response(dumps(payload), media_type="application/json")

    def root_env() -> str:
        if mgr.config.agentgym is None:
            raise ApiError(404, "unknown_env", "no AgentGym env is served at the root (start with --agentgym ENV_ID)")
        return mgr.config.agentgym

    def lookup(env_id: str, agentgym_id: int | None) -> ClientLease:
        assert agentgym_id is not None
        session = mgr.get_agentgym(agentgym_id)
        if session.env_id != env_id:
            raise ApiError(404, "unknown_session", f"environment {agentgym_id} is a {session.env_id}, not {env_id}")
        return session

    def query_id(request: Request) -> int | None:
        for name in ID_FIELDS:
            text = request.query_params.get(name)
            if text is not None:
                if not text.isdigit():
                    raise ApiError(400, "bad_request", f"query parameter {name!r} must be an integer, got {text!r}")
                return int(text)
        raise ApiError(400, "bad_request", "missing query parameter 'id' (or 'env_idx')")

    def step_payload(session: ClientLease, res: dict[str, Any]) -> dict[str, Any]:
        done = res["terminated"] or res["truncated"]
        if webshop:
            out = {"state": res["observation"], "reward": res["reward"], "done": done, "info": res["info"]}
        else:
            out = {"observation": res["observation"], "reward": res["reward"], "score": session.episode_return}
            out.update(done=done, info=res["info"])
        if res["env_error"] is not None:
            out["error"] = res["env_error"]
        return out

    async def create(env_id: str, request: Request) -> Response:
        data = parse_object(await request.body(), required=False)  # family-specific fields (goal, ...) are ignored
        session, _ = await mgr.create(env_id, {}, None, None, agentgym=True)
        assert session.agentgym_id is not None
        seed = _int_field(data, INDEX_FIELDS, required=False)
        res = await mgr.reset(session, seed if seed is not None else session.agentgym_id, None)
        if webshop:
            return ok(session.agentgym_id)
        return ok({"id": session.agentgym_id, "observation": res["observation"], "reward": 0, "done": session.ended})

    async def reset(env_id: str, request: Request) -> Response:
        data = parse_object(await request.body())
        session = lookup(env_id, _int_field(data, ID_FIELDS, required=True))
        res = await mgr.reset(session, _int_field(data, INDEX_FIELDS, required=False), None)
        if webshop:
            return ok([res["observation"], None])
        out = {"id": session.agentgym_id, "observation": res["observation"], "reward": 0, "score": 0}
        out.update(done=session.ended, info=res["info"])
        if res["env_error"] is not None:
            out["error"] = res["env_error"]
        return ok(out)

    async def step(env_id: str, request: Request) -> Response:
        data = parse_object(await request.body())
        session = lookup(env_id, _int_field(data, ID_FIELDS, required=True))
        if "action" not in data:
            raise ApiError(400, "bad_request", "missing required field 'action'")
        res = await mgr.step(session, mgr.check_action(data["action"]))
        return ok(step_payload(session, res))

    async def observation(env_id: str, request: Request) -> Response:
        return ok(lookup(env_id, query_id(request)).observation)

    async def detail(env_id: str, request: Request) -> Response:
        session = lookup(env_id, query_id(request))
        return ok(
            {
                "id": session.agentgym_id,
                "observation": session.observation,
                "reward": session.reward,
                "score": session.episode_return,
                "done": session.ended,
                "deleted": False,
                "info": session.info,
            }
        )

    async def close(env_id: str, request: Request) -> Response:
        data = parse_object(await request.body())
        await mgr.close(lookup(env_id, _int_field(data, ID_FIELDS, required=True)))
        return ok({"closed": True})

    async def list_ids(env_id: str) -> Response:
        return ok(sorted(i for i, s in mgr.agentgym_sessions() if s.env_id == env_id))

    async def hello(env_id: str) -> Response:
        return ok(f"This is environment {env_id} (GymVerse).")

    handlers = {
        ("POST", "create"): create,
        ("POST", "reset"): reset,
        ("POST", "step"): step,
        ("GET", "observation"): observation,
        ("GET", "detail"): detail,
        ("POST", "close"): close,
    }

    def bind_root(fn: Any) -> Any:
        async def route(request: Request) -> Response:
            return await fn(root_env(), request)

        return route

    def bind_prefixed(fn: Any) -> Any:
        async def route(env_id: str, request: Request) -> Response:
            if not mgr.config.serves(env_id):
                raise ApiError(404, "unknown_env", f"env {env_id!r} is not served here (see GET /v1/envs)")
            return await fn(env_id, request)

        return route

    for (method, name), fn in handlers.items():
        app.add_api_route(f"/{name}", bind_root(fn), methods=[method], include_in_schema=False)
        app.add_api_route(f"/agentgym/{{env_id}}/{name}", bind_prefixed(fn), methods=[method])

    async def root_list() -> Response:
        return await list_ids(root_env())

    async def root_hello() -> Response:
        return await hello(root_env())

    app.add_api_route("/list_envs", root_list, methods=["GET"], include_in_schema=False)
    if mgr.config.agentgym is not None:  # AgentGym clients greet the root; otherwise GET / is the server's index
        app.add_api_route("/", root_hello, methods=["GET"], include_in_schema=False)
