"""An upload's bounds before and while it is read: the pair's and the user's quotas answer 413
(`quota`) before a byte of the body is read, and the bytes that arrive are counted against the
user's; reading runs in a bounded pool of parser processes within a time limit, and a parse that
takes longer answers 422 (fallback parser_zeitlimit) with its process killed."""
import asyncio
import codecs
import logging
import time
from types import SimpleNamespace

import pytest
from fastapi import HTTPException

from core.bestand import DateienUmfang
from core.settings import Settings
from serve import body_limit, parse_worker
from serve.routes import files
from serve.routes.common import Upload


def _ing(held: dict, **settings):
    async def umfang(user_id, character_id):
        return DateienUmfang(**held)

    return SimpleNamespace(settings=Settings(**settings), store_ops=SimpleNamespace(dateien=SimpleNamespace(umfang=umfang)))


def _request(length: int | None, limit: int = 10 * 1024 * 1024):
    return SimpleNamespace(headers={} if length is None else {"content-length": str(length)},
                           scope={body_limit.SCOPE_KEY: body_limit.Grenze(limit)})


def test_quotas_of_the_pair_and_the_user():
    ok = _ing({"dateien_paar": 1, "bytes_user": 1000}, files_per_pair=2, file_bytes_per_user=5000)
    asyncio.run(files._within_quota(ok, "alice", "nova", _request(4000)))
    full = _ing({"dateien_paar": 2, "bytes_user": 0}, files_per_pair=2)
    with pytest.raises(HTTPException) as e:
        asyncio.run(files._within_quota(full, "alice", "nova", _request(10)))
    assert e.value.status_code == 413 and e.value.detail["type"] == "quota" and "2 files" in e.value.detail["message"]
    with pytest.raises(HTTPException) as e:
        asyncio.run(files._within_quota(ok, "alice", "nova", _request(4001)))
    assert e.value.status_code == 413 and "remove files first" in e.value.detail["message"]


def test_the_bytes_that_arrive_count_against_the_users_quota():
    """A chunked body declares no length: the request's body limit is tightened to what the user
    may still add, and a body past it is cut with 413 `quota`."""
    ing = _ing({"dateien_paar": 1, "bytes_user": 1000}, files_per_pair=2, file_bytes_per_user=5000)
    request = _request(None)
    assert asyncio.run(files._within_quota(ing, "alice", "nova", request)) == 4000
    g = request.scope[body_limit.SCOPE_KEY]
    g.zaehlen(4000)
    with pytest.raises(HTTPException) as e:
        g.zaehlen(1)
    assert e.value.status_code == 413 and e.value.detail["type"] == "quota"
    assert "4000 bytes left" in e.value.detail["message"]


def test_parsing_past_its_time_is_refused_and_named(caplog, monkeypatch):
    slow = ("a" * 400_000 + "-" + "b" * 400_000).encode()  # Python's punycode decoder: minutes
    ing = _ing({}, file_read_timeout_s=0.5, file_read_workers=1)
    # a parser that hangs on its bytes, and one that answers at once: the replica's pool runs them
    pool = parse_worker.ParsePool(1, ing.settings.file_read_wait_s, jobs={"dekodieren": codecs.decode, "laenge": len})
    monkeypatch.setattr(files, "parsers", lambda ing: pool)
    started = time.monotonic()
    try:
        with caplog.at_level(logging.WARNING, logger="novaberg.parse_worker"), pytest.raises(HTTPException) as e:
            asyncio.run(files.parse(ing, codecs.decode, slow, "punycode", what="the file a.txt"))
        assert e.value.status_code == 422 and "within 0.5 s" in e.value.detail["message"]
        assert "parser_zeitlimit" in caplog.text and time.monotonic() - started < 20
        # the slot is free at once
        assert asyncio.run(files.parse(ing, len, b"abc", what="x")) == 3
    finally:
        pool.schliessen()


def test_a_file_that_cannot_be_read_says_why():
    ing = _ing({})
    with pytest.raises(HTTPException) as e:
        asyncio.run(files._read(ing, Upload(b"\x00\x01", "a.txt", "text/plain"), None))
    assert e.value.status_code == 422 and "NUL" in e.value.detail["message"]
