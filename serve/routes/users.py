"""A user's data as a whole: export it, erase it everywhere."""
from __future__ import annotations

import json
from datetime import datetime, timezone

from fastapi import APIRouter, Header, Path
from fastapi.responses import StreamingResponse

from memory import erasure
from serve.routes.common import TheIngress
from serve.schemas import ID_PATTERN

router = APIRouter()


@router.get("/v1/users/{user_id}/export")
async def export_user(ing: TheIngress, user_id: str = Path(pattern=ID_PATTERN),
                      authorization: str | None = Header(None)):
    """Everything stored about the user, as one JSON document streamed table by table:
    `postgres` (each table's rows of the user, vectors and key hashes left out) and `redis` (each
    key of the user's with its value, and the background jobs still queued for them). The
    user's own key or an operator key."""
    principal = await ing.principal(authorization)
    ing.owner(principal, user_id)
    redis = await ing.redis_client()

    async def body():
        now = datetime.now(timezone.utc).isoformat()
        yield f'{{"user_id": {json.dumps(user_id)}, "exported_at": {json.dumps(now)}, "postgres": {{'
        for i, table in enumerate(erasure.EXPORT_TABLES):
            rows = await ing.store_ops.erasure.export_table(user_id, table)
            yield f'{"," if i else ""}\n{json.dumps(table)}: {json.dumps(rows, ensure_ascii=False, default=str)}'
        keys = await erasure.export_keys(redis, user_id)
        yield f'}},\n"redis": {json.dumps(keys, ensure_ascii=False, default=str)}}}\n'

    return StreamingResponse(body(), media_type="application/json", headers={
        "Content-Disposition": f'attachment; filename="novaberg-{user_id}.json"'})


@router.delete("/v1/users/{user_id}")
async def erase_user(ing: TheIngress, user_id: str = Path(pattern=ID_PATTERN),
                     authorization: str | None = Header(None)):
    """Erase everything stored about the user, in every store: each pair's conversation, memories,
    profiles, goals, appointments, files, the queued background work, the notes, the API keys
    (the one that asked too). The user's pair actors stop first. The user's own key or an
    operator key; answers what went, by store (`erased: 0` when nothing was there)."""
    principal = await ing.principal(authorization)
    ing.owner(principal, user_id)
    gone = await ing.erase(user_id=user_id)
    return {"user_id": user_id, "erased": sum(n for k, n in gone.items() if k != "actors"), "by_store": gone}
