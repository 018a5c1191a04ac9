"""The native turn API: a turn (plain or streamed), the history, the messages Nova produces without
being asked, the pair's status, the character's greeting, and an operator's event."""

import json
import time
import uuid
import weakref
from datetime import datetime, timezone

from fastapi import APIRouter, Header, HTTPException, Path, Query, Request
from sse_starlette.sse import EventSourceResponse

from core.wire import (DraftEvent, ErrorEvent, EventDropped, FinalEvent, PairEventRequest, PairRuecknahmeRequest,
                       RestartEvent)
from memory import session
from pipeline.figur import einsetzen
from serve.ports import IngressPort
from serve.routes.common import ACTOR_GONE, TheIngress, error, retract, turn_failed, turn_result
from serve.schemas import (ID_PATTERN, EditRequest, EventRequest, HistoryResponse, RegenerateRequest, RetractResponse,
                           RewindRequest, SwipesResponse, TurnRequest, TurnResponse)

router = APIRouter()


@router.post("/v1/pairs/{user_id}/{character_id}/turns", response_model=TurnResponse)
async def post_turn(body: TurnRequest, ing: TheIngress, user_id: str = Path(pattern=ID_PATTERN),
                    character_id: str = Path(pattern=ID_PATTERN), stream: bool = Query(False),
                    draft: bool = Query(False), authorization: str | None = Header(None)):
    """A message's turn. Streamed (`?stream=true`), it shows only reviewed text by default: one
    `schreibt` event when the character starts writing, then the reply as kept (`token`), then
    `final`; `?draft=true` adds the responder's provisional text as `draft` events, for a client
    that redraws when the kept reply differs (`token.draft_kept`)."""
    principal = await ing.principal(authorization)
    ing.owner(principal, user_id)
    text, turn_id = ing.validate_text(body.text), body.turn_id or uuid.uuid4().hex
    person = {"name": body.name, "received_at": _zeitpunkt(principal, body.zeitpunkt)}
    await ing.known_character(character_id)
    if person["received_at"] is not None:
        await _nicht_vor_dem_letzten(ing, user_id, character_id, person["received_at"])
    if not stream:
        return turn_result(await ing.run_turn(user_id, character_id, text, turn_id, **person)).body()
    turn = await ing.run_stream(user_id, character_id, text, turn_id, **person)  # 429 here, before the answer starts

    async def events():
        schreibt = False
        async for ev in turn:
            if isinstance(ev, DraftEvent) and not draft:  # unreviewed text stays on the server
                if not schreibt:
                    schreibt = True
                    yield {"event": "schreibt", "data": json.dumps({"node": ev.node})}
                continue
            if isinstance(ev, RestartEvent):
                schreibt = False
            if isinstance(ev, ErrorEvent):  # the same body as a plain request's 502
                data = {"error": turn_failed(ev.failure)}
            elif isinstance(ev, FinalEvent):
                data = ev.result.body()
            else:
                data = ev.model_dump(exclude={"event"})
            yield {"event": ev.event, "data": json.dumps(data)}

    return EventSourceResponse(events())


ZUKUNFT_S = 60
"""How far ahead of this replica's clock a replayed message's date may lie (clocks differ a little)."""


def _zeitpunkt(principal: dict, zeitpunkt: datetime | None) -> datetime | None:
    """A message's own date: an operator's, for a conversation replayed from elsewhere; never one to come."""
    if zeitpunkt is None:
        return None
    if not principal["is_operator"]:
        raise error(403, "forbidden", "zeitpunkt: only an operator key dates a message")
    if zeitpunkt.timestamp() > time.time() + ZUKUNFT_S:
        raise error(422, "invalid_request", "zeitpunkt: lies in the future")
    return zeitpunkt.astimezone(timezone.utc)


async def _nicht_vor_dem_letzten(ing: IngressPort, user_id: str, character_id: str, zeitpunkt: datetime) -> None:
    """A replayed message goes after the pair's last entry: its memories, its sessions and Nova's
    stored state follow the order of the dates."""
    last = await session.load_turns(await ing.redis_client(), user_id, character_id, 1)
    try:
        zuletzt = datetime.fromisoformat(last[-1]["time"]) if last else None
    except (TypeError, ValueError, KeyError):  # an entry without a readable time (an undated import) orders nothing
        return
    if zuletzt is not None and zuletzt.tzinfo is None:
        zuletzt = zuletzt.replace(tzinfo=timezone.utc)
    if zuletzt is not None and zuletzt > zeitpunkt:
        raise error(422, "invalid_request", f"zeitpunkt: before the pair's last message ({last[-1]['time']}); a "
                                            "replayed conversation goes in order, into a pair of its own")


@router.get("/v1/pairs/{user_id}/{character_id}/turns", response_model=HistoryResponse)
async def get_history(ing: TheIngress, user_id: str = Path(pattern=ID_PATTERN),
                      character_id: str = Path(pattern=ID_PATTERN), limit: int = Query(50, ge=1, le=500),
                      authorization: str | None = Header(None)):
    principal = await ing.principal(authorization)
    ing.owner(principal, user_id)
    await ing.known_character(character_id)
    # from the session store: reading the history never makes (or wakes) a pair actor
    turns = await session.load_turns(await ing.redis_client(), user_id, character_id, limit)
    return {"user_id": user_id, "character_id": character_id, "turns": turns}


async def _retract(ing: IngressPort, authorization: str | None, user_id: str, character_id: str,
                   request: PairRuecknahmeRequest) -> dict:
    """Take turns back through the pair's actor, in its turn order (actors/ruecknahme.py); a turn
    operation, admitted per user (`max_turn_ops_in_flight_per_user`, `turn_ops_per_minute_per_user`;
    beyond: 429 with Retry-After)."""
    principal = await ing.principal(authorization)
    ing.owner(principal, user_id)
    await ing.known_character(character_id)
    out = await retract(ing, user_id, character_id, request)
    return {"op_id": out.op_id, "art": out.art, "zurueckgenommen": out.zurueckgenommen, "by_store": out.by_store,
            "turn": out.turn.body() if out.turn is not None else None}


@router.post("/v1/pairs/{user_id}/{character_id}/turns/rewind", response_model=RetractResponse)
async def rewind(body: RewindRequest, ing: TheIngress, user_id: str = Path(pattern=ID_PATTERN),
                 character_id: str = Path(pattern=ID_PATTERN), authorization: str | None = Header(None)):
    """Delete the human's last `n` messages, everything after them, and everything they wrote in
    every store; what they changed comes back as it was."""
    request = PairRuecknahmeRequest(art="rewind", n=body.n, op_id=body.op_id or uuid.uuid4().hex)
    return await _retract(ing, authorization, user_id, character_id, request)


@router.post("/v1/pairs/{user_id}/{character_id}/turns/regenerate", response_model=RetractResponse)
async def regenerate(ing: TheIngress, body: RegenerateRequest | None = None, user_id: str = Path(pattern=ID_PATTERN),
                     character_id: str = Path(pattern=ID_PATTERN), authorization: str | None = Header(None)):
    """A new reply to the human's last message: the last turn is taken back (its reply kept as a
    swipe of the new turn) and answered again."""
    body = body or RegenerateRequest()
    request = PairRuecknahmeRequest(art="regenerate", op_id=body.op_id or uuid.uuid4().hex, turn_id=body.turn_id)
    return await _retract(ing, authorization, user_id, character_id, request)


@router.post("/v1/pairs/{user_id}/{character_id}/turns/edit", response_model=RetractResponse)
async def edit(body: EditRequest, ing: TheIngress, user_id: str = Path(pattern=ID_PATTERN),
               character_id: str = Path(pattern=ID_PATTERN), authorization: str | None = Header(None)):
    """Change the human's last message: its turn is taken back and the new text answered."""
    text = ing.validate_text(body.text)
    request = PairRuecknahmeRequest(art="edit", text=text, op_id=body.op_id or uuid.uuid4().hex, turn_id=body.turn_id,
                                 name=body.name)
    return await _retract(ing, authorization, user_id, character_id, request)


@router.get("/v1/pairs/{user_id}/{character_id}/turns/{turn_id}/swipes", response_model=SwipesResponse)
async def swipes(ing: TheIngress, user_id: str = Path(pattern=ID_PATTERN), character_id: str = Path(pattern=ID_PATTERN),
                 turn_id: str = Path(pattern=ID_PATTERN), authorization: str | None = Header(None)):
    """The replies a regenerated turn replaced, oldest first."""
    principal = await ing.principal(authorization)
    ing.owner(principal, user_id)
    await ing.known_character(character_id)
    swipes = await ing.store_ops.ruecknahme.varianten(user_id, character_id, turn_id)
    return {"turn_id": turn_id, "swipes": [s.model_dump(mode="json") for s in swipes]}


class _Slot:
    """A user's place among the open event streams, given back once, however the stream ends:
    by its generator's end, by the answer's end, or — a client that left before the answer
    started, so that neither ran — when the answer object is collected."""

    def __init__(self, counts: dict[str, int], user_id: str):
        self._counts, self._user = counts, user_id
        self._held = True

    def free(self) -> None:
        if self._held:
            self._held = False
            self._counts[self._user] -= 1


class _SlotResponse(EventSourceResponse):
    def __init__(self, content, slot: _Slot):
        super().__init__(content)
        weakref.finalize(self, slot.free)
        self._slot = slot

    async def __call__(self, scope, receive, send):
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._slot.free()


@router.get("/v1/pairs/{user_id}/{character_id}/events")
async def get_events(request: Request, ing: TheIngress, user_id: str = Path(pattern=ID_PATTERN),
                     character_id: str = Path(pattern=ID_PATTERN),
                     after: str | None = Query(None, max_length=30),
                     last_event_id: str | None = Header(None, max_length=30),
                     authorization: str | None = Header(None)):
    """Server-sent events: every message Nova produces without being asked (the Thinker's
    retry, a planned impulse, a `continue`), once it is committed. The cursor (`Last-Event-ID`
    or `?after=`; `0` = every kept message) resumes where a client left; none = only new ones."""
    principal = await ing.principal(authorization)
    ing.owner(principal, user_id)
    await ing.known_character(character_id)
    r = await ing.redis_client()
    cursor = last_event_id or after
    if cursor is not None and not session.CURSOR.fullmatch(cursor):  # `$` alone lets a final newline through
        raise error(422, "invalid_request", f"invalid cursor {cursor!r}: expected 0 or an event id "
                                            "such as 1733011200000-0")
    if ing.streams.get(user_id, 0) >= ing.settings.max_event_streams_per_user:
        raise HTTPException(status_code=429, headers={"Retry-After": "5"}, detail={
            "type": "limit", "message": f"at most {ing.settings.max_event_streams_per_user} open event streams "
                                       "per user"})
    cursor = cursor or await session.push_cursor_now(r, user_id, character_id)
    ing.streams[user_id] = ing.streams.get(user_id, 0) + 1  # no await from here to the answer's start
    slot = _Slot(ing.streams, user_id)

    async def events():
        nonlocal cursor
        try:
            yield {"event": "bereit", "id": cursor, "data": json.dumps({"cursor": cursor})}
            quiet_since = time.monotonic()
            while not await request.is_disconnected():  # a client that left frees its place at once
                # each wait stays below the Redis client's socket timeout (5 s)
                got = await session.read_pushed(r, user_id, character_id, cursor, block_ms=session.PUSH_WAIT_MS)
                if not got and time.monotonic() - quiet_since >= ing.settings.events_block_s:
                    yield {"comment": "keep-alive"}
                    quiet_since = time.monotonic()
                for mid, message in got:
                    cursor, quiet_since = mid, time.monotonic()
                    yield {"event": "nachricht", "id": mid, "data": json.dumps(message)}
        finally:
            slot.free()

    return _SlotResponse(events(), slot)


_OPERATORS_ONLY = ("process", "token", "pid")
"""What a pair's status shows an operator alone: the actor's name, fencing token and process id."""


@router.get("/v1/pairs/{user_id}/{character_id}/status")
async def get_status(ing: TheIngress, user_id: str = Path(pattern=ID_PATTERN),
                     character_id: str = Path(pattern=ID_PATTERN), authorization: str | None = Header(None)):
    principal = await ing.principal(authorization)
    ing.owner(principal, user_id)
    await ing.known_character(character_id)
    h = await ing.live_pair(user_id, character_id)
    if h is not None:
        try:
            status = await h.status.remote()
        except ACTOR_GONE:
            ing.forget(user_id, character_id)
        else:
            if not principal["is_operator"]:  # the process behind the pair is the operators' business
                status = {k: v for k, v in status.items() if k not in _OPERATORS_ONLY}
            return {**status, "live": True}
    # no actor: the pair is idle (or new); the answer comes from the stores and makes none
    turns = await session.count_turns(await ing.redis_client(), user_id, character_id)
    return {"user_id": user_id, "character_id": character_id, "live": False, "busy": False, "inflight": 0,
            "session_turns": turns}


@router.post("/v1/pairs/{user_id}/{character_id}/events")
async def post_event(body: EventRequest, ing: TheIngress, user_id: str = Path(pattern=ID_PATTERN),
                     character_id: str = Path(pattern=ID_PATTERN), authorization: str | None = Header(None)):
    """Operators: let Nova open from her own thought, or continue, on the pair's event queue."""
    await ing.operator(authorization)
    if (body.eigener_gedanke is None) == (body.user_prompt is None):
        raise error(422, "invalid_request", "exactly one of eigener_gedanke / user_prompt must be set")
    await ing.known_character(character_id)
    event = PairEventRequest.model_validate(body.model_dump())
    async with ing.admitted(user_id, character_id):
        result = await ing.call(user_id, character_id, lambda h: h.event.remote(event))
    if isinstance(result, EventDropped) and result.reason == "pending_agent":
        raise error(409, "pending_agent", "event dropped: an order waits for the human's answer (pending_agent)")
    if isinstance(result, EventDropped):
        raise error(429, "limit", f"event dropped: {result.reason} (counter {result.counter})")
    return turn_result(result).body()


@router.get("/v1/pairs/{user_id}/{character_id}/greeting")
async def greeting(ing: TheIngress, user_id: str = Path(pattern=ID_PATTERN),
                   character_id: str = Path(pattern=ID_PATTERN), authorization: str | None = Header(None)):
    """The character's greeting. For a pair without any turn it becomes the first message of
    the conversation (stored once), so the character remembers having said it."""
    principal = await ing.principal(authorization)
    ing.owner(principal, user_id)
    ch = await ing.character_or_404(character_id)
    text = einsetzen(ch.begruessung, ch.name, "du").strip()
    out = {"user_id": user_id, "character_id": character_id, "name": ch.name, "begruessung": text or None,
           "neu_im_verlauf": False}
    if text:
        turn = {"rolle": "assistant", "sprecher": ch.name, "inhalt": text, "turn_id": "begruessung",
                "herkunft": "begruessung", "time": datetime.now(timezone.utc).isoformat()}
        out["neu_im_verlauf"] = await session.begruessen(await ing.redis_client(), user_id, character_id, turn)
    return out
