"""A pair's files: upload (read, indexed once), list, remove."""

import asyncio
import logging

from fastapi import APIRouter, Header, Path, Query, Request
from fastapi.responses import Response

from pipeline.node_config import budget
from prompts import PromptLibrary
from serve import dateien, erschliessung
from serve.routes.common import TheIngress, error, upload
from serve.schemas import ID_PATTERN, DateiListe, DateiUploadResponse

log = logging.getLogger("novaberg.ingress")

router = APIRouter()


def _werkzeuge(ing) -> erschliessung.Werkzeuge:
    """Indexing's calls through the replica's handles."""
    s = ing.settings
    return erschliessung.Werkzeuge(
        chat=ing.llm.chat.remote, model_name=ing.llm.model_name.remote, embed=ing.embedder.embed.remote,
        store=ing.store_ops, prompts=PromptLibrary(), deadline_s=s.file_index_deadline_s,
        max_tokens=budget("erschliessung", s))


@router.post("/v1/pairs/{user_id}/{character_id}/files", status_code=201, response_model=DateiUploadResponse)
async def upload_file(request: Request, response: Response, ing: TheIngress, user_id: str = Path(pattern=ID_PATTERN),
                      character_id: str = Path(pattern=ID_PATTERN), name: str | None = Query(None, max_length=1000),
                      authorization: str | None = Header(None)):
    """A file (plain text, Markdown or PDF), as the raw body or as the file of a multipart form,
    joins the pair's file index: read, its topic, summary and keywords written once, its chunks
    embedded. The same content again answers 200 with the stored file (`neu: false`) and indexes
    nothing. A form's file name and type stand in for `name` and Content-Type."""
    principal = await ing.principal(authorization)
    ing.owner(principal, user_id)
    await ing.known_character(character_id)
    up = await upload(request, "file")  # its size is bounded by the BodyLimit middleware (the file limit)
    try:
        dok = await asyncio.to_thread(dateien.lesen, up.data, up.content_type, name or up.name,
                                      ing.settings.file_max_chars)
    except dateien.DateiFehler as e:
        raise error(e.status, e.typ, str(e))
    async with ing.admitted(user_id, character_id):
        out = await erschliessung.indizieren(_werkzeuge(ing), dok, user_id, character_id)
    if not out["neu"]:
        response.status_code = 200
    return out


@router.get("/v1/pairs/{user_id}/{character_id}/files", response_model=DateiListe)
async def list_files(ing: TheIngress, user_id: str = Path(pattern=ID_PATTERN),
                     character_id: str = Path(pattern=ID_PATTERN), authorization: str | None = Header(None)):
    """The pair's files, newest first."""
    principal = await ing.principal(authorization)
    ing.owner(principal, user_id)
    await ing.known_character(character_id)
    return {"user_id": user_id, "character_id": character_id,
            "dateien": await ing.store_ops.dateien.liste(user_id, character_id)}


@router.delete("/v1/pairs/{user_id}/{character_id}/files/{datei_id}", status_code=204)
async def delete_file(ing: TheIngress, user_id: str = Path(pattern=ID_PATTERN),
                      character_id: str = Path(pattern=ID_PATTERN), datei_id: int = Path(ge=1, le=2**63 - 1),
                      authorization: str | None = Header(None)):
    """Remove one of the pair's files with its chunks."""
    principal = await ing.principal(authorization)
    ing.owner(principal, user_id)
    await ing.known_character(character_id)
    if not await ing.store_ops.dateien.loeschen(user_id, character_id, datei_id):
        raise error(404, "not_found", f"no file {datei_id} for {user_id}/{character_id}; "
                                      f"GET /v1/pairs/{user_id}/{character_id}/files lists them")
    log.info("ingress: file %d of %s:%s removed", datei_id, user_id, character_id)
    return Response(status_code=204)
