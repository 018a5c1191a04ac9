"""A user's data: what Nova remembers of a pair (and forgetting one item); export it all, erase it
everywhere."""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone

from fastapi import APIRouter, Body, Header, Path, Query
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from core.bestand import ErinnerungsEintrag, ErinnerungQuelle
from memory import erasure, erinnerungen, kzg
from serve import schwere_ops
from serve.ports import IngressPort
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
    items = sorted(items, key=lambda i: i.seit or "", reverse=True)[:limit]
    return {"user_id": user_id, "character_id": character_id, "memories": [i.model_dump(mode="json") for i in items]}


@router.delete("/v1/pairs/{user_id}/{character_id}/memories/{memory_id}")
async def forget(ing: TheIngress, user_id: str = Path(pattern=ID_PATTERN), character_id: str = Path(pattern=ID_PATTERN),
                 memory_id: str = Path(pattern=MEMORY_ID), authorization: str | None = Header(None)):
    """Forget one item: it goes with what hangs on it (a memory's associations), what was derived
    from it (the summary's and the profile's sentences that repeat it, the library entries and
    pending research of its turn), and no later rewind brings it back. A turn operation: admitted
    per user (`max_turn_ops_in_flight_per_user`, `turn_ops_per_minute_per_user`; beyond: 429)."""
    principal = await ing.principal(authorization)
    ing.owner(principal, user_id)
    await ing.known_character(character_id)
    async with schwere_ops.zugelassen(ing, user_id, "turn"):
        vergessen, kurzzeit, quelle = await _vergessen(ing, user_id, character_id, memory_id)
        abgeleitet = await _nachvergessen(ing, user_id, character_id, [quelle] if vergessen else [])
    if not vergessen:
        raise error(404, "unknown_memory", f"no memory {memory_id!r} of this pair; GET …/memories lists them")
    return {"user_id": user_id, "character_id": character_id, "vergessen": memory_id, "kurzzeit": kurzzeit,
            "abgeleitet": abgeleitet}


class VergessenAnfrage(BaseModel):
    """`POST …/memories/forget`: what to forget everything about, and (after the preview) which of
    its items."""

    q: str = Field(min_length=1, max_length=200)
    confirm: list[str] | None = Field(None, max_length=10_000)


@router.post("/v1/pairs/{user_id}/{character_id}/memories/forget")
async def forget_all(ing: TheIngress, anfrage: VergessenAnfrage = Body(...),
                     user_id: str = Path(pattern=ID_PATTERN), character_id: str = Path(pattern=ID_PATTERN),
                     authorization: str | None = Header(None)):
    """Forget everything about `q`: without `confirm`, the items whose text holds it (a preview,
    nothing forgotten); with `confirm` (ids of the preview), exactly those of them that still
    match, each as `DELETE …/memories/{id}` forgets it, and every derived sentence that holds
    `q`'s own distinctive words, as one turn operation (admitted so)."""
    principal = await ing.principal(authorization)
    ing.owner(principal, user_id)
    await ing.known_character(character_id)
    items = await _treffer(ing, user_id, character_id, anfrage.q)
    if anfrage.confirm is None:
        return {"user_id": user_id, "character_id": character_id, "q": anfrage.q,
                "vorschau": [i.model_dump(mode="json") for i in items], "confirm": [i.id for i in items]}
    bad = sorted({i for i in anfrage.confirm if not re.match(MEMORY_ID, i)})
    if bad or len(anfrage.confirm) > ing.settings.forget_max_items:
        raise error(422, "invalid_request", f"confirm holds at most {ing.settings.forget_max_items} memory ids"
                    + (f"; not memory ids: {bad[:5]}" if bad else ""))
    async with schwere_ops.zugelassen(ing, user_id, "turn"):
        return await _alle_vergessen(ing, user_id, character_id, anfrage, items)


async def _treffer(ing: IngressPort, user_id: str, character_id: str, q: str) -> list[ErinnerungsEintrag]:
    """The pair's items whose text holds `q` (long-term and short-term), newest first."""
    limit = ing.settings.forget_max_items
    items = await ing.store_ops.erinnerungen.auflisten(user_id, character_id, q, limit)
    r = await ing.redis_client()
    items += erinnerungen.kurzzeit(await kzg.eintraege(r, user_id, character_id), q)
    return sorted(items, key=lambda i: i.seit or "", reverse=True)[:limit]


async def _alle_vergessen(ing: IngressPort, user_id: str, character_id: str, anfrage: VergessenAnfrage,
                          items: list[ErinnerungsEintrag]) -> dict:
    treffer = {i.id: i for i in items}
    gewollt = list(dict.fromkeys(anfrage.confirm))
    # the short-term entries first: an exchange's entries go with its memories anyway
    reihe = sorted((i for i in gewollt if i in treffer), key=lambda i: not i.startswith("kzg-"))
    vergessen, kurzzeit, quellen = [], 0, []
    for memory_id in reihe:
        done, n, quelle = await _vergessen(ing, user_id, character_id, memory_id, treffer[memory_id].inhalt)
        kurzzeit += n
        if done:
            vergessen.append(memory_id)
            quellen.append(quelle)
    # what is derived about X goes with everything about X: a sentence that holds X's own words too
    abgeleitet = await _nachvergessen(ing, user_id, character_id,
                                      quellen + [ErinnerungQuelle(inhalt=anfrage.q, turn_id=None)] if vergessen else [])
    return {"user_id": user_id, "character_id": character_id, "q": anfrage.q, "vergessen": vergessen,
            "nicht_vergessen": [i for i in gewollt if i not in vergessen], "kurzzeit": kurzzeit,
            "abgeleitet": abgeleitet}


async def _vergessen(ing: IngressPort, user_id: str, character_id: str, memory_id: str,
                     inhalt: str | None = None) -> tuple[bool, int, ErinnerungQuelle | None]:
    """The item forgotten, and the short-term memory's entries of the exchange it came from with it
    (they hold the same words): whether the item was there, how many such entries went, and the
    item's text and turn ({inhalt, turn_id}: what was derived from it is found by them)."""
    r = await ing.redis_client()
    if memory_id.startswith("kzg-"):
        kzg_id = memory_id[len("kzg-"):]
        eintrag = next((e for e in await kzg.eintraege(r, user_id, character_id) if e.get("id") == kzg_id), None)
        n = await kzg.entfernen(r, user_id, character_id, [kzg_id])
        quelle = (ErinnerungQuelle(inhalt=eintrag.get("inhalt") or "", turn_id=eintrag.get("quelle"))
                  if eintrag else None)
        return n > 0, n, quelle
    quelle = await ing.store_ops.erinnerungen.beschreiben(user_id, character_id, memory_id)
    if not await ing.store_ops.erinnerungen.vergessen(user_id, character_id, memory_id):
        return False, 0, None
    if quelle is None:
        quelle = ErinnerungQuelle(inhalt=inhalt or "", turn_id=None)
    if not quelle.turn_id:
        return True, 0, quelle
    gleich = [e["id"] for e in await kzg.eintraege(r, user_id, character_id)
              if e.get("quelle") == quelle.turn_id or e.get("id") == f"turn-{quelle.turn_id}"]
    return True, await kzg.entfernen(r, user_id, character_id, gleich), quelle


async def _nachvergessen(ing: IngressPort, user_id: str, character_id: str,
                         quellen: list[ErinnerungQuelle | None]) -> dict[str, int]:
    """What was derived from the forgotten items, gone in Postgres and Redis (memory/erinnerungen.py
    `nachvergessen`, `redis_nachvergessen`): what went, by kind."""
    quellen = [q for q in quellen if q]
    if not quellen:
        return {}
    texte = [q.inhalt for q in quellen if q.inhalt]
    turn_ids = sorted({q.turn_id for q in quellen if q.turn_id})
    mindestens = ing.settings.forget_shared_words
    out = await ing.store_ops.erinnerungen.nachvergessen(user_id, character_id, texte, turn_ids, mindestens)
    r = await ing.redis_client()
    redis_out = await erinnerungen.redis_nachvergessen(r, user_id, character_id, texte, turn_ids, mindestens)
    return {**out.model_dump(), **redis_out}


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
