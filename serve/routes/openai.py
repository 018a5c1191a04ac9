"""The OpenAI-compatible door: the characters are the models (`GET /v1/models`); a chat
completion's history lives server-side: the client's messages are reconciled with it
(serve/reconcile.py) — a new message, a regenerate, an edit, or the server's history stands — and
the `X-Novaberg-History` header says which; what a request sets and the turn does not use is named
in the `X-Novaberg-Ignored` header."""

import json
import logging
import time
import uuid

from fastapi import APIRouter, Header, Response
from fastapi.responses import JSONResponse, StreamingResponse

from core.wire import ErrorEvent, FinalEvent, PairRuecknahmeRequest, TokenEvent, TurnResult
from memory import session
from serve import reconcile
from serve.ports import IngressPort
from serve.routes.common import TheIngress, error, header_value, retract, turn_failed, turn_result
from serve.schemas import TURN_ID_PATTERN, ChatCompletionRequest, ChatMessage, ClientUser, person_name, turn_id_frei

log = logging.getLogger("novaberg.ingress")

router = APIRouter()

IGNORED_HEADER = "X-Novaberg-Ignored"
HISTORY_HEADER = "X-Novaberg-History"


def _sse(obj: dict) -> str:
    return f"data: {json.dumps(obj)}\n\n"


def _text(m: ChatMessage) -> str:
    return m.content if isinstance(m.content, str) else "".join(p.text for p in (m.content or []))


def _begrenzt(ing: IngressPort, messages: list[ChatMessage]) -> None:
    """413 for a conversation beyond the door's bounds (`openai_max_messages`, `openai_max_chars`),
    before any of it is reconciled or read: the work one request asks of the ingress is bounded."""
    s = ing.settings
    if len(messages) > s.openai_max_messages:
        raise error(413, "too_large", f"messages: {len(messages)} messages; at most {s.openai_max_messages} (the "
                                      "history lives server-side: send the latest part of the conversation)")
    chars = sum(len(m.content) if isinstance(m.content, str) else sum(len(p.text) for p in m.content or [])
                for m in messages)
    if chars > s.openai_max_chars:
        raise error(413, "too_large", f"messages: {chars} characters together; at most {s.openai_max_chars} (the "
                                      "history lives server-side: send the latest part of the conversation)")


async def _abgleich(ing: IngressPort, user_id: str, character_id: str,
                    messages: list[ChatMessage]) -> reconcile.Abgleich:
    """How the client's conversation up to its last user message meets the pair's stored one.
    Admitted first: a user or pair at its bound is refused (429) before the stored history is read,
    and the reconciliation counts against those bounds while it runs."""
    gespraech = [m for m in messages if m.role in ("user", "assistant")]
    if gespraech and gespraech[-1].role == "assistant":
        # SillyTavern's "continue" (and its kin) ends with the reply to go on with: Nova's replies
        # are whole turns, and taking the last message as a new one would store it twice
        raise error(422, "invalid_request", "messages: the conversation ends with an assistant message (a "
                                            "continue): Nova cannot continue a reply; regenerate it (send the "
                                            "conversation up to your message) or send a new message")
    allein = len(gespraech) < 2  # the message alone: only the conversation's first exchange can meet it
    async with ing.admitted(user_id, character_id):
        stored = await session.load_turns(await ing.redis_client(), user_id, character_id,
                                          3 if allein else len(gespraech) + 16)
        if allein and len(stored) > 2:
            return "neu"
        client = [reconcile.nachricht(m.role, _text(m) or "") for m in gespraech]
        return reconcile.abgleichen(client, reconcile.gespeichert(stored))


async def _aufgabe(ing: IngressPort, body: ChatCompletionRequest, character_id: str, key: str, turn_id: str):
    """A client's housekeeping request answered without a turn: the JSON its template asks for,
    empty but for a title (the character's name). Nova's memory never holds it."""
    log.info("ingress: request %s over the OpenAI door is a client's task asking for %r: answered without a turn "
             "(fallback client_aufgabe)", turn_id, key)
    name = (await ing.character_or_404(character_id)).name
    content = json.dumps({key: name if key in ("title", "text") else []}, ensure_ascii=False)
    headers = {HISTORY_HEADER: "aufgabe"}
    base = {"id": f"chatcmpl-{turn_id}", "created": int(time.time()), "model": character_id}
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    if not body.stream:
        return JSONResponse({**base, "object": "chat.completion", "usage": usage, "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}]}, headers=headers)

    async def chunks():
        chunk = {**base, "object": "chat.completion.chunk"}
        delta = {"role": "assistant", "content": content}
        yield _sse({**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        yield _sse({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        yield "data: [DONE]\n\n"

    return StreamingResponse(chunks(), media_type="text/event-stream", headers=headers)


async def _gespeichert(ing: IngressPort, user_id: str, character_id: str, turn_id: str) -> TurnResult | None:
    """The stored result of a turn id the client sent before: its request again is a retry, answered
    with that result whatever its messages now reconcile to (never a regenerate)."""
    stored = await session.stored_result(await ing.redis_client(), user_id, character_id, turn_id)
    return None if stored is None else TurnResult.model_validate({**stored.body(), "replayed": True})


async def _noch_einmal(ing: IngressPort, user_id: str, character_id: str, art: str, text: str, turn_id: str,
                       name: str | None) -> TurnResult:
    """A regenerate or an edit the client's messages asked for, once per turn id."""
    out = await retract(ing, user_id, character_id, PairRuecknahmeRequest(
        art=art, op_id=f"oa-{turn_id}", turn_id=turn_id, text=text if art == "edit" else None,
        name=name if art == "edit" else None))
    return out.turn


@router.get("/v1/models")
async def list_models(ing: TheIngress, authorization: str | None = Header(None)):
    """The characters, as an OpenAI client lists models: the id is what `model` names."""
    await ing.principal(authorization)
    return {"object": "list", "data": [
        {"id": c.character_id, "object": "model", "created": c.created, "owned_by": "novaberg", "name": c.name}
        for c in await ing.store_ops.charaktere.list_all()]}


def _kontoname(body: ChatCompletionRequest, turn_id: str) -> str | None:
    """The name of the account Open WebUI sends as `user` (a pipeline's model), when the message
    names none. It is the client's, not the person's own word for the message: one that breaks the
    name rules is left out (fallback `kontoname_unbrauchbar`), the turn goes on without it."""
    if not isinstance(body.user, ClientUser) or not body.user.name:
        return None
    try:
        return person_name(body.user.name)
    except ValueError as e:
        log.warning("ingress: turn %s: fallback kontoname_unbrauchbar: the account name in `user` is not used "
                    "(%s); the message has no name", turn_id, e)
        return None


def _user_id(ing: IngressPort, body: ChatCompletionRequest, principal) -> str:
    """The user the request speaks for, owned by its key: a user key is its user (Open WebUI's
    account object, with its own ids, names nobody else then); an operator key names the user."""
    konto = isinstance(body.user, ClientUser) and principal["user_id"] is not None
    user_id = (None if konto else body.user_id()) or principal["user_id"]
    if user_id is None:
        raise error(422, "invalid_request", "user: an operator key must name the user")
    ing.owner(principal, user_id)
    return user_id


def _nachricht(ing: IngressPort, body: ChatCompletionRequest, x_turn_id: str | None) -> tuple[str, str, str | None]:
    """The human's message (the conversation's last user message): its text, its turn id (the
    client's X-Turn-Id, else a new one) and the name it is given."""
    last = next((m for m in reversed(body.messages) if m.role == "user"), None)
    if last is None:
        raise error(422, "invalid_request", "messages: no user message (the history lives server-side)")
    try:
        turn_id_frei(x_turn_id)
    except ValueError as e:
        raise error(422, "invalid_request", f"X-Turn-Id: {e}") from None
    text, turn_id = ing.validate_text(_text(last) or ""), x_turn_id or uuid.uuid4().hex
    try:  # the name a client gives the human's message (a persona's): his memories carry it
        name = person_name(last.name)
    except ValueError as e:
        raise error(422, "invalid_request", f"messages: the user message's name: {e}") from None
    return text, turn_id, name or _kontoname(body, turn_id)


def _kopfzeilen(body: ChatCompletionRequest, turn_id: str, art: str) -> dict[str, str]:
    """The response's headers: what the request set and the turn does not use, and how its
    history met the stored one."""
    ignored = body.ignored()
    headers = {IGNORED_HEADER: header_value(ignored)} if ignored else {}
    headers[HISTORY_HEADER] = art
    if ignored:
        log.info("ingress: turn %s over the OpenAI door; ignored: %s", turn_id, headers[IGNORED_HEADER])
    if art == "abweichung":
        log.info("ingress: turn %s over the OpenAI door: the client's history differs from the stored one; the "
                 "stored one stands (fallback verlauf_des_servers)", turn_id)
    return headers


def _usage(u) -> dict[str, int]:
    return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
            "total_tokens": u.prompt_tokens + u.completion_tokens}


def _completion(result: TurnResult, cid: str, created: int, character_id: str) -> dict:
    """The turn's result as one chat completion."""
    return {"id": cid, "object": "chat.completion", "created": created, "model": character_id,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": result.reply}}],
            "usage": _usage(result.usage), "novaberg": {"turn_id": result.turn_id, "replayed": result.replayed}}


async def _chunks(turn, cid: str, created: int, character_id: str, include_usage: bool):
    """The turn's events as chat completion chunks."""
    base = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": character_id}
    yield _sse({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                     "finish_reason": None}]})
    # only text that passed review: the draft events are left out (an OpenAI client has no
    # way to take back content it was sent), the kept reply comes as one `token` event
    async for ev in turn:
        if isinstance(ev, TokenEvent):
            yield _sse({**base, "choices": [{"index": 0, "delta": {"content": ev.text}, "finish_reason": None}]})
        elif isinstance(ev, FinalEvent):
            yield _sse({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            if include_usage:
                yield _sse({**base, "choices": [], "usage": _usage(ev.result.usage)})
        elif isinstance(ev, ErrorEvent):
            yield _sse({"error": turn_failed(ev.failure)})
    yield "data: [DONE]\n\n"


@router.post("/v1/chat/completions")
async def chat_completions(body: ChatCompletionRequest, response: Response, ing: TheIngress,
                           authorization: str | None = Header(None),
                           x_turn_id: str | None = Header(None, pattern=TURN_ID_PATTERN)):
    principal = await ing.principal(authorization)
    _begrenzt(ing, body.messages)
    user_id = _user_id(ing, body, principal)
    text, turn_id, name = _nachricht(ing, body, x_turn_id)
    character_id = body.model
    await ing.known_character(character_id)
    aufgabe = reconcile.client_aufgabe(text) if len(body.messages) == 1 else None
    if aufgabe is not None:  # the client's housekeeping (a title, tags, …): no turn, nothing stored
        return await _aufgabe(ing, body, character_id, aufgabe, turn_id)
    gespeichert = await _gespeichert(ing, user_id, character_id, x_turn_id) if x_turn_id else None
    art = "wiederholung" if gespeichert is not None else await _abgleich(ing, user_id, character_id, body.messages)
    cid = f"chatcmpl-{turn_id}"
    created = int(time.time())
    headers = _kopfzeilen(body, turn_id, art)
    result = gespeichert or (await _noch_einmal(ing, user_id, character_id, art, text, turn_id, name)
                             if art in ("regenerate", "edit") else None)
    if not body.stream:
        result = result or turn_result(await ing.run_turn(user_id, character_id, text, turn_id, name=name))
        response.headers.update(headers)
        return _completion(result, cid, created, character_id)

    include_usage = bool((body.stream_options or {}).get("include_usage"))
    if result is not None:  # answered already: the kept reply as the stream's one piece of text
        turn = _beantwortet(result)
    else:
        turn = await ing.run_stream(user_id, character_id, text, turn_id, name=name)  # 429 here, before the answer starts
    return StreamingResponse(_chunks(turn, cid, created, character_id, include_usage), media_type="text/event-stream",
                             headers=headers)

async def _beantwortet(result: TurnResult):
    yield TokenEvent(text=result.reply, draft_kept=False)
    yield FinalEvent(result=result)
