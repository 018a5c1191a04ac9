"""The direct HTTP front's port survives its replica (Settings.http_front = "direct").

Serve's direct ingress binds the ingress replica's port without SO_REUSEADDR. When the replica dies,
the connections it held linger in TIME_WAIT on that port for a minute, the replacement replica
cannot bind it, and Serve gives the replacement the next port of the range and never the first
again (it blocks a port it failed to bind): the API would be gone from `http_port`. Serve's own
proxies bind their port with SO_REUSEADDR and SO_REUSEPORT (`SERVE_SOCKET_REUSE_PORT_ENABLED`,
default on); `reuse_the_port` has the ingress replica's server bind the same way. Called where the
ingress module is imported, in the replica's process, before Serve starts the server.
"""
from __future__ import annotations

import logging
import os

log = logging.getLogger("novaberg.ingress")


def reuse_the_port() -> bool:
    """Whether the ingress replica's HTTP server will bind with the port reusable (False: this
    Ray's Serve starts it another way, said in the log)."""
    if os.environ.get("SERVE_SOCKET_REUSE_PORT_ENABLED", "1") != "1":
        return False
    try:
        from ray.serve._private import replica
    except ImportError:
        return False
    start = getattr(replica, "start_asgi_http_server", None)
    if start is None:
        log.warning("fallback direct_front_port_not_reusable: this Ray's Serve starts the ingress replica's "
                    "server another way; a replacement replica may not get the HTTP port back for a minute")
        return False
    if getattr(start, "reuses_port", False):
        return True

    async def reusing(app, http_options, *, event_loop, enable_so_reuseport: bool = False, **kw):
        return await start(app, http_options, event_loop=event_loop, enable_so_reuseport=True, **kw)

    reusing.reuses_port = True
    replica.start_asgi_http_server = reusing
    return True
