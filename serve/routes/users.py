"""A user's data: what Nova remembers of a pair (and forgetting one item); export it all, erase it
everywhere."""
from __future__ import annotations

import json
from datetime import datetime, timezone

from fastapi import APIRouter, Header, Path, Query
from fastapi.responses import StreamingResponse

from memory import erasure, erinnerungen, kzg
from serve import schwere_ops
from serve.routes.common import TheIngress, error
from serve.schemas import ID_PATTERN

MEMORY_ID = (r"^(knoten|ziel|termin|notiz)-\d{1,18}$|^profil-(mensch_kern|mensch_beziehung|mensch_themen)-[0-9a-f]{12}$"
             r"|^kzg-[A-Za-z0-9_\-]{1,80}$")

router = APIRouter()


@router.get("/v1/pairs/{user_id}/{character_id}/memories")
async def memories(ing: TheIngress, user_id: str = Path(pattern=ID_PATTERN), character_id: str = Path(pattern=ID_PATTERN),
                   q: str | None = Query(None, max_length=200), limit: int = Query(200, ge=1, le=1000),
                   authorization: str | None = Header(None)):
    """What Nova remembers about the person (long-term memories, goals, appointments, notes, the
    sentences of the person's profile, the short-term memory's entries), newest first, each with
    the turn and message it came from; `q` keeps those whose text holds it."""
    principal = await ing.principal(authorization)
    ing.owner(principal, user_id)
    await ing.known_character(character_id)
    items = await ing.store_ops.erinnerungen.auflisten(user_id, character_id, q, limit)
    r = await ing.redis_client()
    items += erinnerungen.kurzzeit(await kzg.eintraege(r, user_id, character_id), q)
    items = sorted(items, key=lambda i: i["seit"] or "", reverse=True)[:limit]
    return {"user_id": user_id, "character_id": character_id, "memories": items}


@router.delete("/v1/pairs/{user_id}/{character_id}/memories/{memory_id}")
async def forget(ing: TheIngress, user_id: str = Path(pattern=ID_PATTERN), character_id: str = Path(pattern=ID_PATTERN),
                 memory_id: str = Path(pattern=MEMORY_ID), authorization: str | None = Header(None)):
    """Forget one item: it goes with what hangs on it (a memory's associations), and no later
    rewind brings it back. A turn operation: admitted per user (`max_turn_ops_in_flight_per_user`,
    `turn_ops_per_minute_per_user`; beyond: 429)."""
    principal = await ing.principal(authorization)
    ing.owner(principal, user_id)
    await ing.known_character(character_id)
    async with schwere_ops.zugelassen(ing, user_id, "turn"):
        vergessen, kurzzeit = await _vergessen(ing, user_id, character_id, memory_id)
    if not vergessen:
        raise error(404, "unknown_memory", f"no memory {memory_id!r} of this pair; GET …/memories lists them")
    return {"user_id": user_id, "character_id": character_id, "vergessen": memory_id, "kurzzeit": kurzzeit}


async def _vergessen(ing, user_id: str, character_id: str, memory_id: str) -> tuple[bool, int]:
    """The item forgotten, and the short-term memory's entries of the exchange it came from with it
    (they hold the same words): whether the item was there, and how many such entries went."""
    r = await ing.redis_client()
    if memory_id.startswith("kzg-"):
        n = await kzg.entfernen(r, user_id, character_id, [memory_id[len("kzg-"):]])
        return n > 0, n
    quelle = await ing.store_ops.erinnerungen.herkunft(user_id, character_id, memory_id)
    if not await ing.store_ops.erinnerungen.vergessen(user_id, character_id, memory_id):
        return False, 0
    if quelle is None:
        return True, 0
    gleich = [e["id"] for e in await kzg.eintraege(r, user_id, character_id)
              if e.get("quelle") == quelle or e.get("id") == f"turn-{quelle}"]
    return True, await kzg.entfernen(r, user_id, character_id, gleich)


@router.get("/v1/users/{user_id}/export")
async def export_user(ing: TheIngress, user_id: str = Path(pattern=ID_PATTERN),
                      authorization: str | None = Header(None)):
    """Everything stored about the user, as one JSON document streamed table by table:
    `postgres` (each table's rows of the user, vectors and key hashes left out) and `redis` (each
    key of the user's with its value, and the background jobs still queued for them). The
    user's own key or an operator key. Admitted per user (`max_exports_in_flight_per_user`,
    `exports_per_minute_per_user`; beyond: 429 before the body begins); the place is held until
    the body has been sent."""
    principal = await ing.principal(authorization)
    ing.owner(principal, user_id)
    redis = await ing.redis_client()
    lease = await schwere_ops.zulassen(redis, ing.settings, user_id, "export")

    async def body():
        now = datetime.now(timezone.utc).isoformat()
        yield f'{{"user_id": {json.dumps(user_id)}, "exported_at": {json.dumps(now)}, "postgres": {{'
        for i, table in enumerate(erasure.EXPORT_TABLES):
            rows = await ing.store_ops.erasure.export_table(user_id, table)
            yield f'{"," if i else ""}\n{json.dumps(table)}: {json.dumps(rows, ensure_ascii=False, default=str)}'
        keys = await erasure.export_keys(redis, user_id, await ing.store_ops.erasure.bekannte_paare(user_id))
        yield f'}},\n"redis": {json.dumps(keys, ensure_ascii=False, default=str)}}}\n'

    return _Admitted(body(), lambda: schwere_ops.freigeben(redis, user_id, "export", lease),
                     media_type="application/json",
                     headers={"Content-Disposition": f'attachment; filename="novaberg-{user_id}.json"'})


class _Admitted(StreamingResponse):
    """A streamed answer that gives its operation's place back once sent (or broken off); one
    never sent holds it until the lease expires (`heavy_op_lease_s`)."""

    def __init__(self, content, freigeben, **kwargs):
        super().__init__(content, **kwargs)
        self._freigeben = freigeben

    async def __call__(self, scope, receive, send):
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._freigeben()


@router.delete("/v1/users/{user_id}")
async def erase_user(ing: TheIngress, user_id: str = Path(pattern=ID_PATTERN),
                     authorization: str | None = Header(None)):
    """Erase everything stored about the user, in every store: each pair's conversation, memories,
    profiles, goals, appointments, files, the queued background work, the notes, the API keys
    (the one that asked too). The user's pair actors stop first. The user's own key or an
    operator key; answers what went, by store (`erased: 0` when nothing was there). Admitted as
    an export is (one at a time per user; beyond: 429)."""
    principal = await ing.principal(authorization)
    ing.owner(principal, user_id)
    async with schwere_ops.zugelassen(ing, user_id, "export"):
        gone = await ing.erase(user_id=user_id)
    return {"user_id": user_id, "erased": sum(n for k, n in gone.items() if k != "actors"), "by_store": gone}
