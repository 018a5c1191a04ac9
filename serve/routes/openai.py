"""The OpenAI-compatible door: the characters are the models (`GET /v1/models`); a chat
completion's history lives server-side (only the last user message is read); what a request sets
and the turn does not use is named in the `X-Novaberg-Ignored` header."""

import json
import logging
import time
import uuid

from fastapi import APIRouter, Header, Response
from fastapi.responses import StreamingResponse

from core.wire import ErrorEvent, FinalEvent, TokenEvent
from serve.routes.common import TheIngress, error, turn_failed, turn_result
from serve.schemas import TURN_ID_PATTERN, ChatCompletionRequest

log = logging.getLogger("novaberg.ingress")

router = APIRouter()

IGNORED_HEADER = "X-Novaberg-Ignored"


@router.get("/v1/models")
async def list_models(ing: TheIngress, authorization: str | None = Header(None)):
    """The characters, as an OpenAI client lists models: the id is what `model` names."""
    await ing.principal(authorization)
    return {"object": "list", "data": [
        {"id": c["character_id"], "object": "model", "created": c["created"], "owned_by": "novaberg", "name": c["name"]}
        for c in await ing.store_ops.charaktere.list_all()]}


@router.post("/v1/chat/completions")
async def chat_completions(body: ChatCompletionRequest, response: Response, ing: TheIngress,
                           authorization: str | None = Header(None),
                           x_turn_id: str | None = Header(None, pattern=TURN_ID_PATTERN)):
    principal = await ing.principal(authorization)
    user_id = body.user or principal["user_id"]
    if user_id is None:
        raise error(422, "invalid_request", "user: an operator key must name the user")
    ing.owner(principal, user_id)
    last = next((m for m in reversed(body.messages) if m.role == "user"), None)
    if last is None:
        raise error(422, "invalid_request", "messages: no user message (the history lives server-side)")
    text = last.content if isinstance(last.content, str) else "".join(p.text for p in (last.content or []))
    text, turn_id = ing.validate_text(text or ""), x_turn_id or uuid.uuid4().hex
    character_id = body.model
    await ing.known_character(character_id)
    cid = f"chatcmpl-{turn_id}"
    created = int(time.time())
    ignored = body.ignored()
    headers = {IGNORED_HEADER: ", ".join(ignored)} if ignored else {}
    if ignored:
        log.info("ingress: turn %s over the OpenAI door; ignored: %s", turn_id, ", ".join(ignored))
    if not body.stream:
        result = turn_result(await ing.run_turn(user_id, character_id, text, turn_id))
        response.headers.update(headers)
        u = result.usage
        return {"id": cid, "object": "chat.completion", "created": created, "model": character_id,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": result.reply}}],
                "usage": {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                          "total_tokens": u.prompt_tokens + u.completion_tokens},
                "novaberg": {"turn_id": result.turn_id, "replayed": result.replayed}}

    include_usage = bool((body.stream_options or {}).get("include_usage"))
    turn = await ing.run_stream(user_id, character_id, text, turn_id)  # 429 here, before the answer starts

    def sse(obj: dict) -> str:
        return f"data: {json.dumps(obj)}\n\n"

    async def chunks():
        base = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": character_id}
        yield sse({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                        "finish_reason": None}]})
        # only text that passed review: the draft events are left out (an OpenAI client has no
        # way to take back content it was sent), the kept reply comes as one `token` event
        async for ev in turn:
            if isinstance(ev, TokenEvent):
                yield sse({**base, "choices": [{"index": 0, "delta": {"content": ev.text}, "finish_reason": None}]})
            elif isinstance(ev, FinalEvent):
                yield sse({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                if include_usage:
                    u = ev.result.usage
                    yield sse({**base, "choices": [], "usage": {
                        "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                        "total_tokens": u.prompt_tokens + u.completion_tokens}})
            elif isinstance(ev, ErrorEvent):
                yield sse({"error": turn_failed(ev.failure)})
        yield "data: [DONE]\n\n"

    return StreamingResponse(chunks(), media_type="text/event-stream", headers=headers)
