"""An upload's bounds before and while it is read: the pair's and the user's quotas answer 413
(`quota`) before a byte of the body is read; reading runs in a bounded pool within a time limit,
and a file that takes longer answers 422 (fallback lesen_zeitlimit)."""
import asyncio
import logging
import time
from types import SimpleNamespace

import pytest
from fastapi import HTTPException

from core.settings import Settings
from serve import dateien
from serve.routes import files
from serve.routes.common import Upload


def _ing(held: dict, **settings):
    async def umfang(user_id, character_id):
        return held

    return SimpleNamespace(settings=Settings(**settings), store_ops=SimpleNamespace(dateien=SimpleNamespace(umfang=umfang)))


def _request(length: int | None):
    return SimpleNamespace(headers={} if length is None else {"content-length": str(length)})


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


def test_reading_past_its_time_is_refused_and_named(monkeypatch, caplog):
    def slow(data, content_type, name, max_zeichen):
        time.sleep(1.0)
        raise AssertionError("not reached in time")

    monkeypatch.setattr(dateien, "lesen", slow)
    ing = _ing({}, file_read_timeout_s=0.2, file_read_workers=1)
    with caplog.at_level(logging.WARNING, logger="novaberg.ingress"), pytest.raises(HTTPException) as e:
        asyncio.run(files._read(ing, Upload(b"x", "a.txt", "text/plain"), None))
    assert e.value.status_code == 422 and "within" in e.value.detail["message"]
    assert "lesen_zeitlimit" in caplog.text


def test_a_file_that_cannot_be_read_says_why():
    ing = _ing({})
    with pytest.raises(HTTPException) as e:
        asyncio.run(files._read(ing, Upload(b"\x00\x01", "a.txt", "text/plain"), None))
    assert e.value.status_code == 422 and "NUL" in e.value.detail["message"]
