"""What the routers share: the running ingress, the error bodies, and `/healthz`.

Serve pickles the app into each ingress replica (`serve.ingress(app)`), so a route reaches its
replica's `serve.ingress.Ingress` through `ingress()`, set by the constructor in the replica's
process, never through the app object of the module."""

from typing import Annotated, Any

import ray
from fastapi import APIRouter, Depends, HTTPException

from core.wire import TurnFailure, TurnResult

ACTOR_GONE = (ray.exceptions.ActorDiedError, ray.exceptions.ActorUnavailableError, ray.exceptions.RayActorError)
"""The errors of a call whose pair actor is gone (evicted or crashed)."""

_running: Any = None


def bind(instance: Any) -> None:
    """Called by `Ingress.__init__`: the routes of this process answer through `instance`."""
    global _running
    _running = instance


async def ingress() -> Any:
    """The running `serve.ingress.Ingress` of this replica (a FastAPI dependency)."""
    if _running is None:
        raise RuntimeError("no ingress runs in this process (Ingress.__init__ binds it)")
    return _running


TheIngress = Annotated[Any, Depends(ingress)]
"""A route's parameter for the running ingress: `ing: TheIngress`."""


def error(status: int, kind: str, message: str) -> HTTPException:
    return HTTPException(status_code=status, detail={"type": kind, "message": message})


def unknown_character(character_id: str) -> HTTPException:
    return error(404, "unknown_character", f"no character {character_id!r}; GET /v1/characters lists the characters")


def turn_failed(failure: TurnFailure) -> dict:
    """The error body of a turn whose chain failed: which node, and whether the human's message
    is kept (then the same turn_id asks for the reply again, and his message is not stored twice)."""
    message = f"node {failure.node} failed: {failure.message}"
    if failure.message_kept:
        message += (f"; your message is kept: send it again with the same turn_id ({failure.turn_id}) "
                    "to ask for the reply")
    return {"type": "turn_failed", "message": message, "turn_id": failure.turn_id,
            "message_kept": failure.message_kept, "node": failure.node}


def turn_result(result: TurnResult | TurnFailure) -> TurnResult:
    """The turn's result; a failed turn answers 502 with `turn_failed`'s body."""
    if isinstance(result, TurnFailure):
        raise HTTPException(status_code=502, detail=turn_failed(result))
    return result


router = APIRouter()


@router.get("/healthz")
async def healthz(ing: TheIngress) -> dict:
    await ing.store.ready.remote()
    await (await ing.redis_client()).ping()
    return {"status": "ok"}
