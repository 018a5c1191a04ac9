"""The operators' routes: API keys, the dashboard (page and figures), one pair's last turns, the
system's status."""

import logging

from fastapi import APIRouter, Header, Path, Query
from fastapi.responses import HTMLResponse

from memory import erasure, outbox
from serve import dashboard
from serve.routes.common import TheIngress, error
from serve.schemas import ID_PATTERN, KeyCreateRequest, KeyCreateResponse, KeyRevokeRequest

log = logging.getLogger("novaberg.ingress")

router = APIRouter()


@router.post("/v1/operator/keys", response_model=KeyCreateResponse)
async def create_key(body: KeyCreateRequest, ing: TheIngress, authorization: str | None = Header(None)):
    """A user's key, or with `operator` an operator's; `expires_in_days` bounds its life."""
    await ing.operator(authorization)
    if body.operator == (body.user_id is not None):
        raise error(422, "invalid_request", "a user's key names user_id; an operator key (operator: true) none")
    key = await ing.store.create_api_key.remote(body.user_id, body.operator, body.label, body.expires_in_days)
    if body.user_id is not None and await erasure.aufheben(await ing.redis_client(), body.user_id):
        log.info("ingress: user %s made again by a new key: the erasure mark is lifted", body.user_id)
    log.info("ingress: %s key created (%s)", "an operator" if body.operator else f"user {body.user_id}'s",
             f"expires in {body.expires_in_days} days" if body.expires_in_days else "does not expire")
    return {"user_id": body.user_id, "api_key": key, "operator": body.operator,
            "expires_in_days": body.expires_in_days}


@router.get("/v1/operator/keys")
async def list_keys(ing: TheIngress, authorization: str | None = Header(None)):
    """Every key without its secret: id, user, operator or not, label, created, expires, revoked."""
    await ing.operator(authorization)
    return {"keys": [k.model_dump(mode="json") for k in await ing.store_ops.pg.list_api_keys()]}


@router.post("/v1/operator/keys/revoke")
async def revoke_keys(body: KeyRevokeRequest, ing: TheIngress, authorization: str | None = Header(None)):
    """Revoke one key (by itself or its id), or every key of a user. This replica forgets them at
    once; every other replica at its next request (the revocation counter, `key_revocation_check_ms`)."""
    await ing.operator(authorization)
    if sum(x is not None for x in (body.api_key, body.key_id, body.user_id)) != 1:
        raise error(422, "invalid_request", "exactly one of api_key / key_id / user_id must be set")
    n = await ing.store_ops.pg.revoke_api_keys(body.api_key, body.user_id, body.key_id)
    if not n:
        raise error(404, "not_found", "no such active key")
    # the replica knows keys by their text, not by id: one revoked by its id empties the cache
    await ing.revoke(api_key=body.api_key, user_id=body.user_id, alle=body.key_id is not None)
    log.info("ingress: %d API key(s) revoked (%s)", n, "one key" if body.api_key or body.key_id else
             f"user {body.user_id}")
    return {"revoked": n}


@router.get("/v1/operator/outbox/dead")
async def list_dead_letters(ing: TheIngress, limit: int = Query(100, ge=1, le=1000),
                            authorization: str | None = Header(None)):
    """The background jobs given up after failures of their own, oldest first, with the reason."""
    await ing.operator(authorization)
    return {"dead_letters": await outbox.dead_letters(await ing.redis_client(), limit)}


@router.post("/v1/operator/outbox/dead/{dead_id}/replay")
async def replay_dead_letter(ing: TheIngress, dead_id: str = Path(pattern=r"^[0-9]{1,20}-[0-9]{1,20}$"),
                             authorization: str | None = Header(None)):
    """Queue a dead letter again, exactly once: a second replay of the same id answers 404."""
    await ing.operator(authorization)
    job = await outbox.replay(await ing.redis_client(), dead_id)
    if job is None:
        raise error(404, "not_found", f"no dead letter {dead_id}; GET /v1/operator/outbox/dead lists them")
    log.info("ingress: dead letter %s queued again as job %s", dead_id, job)
    return {"replayed": dead_id, "job": job}


@router.get("/dashboard", response_class=HTMLResponse, include_in_schema=False)
async def dashboard_page(ing: TheIngress):
    """The operators' page. It carries no data: it reads the JSON endpoints with the operator
    key from its URL fragment (never sent to the server): /dashboard#key=..."""
    ing.dashboard_loop.ensure()
    return HTMLResponse(dashboard.page())


@router.get("/v1/operator/dashboard")
async def dashboard_json(ing: TheIngress, window_s: float = Query(default=900.0, gt=0, le=7 * 24 * 3600),
                         authorization: str | None = Header(None)):
    """The dashboard's figures over the last `window_s` seconds."""
    await ing.operator(authorization)
    loop = ing.dashboard_loop
    loop.ensure()
    if not loop.sampler.samples:
        await loop.sampler.sample()
    return await dashboard.snapshot(ing.store_ops, await ing.redis_client(), loop.sampler, window_s)


@router.get("/v1/operator/pairs/{user_id}/{character_id}/turns")
async def dashboard_pair(ing: TheIngress, user_id: str = Path(pattern=ID_PATTERN),
                         character_id: str = Path(pattern=ID_PATTERN), limit: int = Query(default=10, ge=1, le=100),
                         authorization: str | None = Header(None)):
    """One pair's last turns with each node's duration and decisions."""
    await ing.operator(authorization)
    turns = await ing.store_ops.dashboard.pair_turns(user_id, character_id, limit)
    return {"user_id": user_id, "character_id": character_id, "turns": [t.model_dump(mode="json") for t in turns]}


@router.get("/v1/operator/status")
async def operator_status(ing: TheIngress, authorization: str | None = Header(None)):
    await ing.operator(authorization)
    from actors.activation import reserve_stand
    from memory import outbox

    r = await ing.redis_client()
    live = await r.hlen("pairs:live")
    return {"live_pairs": live, "registry": await reserve_stand(r), "outbox": await outbox.backlog(r),
            "llm": await ing.llm.load.remote(), "embedder": await ing.embedder.load.remote()}
