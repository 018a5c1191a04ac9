"""A pair's files: upload (read, indexed once), list, remove."""

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

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
        max_tokens=budget("erschliessung", s), embed_concurrency=s.file_embed_concurrency)


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
    # admitted and within the quotas before a byte of the body is read
    async with ing.admitted(user_id, character_id):
        await _within_quota(ing, user_id, character_id, request)
        up = await upload(request, "file")  # its size is bounded by the BodyLimit middleware (the file limit)
        dok = await _read(ing, up, name)
        out = await erschliessung.indizieren(_werkzeuge(ing), dok, user_id, character_id)
    if not out["neu"]:
        response.status_code = 200
    return out


async def _within_quota(ing, user_id: str, character_id: str, request: Request) -> None:
    """413 (`quota`) when the pair holds as many files as it may, or the user's files and this
    one's declared length would pass the user's bytes."""
    s, held = ing.settings, await ing.store_ops.dateien.umfang(user_id, character_id)
    declared = request.headers.get("content-length", "")
    coming = int(declared) if declared.isdigit() else 0
    if held["dateien_paar"] >= s.files_per_pair:
        raise error(413, "quota", f"{user_id}/{character_id} holds {held['dateien_paar']} files, as many as a pair "
                                  f"may ({s.files_per_pair}); remove one first")
    if held["bytes_user"] + coming > s.file_bytes_per_user:
        raise error(413, "quota", f"{user_id}'s files hold {held['bytes_user']} bytes; with this one's {coming} more "
                                  f"than a user may ({s.file_bytes_per_user}); remove files first")


_READERS: dict[int, ThreadPoolExecutor] = {}
"""The replica's reader threads, by their number (one pool per setting)."""


async def _read(ing, up, name: str | None) -> dateien.Dokument:
    """The file read in the replica's bounded pool of readers, within the time limit (waiting for a
    reader counts); a file that cannot be read, or not in time, answers 422, an oversized text 413.
    A reader past its time keeps its thread until it ends: the pool's size bounds how many do."""
    s = ing.settings
    pool = _READERS.get(s.file_read_workers) or _READERS.setdefault(
        s.file_read_workers, ThreadPoolExecutor(s.file_read_workers, "datei-lesen"))
    work = asyncio.get_running_loop().run_in_executor(
        pool, dateien.lesen, up.data, up.content_type, name or up.name, s.file_max_chars)
    try:
        return await asyncio.wait_for(work, s.file_read_timeout_s)
    except TimeoutError:
        log.warning("ingress: reading %s took longer than %.0f s; refused (fallback lesen_zeitlimit)",
                    name or up.name or "an upload", s.file_read_timeout_s)
        raise error(422, "unreadable_file", f"the file could not be read within {s.file_read_timeout_s:.0f} s")
    except dateien.DateiFehler as e:
        raise error(e.status, e.typ, str(e))


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
