"""Clients of ``gymverse serve``.

* `RemoteEnv`: a served env behind the plain `Env` API (and ``areset``/``astep``); ``gymverse.make`` and
  ``make_vec`` build it from ids like ``remote+http://host:port/game:Mastermind``.
* `RemoteSession`: the same as an async episode session for rollout loops.
* `RemoteClient` / `AsyncRemoteClient`: every endpoint, including batch steps, with retries and backoff.
"""

from gymverse.client.http import AsyncRemoteClient, RemoteClient, RemoteConnectionError, RemoteError
from gymverse.client.remote import RemoteEnv, RemoteEnvFailed, RemoteSession

__all__ = [
    "AsyncRemoteClient",
    "RemoteClient",
    "RemoteConnectionError",
    "RemoteEnv",
    "RemoteEnvFailed",
    "RemoteError",
    "RemoteSession",
]
