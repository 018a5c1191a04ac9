"""What the routers share: the running ingress, the error bodies, and `/healthz`.

Serve pickles the app into each ingress replica (`serve.ingress(app)`), so a route reaches its
replica's `serve.ingress.Ingress` through `ingress()`, set by the constructor in the replica's
process, never through the app object of the module."""

from dataclasses import dataclass
from typing import Annotated

import ray
from fastapi import APIRouter, Depends, HTTPException, Request
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException as FormError

from core import logsafe
from core.wire import PairRuecknahmeRequest, PairSuperseded, RuecknahmeResult, TurnFailure, TurnResult
from serve import schwere_ops
from serve.ports import IngressPort

ACTOR_GONE = (ray.exceptions.ActorDiedError, ray.exceptions.ActorUnavailableError, ray.exceptions.RayActorError,
              PairSuperseded)
"""The errors of a call whose pair actor is gone (evicted or crashed) or serves the pair no more
(the registry gave it to another process, or Ray restarted it unbound): the pair is resolved anew."""

_running: IngressPort | None = None


def bind(instance: IngressPort) -> None:
    """Called by `Ingress.__init__`: the routes of this process answer through `instance`."""
    global _running
    _running = instance
    logsafe.install()  # client strings in this process's log records: escaped, one record one line


async def ingress() -> IngressPort:
    """The running `serve.ingress.Ingress` of this replica (a FastAPI dependency)."""
    if _running is None:
        raise RuntimeError("no ingress runs in this process (Ingress.__init__ binds it)")
    return _running


TheIngress = Annotated[IngressPort, Depends(ingress)]
"""A route's parameter for the running ingress: `ing: TheIngress`, typed by what the routes may use of it."""


def error(status: int, kind: str, message: str) -> HTTPException:
    return HTTPException(status_code=status, detail={"type": kind, "message": message})


HEADER_MAX_CHARS = 1024
"""The longest header value made of client strings (`header_value`)."""


def header_value(names: list[str]) -> str:
    """Client strings (the names of fields a request set) as one response header's value: in
    printable ASCII, every other character escaped (`\\u540d`, `\\r`), and at most
    `HEADER_MAX_CHARS` characters, a longer list cut with `...`."""
    value = logsafe.nur_ascii(", ".join(names))
    return value if len(value) <= HEADER_MAX_CHARS else value[:HEADER_MAX_CHARS - 3] + "..."


def unknown_character(character_id: str) -> HTTPException:
    return error(404, "unknown_character", f"no character {character_id!r}; GET /v1/characters lists the characters")


def turn_failed(failure: TurnFailure) -> dict:
    """The error body of a turn whose chain failed: which node, and whether the human's message
    is kept (then the same turn_id asks for the reply again, and his message is not stored twice)."""
    if failure.zurueckgenommen:
        return {"type": "turn_retracted", "message": failure.message, "turn_id": failure.turn_id,
                "message_kept": False, "node": None}
    if failure.refused:
        return {"type": "limit", "message": failure.message, "turn_id": failure.turn_id, "message_kept": False,
                "node": None}
    message = f"node {failure.node} failed: {failure.message}"
    if failure.message_kept:
        message += (f"; your message is kept: send it again with the same turn_id ({failure.turn_id}) "
                    "to ask for the reply")
    return {"type": "turn_failed", "message": message, "turn_id": failure.turn_id,
            "message_kept": failure.message_kept, "node": failure.node}


async def retract(ing: IngressPort, user_id: str, character_id: str, request: PairRuecknahmeRequest) -> RuecknahmeResult:
    """Take turns back through the pair's actor, under admission and in its turn order
    (actors/ruecknahme.py) — a turn operation of the user, at either door (`max_turn_ops_in_flight_per_user`,
    `turn_ops_per_minute_per_user`; beyond: 429 with Retry-After): 409 `nothing_to_retract` when the
    pair holds no message of the human; 502 with `turn_failed`'s body when the new turn of a
    regenerate or edit failed."""
    async with schwere_ops.zugelassen(ing, user_id, "turn"), ing.admitted(user_id, character_id):
        out: RuecknahmeResult = await ing.call(user_id, character_id, lambda h: h.zuruecknehmen.remote(request))
    if out.nichts:
        raise error(409, "nothing_to_retract", "the conversation holds no message of yours to take back")
    if out.failure is not None:  # taken back; the new turn failed (its message kept when message_kept)
        detail = {**turn_failed(out.failure), "op_id": out.op_id, "zurueckgenommen": out.zurueckgenommen}
        raise HTTPException(status_code=502, detail=detail)
    return out


def turn_result(result: TurnResult | TurnFailure) -> TurnResult:
    """The turn's result; a failed turn answers 502 with `turn_failed`'s body, a refused one 429."""
    if isinstance(result, TurnFailure) and result.zurueckgenommen:
        raise HTTPException(status_code=409, detail=turn_failed(result))
    if isinstance(result, TurnFailure) and result.refused:
        raise HTTPException(status_code=429, headers={"Retry-After": "2"},
                            detail={"type": "limit", "message": result.message, "turn_id": result.turn_id})
    if isinstance(result, TurnFailure):
        raise HTTPException(status_code=502, detail=turn_failed(result))
    return result


@dataclass(frozen=True)
class Upload:
    """An uploaded file's bytes, with the name and type its sender gave (either may be missing)."""

    data: bytes
    name: str | None
    content_type: str | None


async def upload(request: Request, what: str) -> Upload:
    """The uploaded file of a request: the raw body, or the one file part of a multipart form
    (`curl -F file=@card.png`, a browser's form, most clients). The body's size is bounded by the
    BodyLimit middleware before either is read; a form with no file, or more than one, is refused."""
    content_type = request.headers.get("content-type")
    if not (content_type or "").lower().startswith("multipart/form-data"):
        return Upload(await request.body(), None, content_type)
    try:
        form = await request.form(max_files=1, max_fields=16)
    except FormError as e:  # Starlette's: a malformed form, or more than one file
        raise error(422, "invalid_upload", f"multipart form: {e.detail}")
    files = [v for v in form.values() if isinstance(v, UploadFile)]
    if len(files) != 1:
        raise error(422, "invalid_upload", f"multipart form without a file part: send the {what} as a file "
                                           f"field (curl -F file=@{what}.ext), or as the raw body")
    f = files[0]
    try:
        return Upload(await f.read(), f.filename, f.content_type)
    finally:
        await form.close()


router = APIRouter()


@router.get("/healthz")
async def healthz(ing: TheIngress) -> dict:
    """The stores answer; with the agents' quota counters (seed 003: delivered, came back, the
    delivery loss, the router's utterances as denominator; aggregate counts, nobody's data)."""
    from memory import agent_quoten

    await ing.store.ready.remote()
    r = await ing.redis_client()
    await r.ping()
    return {"status": "ok", "agenten": [q.model_dump() for q in await agent_quoten.lesen(r)]}
