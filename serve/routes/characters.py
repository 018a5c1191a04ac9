"""The characters: list, create, import from a Character Card, get, change, remove, export."""

import logging

from fastapi import APIRouter, Header, Path, Query, Request
from fastapi.responses import Response

from serve import charakterkarte
from serve.routes import files
from serve.routes.common import TheIngress, error, unknown_character, upload
from serve.schemas import ID_PATTERN, Character, CharacterCreate, CharacterImportResponse, CharacterPatch

log = logging.getLogger("novaberg.ingress")

router = APIRouter()


@router.get("/v1/characters")
async def list_characters(ing: TheIngress, authorization: str | None = Header(None)):
    """Every character (any key may list them)."""
    await ing.principal(authorization)
    return {"characters": [c.model_dump(mode="json") for c in await ing.store_ops.charaktere.list_all()]}


@router.post("/v1/characters", status_code=201, response_model=Character)
async def create_character(body: CharacterCreate, ing: TheIngress, authorization: str | None = Header(None)):
    await ing.operator(authorization)
    fields = body.model_dump(exclude={"character_id"}, exclude_none=True)
    ch = await ing.store.create_character.remote(body.character_id, fields, [])
    if ch is None:
        raise error(409, "conflict", f"character {body.character_id!r} exists; "
                                     f"PATCH /v1/characters/{body.character_id} changes it")
    ing.remember_character(body.character_id)
    log.info("ingress: character %s (%s) created", body.character_id, body.name)
    return ch.model_dump(mode="json")


@router.post("/v1/characters/import", status_code=201, response_model=CharacterImportResponse)
async def import_character(request: Request, ing: TheIngress,
                           character_id: str | None = Query(None, pattern=ID_PATTERN),
                           replace: bool = Query(False), authorization: str | None = Header(None)):
    """A Character Card (V1/V2/V3, JSON or PNG), as the raw body or as the file of a multipart
    form, becomes a character; its lorebook becomes her background knowledge. The answer says
    what went where and what was kept without a place."""
    await ing.operator(authorization)
    data = (await upload(request, "card")).data  # its size is bounded by the BodyLimit middleware
    if not data:
        raise error(422, "invalid_card", "empty card: send it as JSON or PNG")
    try:
        card = await files.parse(ing, charakterkarte.lesen, data, charakterkarte.KartenGrenzen.aus(ing.settings),
                                 what="the card")  # a killable parser process, with this replica's bounds
        cid = character_id or charakterkarte.character_id_aus(card.felder["name"])
    except charakterkarte.KarteFehler as e:
        raise error(422, "invalid_card", str(e))
    ch = await ing.store.create_character.remote(cid, {**card.felder, "karte_rest": card.karte_rest},
                                                 [w.model_dump() for w in card.wissen], replace)
    if ch is None:
        raise error(409, "conflict", f"character {cid!r} exists; pass replace=true to overwrite it, "
                                     "or character_id=... for another id")
    ing.remember_character(cid)
    log.info("ingress: character %s imported from a %s card (%s): %d knowledge entries; kept without a place: %s",
             cid, card.quelle, card.format, len(card.wissen), card.nicht_uebernommen or "nothing")
    return {"character": ch.model_dump(mode="json"), "format": card.format, "quelle": card.quelle,
            "abbildung": card.abbildung,
            "nicht_uebernommen": card.nicht_uebernommen, "wissen_eintraege": len(card.wissen)}


@router.get("/v1/characters/{character_id}", response_model=Character)
async def get_character(ing: TheIngress, character_id: str = Path(pattern=ID_PATTERN),
                        authorization: str | None = Header(None)):
    await ing.principal(authorization)
    return (await ing.character_or_404(character_id)).model_dump(mode="json")


@router.patch("/v1/characters/{character_id}", response_model=Character)
async def patch_character(body: CharacterPatch, ing: TheIngress, character_id: str = Path(pattern=ID_PATTERN),
                          authorization: str | None = Header(None)):
    await ing.operator(authorization)
    fields = body.model_dump(exclude_none=True)
    if not fields:
        raise error(422, "invalid_request", "no field to change")
    ch = await ing.store_ops.charaktere.update(character_id, fields)
    if ch is None:
        raise unknown_character(character_id)
    return ch.model_dump(mode="json")


@router.delete("/v1/characters/{character_id}", status_code=204)
async def delete_character(ing: TheIngress, character_id: str = Path(pattern=ID_PATTERN),
                           authorization: str | None = Header(None)):
    """Remove a character, her background knowledge and every pair with her — each user's
    conversation with her and what it left in memory (`Ingress.erase`): a character made again
    under the same id starts with nobody's history."""
    await ing.operator(authorization)
    ing.forget_character(character_id)
    if not await ing.store_ops.charaktere.exists(character_id):
        raise unknown_character(character_id)
    await ing.erase(character_id=character_id)
    if not await ing.store_ops.charaktere.delete(character_id):
        raise unknown_character(character_id)
    log.info("ingress: character %s removed with her pairs", character_id)
    return Response(status_code=204)


@router.get("/v1/characters/{character_id}/export")
async def export_character(ing: TheIngress, character_id: str = Path(pattern=ID_PATTERN),
                           authorization: str | None = Header(None)):
    """The character as a Character Card V2 (JSON)."""
    await ing.principal(authorization)
    ch = await ing.character_or_404(character_id)
    wissen = await ing.store_ops.charaktere.wissen(character_id)
    return charakterkarte.exportieren(ch.model_dump(mode="json"), wissen)
