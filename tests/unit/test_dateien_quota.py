"""The user's file quota counts the bytes that arrive (serve/body_limit.py, serve/routes/files.py):
a chunked upload declares no length and one may declare a false one; either is cut with 413
`quota` once it passes what the user may still add. Through the real middleware and the app's
error handler, with the route's own quota check and upload reading."""
from types import SimpleNamespace

from fastapi import FastAPI, HTTPException, Request
from fastapi.testclient import TestClient

from core.bestand import DateienUmfang
from core.settings import Settings
from serve.body_limit import BodyLimit
from serve.routes import files
from serve.routes.common import upload


def _app(held_bytes: int, quota: int, file_limit: int = 1_000_000):
    from serve.ingress import _http_error

    async def umfang(user_id, character_id):
        return DateienUmfang(dateien_paar=0, bytes_user=held_bytes)

    ing = SimpleNamespace(settings=Settings(file_bytes_per_user=quota),
                          store_ops=SimpleNamespace(dateien=SimpleNamespace(umfang=umfang)))
    app = FastAPI()
    app.add_exception_handler(HTTPException, _http_error)

    @app.post("/files")
    async def route(request: Request):
        left = await files._within_quota(ing, "alice", "nova", request)
        up = await upload(request, "file")
        return {"bytes": len(up.data), "left": left}

    return BodyLimit(app, lambda path: file_limit)


def _chunks(n: int, size: int = 1000):
    for _ in range(n):
        yield b"x" * size


def test_a_chunked_upload_past_the_users_quota_is_cut_with_413():
    with TestClient(_app(held_bytes=5000, quota=10_000)) as client:
        r = client.post("/files", content=_chunks(6), headers={"content-type": "text/plain"})
        assert r.status_code == 413, r.text
        assert r.json()["error"]["type"] == "quota" and "5000 bytes left" in r.json()["error"]["message"]
        ok = client.post("/files", content=_chunks(5), headers={"content-type": "text/plain"})
        assert ok.status_code == 200 and ok.json() == {"bytes": 5000, "left": 5000}


def test_a_body_longer_than_its_content_length_is_counted_as_it_is():
    with TestClient(_app(held_bytes=5000, quota=10_000)) as client:
        r = client.post("/files", content=b"x" * 6000, headers={"content-type": "text/plain", "content-length": "10"})
        assert r.status_code == 413 and r.json()["error"]["type"] == "quota"


def test_the_file_limit_still_answers_too_large_when_it_is_the_tighter():
    with TestClient(_app(held_bytes=0, quota=10_000_000, file_limit=3000)) as client:
        r = client.post("/files", content=_chunks(4), headers={"content-type": "text/plain"})
        assert r.status_code == 413 and r.json()["error"]["type"] == "too_large"
