"""A pair's files: upload (read, indexed once), list, remove."""

import logging

from fastapi import APIRouter, Header, HTTPException, Path, Query, Request
from fastapi.responses import Response

from pipeline.node_config import budget
from prompts import PromptLibrary
from serve import body_limit, dateien, erschliessung, parse_worker
from serve.ports import IngressPort
from serve.routes.common import TheIngress, error, upload
from serve.schemas import ID_PATTERN, DateiListe, DateiUploadResponse

log = logging.getLogger("novaberg.ingress")

router = APIRouter()


def _werkzeuge(ing: IngressPort) -> erschliessung.Werkzeuge:
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
        left = await _within_quota(ing, user_id, character_id, request)
        up = await upload(request, "file")  # its size is bounded by the BodyLimit middleware (file limit, quota)
        if len(up.data) > left:  # counted while it arrived; this holds where no middleware counts
            raise error(413, "quota", f"{user_id}'s files may hold {left} bytes more; this one has {len(up.data)}")
        dok = await _read(ing, up, name)
        out = await erschliessung.indizieren(_werkzeuge(ing), dok, user_id, character_id)
    if not out["neu"]:
        response.status_code = 200
    return {"datei": out["datei"].model_dump(mode="json"), "neu": out["neu"]}


async def _within_quota(ing: IngressPort, user_id: str, character_id: str, request: Request) -> int:
    """413 (`quota`) when the pair holds as many files as it may, or the user's files and this
    one's declared length would pass the user's bytes; the body is then cut where the bytes that
    actually arrive would pass them (a chunked body declares no length, a false one lies).
    Returns the bytes the user may still add."""
    s, held = ing.settings, await ing.store_ops.dateien.umfang(user_id, character_id)
    declared = request.headers.get("content-length", "")
    coming = int(declared) if declared.isdigit() else 0
    if held.dateien_paar >= s.files_per_pair:
        raise error(413, "quota", f"{user_id}/{character_id} holds {held.dateien_paar} files, as many as a pair "
                                  f"may ({s.files_per_pair}); remove one first")
    if held.bytes_user + coming > s.file_bytes_per_user:
        raise error(413, "quota", f"{user_id}'s files hold {held.bytes_user} bytes; with this one's {coming} more "
                                  f"than a user may ({s.file_bytes_per_user}); remove files first")
    left = s.file_bytes_per_user - held.bytes_user
    g = body_limit.grenze(request.scope)
    if g is not None:
        g.enger(left, "quota", f"{user_id}'s files hold {held.bytes_user} bytes; this one passed the "
                               f"{left} bytes left of what a user may hold ({s.file_bytes_per_user}); "
                               "remove files first")
    return left


def parsers(ing: IngressPort) -> parse_worker.ParsePool:
    """The replica's parser processes (one pool per setting), shared by file uploads and card imports."""
    s = ing.settings
    return parse_worker.pool(s.file_read_workers, s.file_read_wait_s)


async def parse(ing: IngressPort, fn, *args, what: str):
    """`fn(*args)` in one of the replica's parser processes within the time limit: its result, or
    what it raised. Past the limit its process is killed (the slot free at once): 422; a parser
    that failed otherwise: 422; every parser busy past the wait: 503 with Retry-After."""
    s = ing.settings
    try:
        return await parsers(ing).run(fn, *args, timeout_s=s.file_read_timeout_s)
    except parse_worker.ParseTimeout:
        raise error(422, "unreadable_file", f"{what} could not be read within {s.file_read_timeout_s:g} s")
    except parse_worker.ParseFailed as e:
        raise error(422, "unreadable_file", f"{what} could not be read: {e}")
    except parse_worker.ParserBusy as e:
        raise HTTPException(503, headers={"Retry-After": str(_RETRY_AFTER_S)},
                            detail={"type": "busy", "message": f"{e}; try again in {_RETRY_AFTER_S} s"})


_RETRY_AFTER_S = 5


async def _read(ing: IngressPort, up, name: str | None) -> dateien.Dokument:
    """The file read in a parser process: a file that cannot be read, or not in time, answers 422,
    an oversized text or PDF 413."""
    s = ing.settings
    grenzen = dateien.PdfGrenzen(seiten=s.file_pdf_max_pages, inhalt_bytes=s.file_pdf_max_content_bytes,
                                 operatoren=s.file_pdf_max_operators)
    try:
        return await parse(ing, dateien.lesen, up.data, up.content_type, name or up.name, s.file_max_chars, grenzen,
                           what=f"the file {name or up.name or ''}".rstrip())
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
            "dateien": [d.model_dump(mode="json") for d in await ing.store_ops.dateien.liste(user_id, character_id)]}


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
