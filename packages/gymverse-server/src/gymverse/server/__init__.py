"""``gymverse serve``: GymVerse envs over HTTP for trainers in other processes, hosts or languages.

`create_app` builds the ASGI app, `EnvServer`
runs it in a background thread, `serve` in the foreground; `gymverse.client.RemoteEnv` is the matching client.
See `gymverse.server.app` for the protocol.
"""

from gymverse.server.config import ApiError, ServerConfig
from gymverse.server.leases import ClientLease, LeaseManager
from gymverse.server.runner import BackgroundServer, EnvServer, serve


def create_app(config: ServerConfig | None = None) -> object:
    """The ASGI app of the environment server (see `gymverse.server.app`)."""
    from gymverse.server.app import create_app as _create

    return _create(config)


__all__ = [
    "ApiError",
    "BackgroundServer",
    "ClientLease",
    "EnvServer",
    "LeaseManager",
    "ServerConfig",
    "create_app",
    "serve",
]
