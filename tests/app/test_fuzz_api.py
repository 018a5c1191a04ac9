"""API fuzzing (issue #15): requests generated from the ingress's own OpenAPI schema — valid ones
and deliberately invalid ones — with a user's key, an unknown key and none, against the running
app. No answer may be a server error, and none may carry what another user said: the second user
tells his pair a secret word first, and the path parameters are pointed at his pair in part of the
cases; in another part at the fuzzing user's own pair, so that a request passes the ownership check
and reaches the route's own work. Beside the schema's operations:

- the operators' routes with the operator key (all but revoking keys, which would take the other
  tests' keys; the others' destructive routes are left to their own tests);
- the routes that read a raw body the schema does not describe: a file upload (random bytes, text
  in odd charsets, PDFs, multipart forms) on the user's own pair, a character card import (random
  cards, JSON or not) with the operator key, each imported card exported and talked to;
- the event stream's cursor (`?after=`, `Last-Event-ID`) on the user's own pair, the stream hung up
  after its first line;
- the dashboard page, which the schema leaves out.

The number of cases per operation and mode is `NOVABERG_FUZZ_EXAMPLES` (default 6; an operator's
long run sets more)."""
from __future__ import annotations

import itertools
import json
import os
from collections import Counter

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from tests.conftest import auth

pytestmark = pytest.mark.e2e

GEHEIM = "Quokkaglanz"
BEISPIELE = int(os.environ.get("NOVABERG_FUZZ_EXAMPLES", "6"))
FUZZER = "fuzzi"
"""The fuzzing user: his own pair takes the cases pointed at it (nobody else's tests use it)."""
PFAD = ("erzeugt", "eigen", "fremd")
"""Where a case's path parameters point: as generated, at the fuzzing user's own pair with nova,
or at bob's pair (a leak would show)."""
NICHT_EIGEN = {("DELETE", "/v1/users/{user_id}")}
"""Not run on the fuzzing user's own pair: it erases him with his key (tests/app/test_erasure_e2e.py)."""
NICHT_OPERATOR = {("POST", "/v1/operator/keys/revoke")}
"""Not run with the operator key: it would revoke the keys the other tests use."""


def _einstellungen(n: int = BEISPIELE):
    return settings(max_examples=n, deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck), phases=[Phase.generate])


def _pfad(case, wohin: str) -> None:
    p = case.path_parameters or {}
    if wohin == "erzeugt" or "user_id" not in p:
        return
    case.path_parameters = {**p, "user_id": FUZZER if wohin == "eigen" else "bob",
                            **({"character_id": "nova"} if "character_id" in p else {})}


class Befund:
    """What the fuzzing saw: requests sent, server errors and leaks."""

    def __init__(self):
        self.calls, self.problems, self.codes, self.refusals = 0, [], Counter(), Counter()

    def bericht(self, was: str, mehr: str = "") -> str:
        return (f"{was}: {self.calls} requests{mehr}, {len(self.problems)} problems; answers by status "
                f"{dict(sorted(self.codes.items()))}; most frequent refusals {self.refusals.most_common(4)}")

    def pruefen(self, r, what: str, key: str | None, operator: bool = False, text: str | None = None) -> None:
        """One answer; `text` stands for its body where that is a stream that does not end."""
        self.calls += 1
        self.codes[r.status_code] += 1
        body = r.text if text is None else text
        if 400 <= r.status_code < 500:
            self.refusals[f"{r.status_code} {body[:90]}"] += 1
        if r.status_code >= 500:
            self.problems.append(f"{r.status_code} {what}: {body[:300]}")
        if not operator and GEHEIM in body:
            self.problems.append(f"leak {what} with key {key and key[:8]}")


def _fuzz(ops, base_url: str, keys: list[str | None], session, befund: Befund, operator: bool = False) -> None:
    for op in ops:
        if op.method.upper() == "GET" and op.path.endswith("/events"):
            continue  # a server-sent event stream never ends: `_cursor` below
        for mode in GenerationMode:

            @_einstellungen()
            @given(case=op.as_strategy(generation_mode=mode), key=st.sampled_from(keys), wohin=st.sampled_from(PFAD))
            def run(case, key, wohin):
                if wohin == "eigen" and (op.method.upper(), op.path) in NICHT_EIGEN:
                    wohin = "erzeugt"
                _pfad(case, wohin)
                headers = {**(case.headers or {}), **(auth(key) if key else {})}
                try:
                    r = case.call(base_url=base_url, session=session, headers=headers, timeout=60)
                except (requests.exceptions.InvalidHeader, ValueError, UnicodeError):
                    return  # the client itself refused to send it (a header it cannot encode)
                befund.pruefen(r, f"{op.method.upper()} {case.formatted_path} ({mode.value}, {wohin})", key, operator)

            try:
                run()
            except Unsatisfiable:
                pass  # an operation with nothing to make invalid (no parameters, no body)


def test_fuzzed_requests_get_no_server_error_and_no_other_users_data(system, client, keys, fuzz_key):
    told = client.post("/v1/pairs/bob/nova/turns", json={"text": f"Mein Geheimwort ist {GEHEIM}."},
                       headers=auth(keys["bob"]))
    assert told.status_code == 200
    # the control: bob's own history holds the word, so a leak would be seen
    assert GEHEIM in client.get("/v1/pairs/bob/nova/turns", headers=auth(keys["bob"])).text
    schema = schemathesis.openapi.from_url(f"{system.url}/openapi.json")
    ops = [r.ok() for r in schema.get_all_operations()]
    befund = Befund()
    with requests.Session() as session:
        _fuzz(ops, system.url, [fuzz_key, "nbk_unknown-key", None], session, befund)
    print(befund.bericht("fuzzing", f" over {len(ops)} operations"))
    assert befund.calls >= 100 and befund.problems == [], befund.problems[:10]


def test_the_operators_routes_fuzzed_with_the_operator_key_get_no_server_error(system, keys):
    schema = schemathesis.openapi.from_url(f"{system.url}/openapi.json")
    ops = [op for op in (r.ok() for r in schema.get_all_operations())
           if op.path.startswith("/v1/operator/") and (op.method.upper(), op.path) not in NICHT_OPERATOR]
    befund = Befund()
    with requests.Session() as session:
        _fuzz(ops, system.url, [keys["operator"]], session, befund, operator=True)
        for key in (keys["operator"], keys["alice"], "nbk_unknown-key", None):  # not in the schema
            r = session.get(f"{system.url}/dashboard", headers=auth(key) if key else {}, timeout=60)
            befund.pruefen(r, "GET /dashboard", key, operator=True)
    print(befund.bericht("operator fuzzing", f" over {len(ops)} operations"))
    assert len(ops) >= 7 and befund.calls >= 40 and befund.problems == [], befund.problems[:10]


@pytest.fixture(scope="module")
def fuzz_key(system):
    from cluster import runtime

    return runtime.create_key(FUZZER)


# ------------------------------------------------------------------------------------- raw bodies
CHARSETS = [None, "utf-8", "latin-1", "utf-16", "utf-32-be", "utf-7", "cp1252", "punycode", "idna", "rot13", "base64",
            "hex", "zlib", "uu", "unbekannt", "", '"utf-8"', "utf-8; x=y"]
TYPEN = [None, "text/plain", "text/markdown", "text/x-markdown", "application/pdf", "application/json", "image/png",
         "application/octet-stream", "multipart/form-data", "TEXT/PLAIN", "text/plain; format=flowed"]
NAMEN = st.one_of(st.none(), st.sampled_from(["a.txt", "b.md", "c.pdf", "../../etc/passwd", "x.exe", ".pdf", "ä.txt",
                                              "a" * 300]), st.text(max_size=40))


def _pdf(seiten: int) -> bytes:
    from bench.abuse import pdf_shared_stream

    return pdf_shared_stream(seiten, 300, "fuzz")


INHALT = st.one_of(
    st.binary(max_size=3000), st.text(max_size=800).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(max_size=1500).map(lambda b: b"%PDF-1.4\n" + b),
    st.tuples(st.integers(1, 5), st.integers(0, 2000)).map(lambda t: _pdf(t[0])[:None if t[1] == 0 else t[1]]))
"""A file's bytes: anything, text, a PDF header over junk, a small PDF whole or cut off."""


def _upload(session, url: str, key: str | None, inhalt: bytes, typ: str | None, charset: str | None,
            name: str | None, form: bool):
    headers = auth(key) if key else {}
    ctype = None if typ is None else typ + (f"; charset={charset}" if charset is not None else "")
    if form:
        return session.post(url, headers=headers, files={"file": (name or "datei", inhalt, ctype or "text/plain")},
                            timeout=120)
    return session.post(url, headers={**headers, **({"content-type": ctype} if ctype else {})}, data=inhalt,
                        params={"name": name} if name is not None else {}, timeout=120)


def test_fuzzed_file_uploads_get_no_server_error(system, fuzz_key):
    befund, url = Befund(), f"{system.url}/v1/pairs/{FUZZER}/nova/files"
    with requests.Session() as session:

        @_einstellungen(3 * BEISPIELE)
        @given(inhalt=INHALT, typ=st.sampled_from(TYPEN), charset=st.sampled_from(CHARSETS), name=NAMEN,
               form=st.booleans(), key=st.sampled_from([fuzz_key, fuzz_key, None]))
        def run(inhalt, typ, charset, name, form, key):
            try:
                r = _upload(session, url, key, inhalt, typ, charset, name, form)
            except (requests.exceptions.InvalidHeader, ValueError, UnicodeError):
                return  # the client itself refused to send it
            befund.pruefen(r, f"upload {len(inhalt)} bytes as {typ!r} charset {charset!r} name {name!r} form {form}",
                           key)

        run()
    print(befund.bericht("upload fuzzing"))
    assert befund.calls >= 2 * BEISPIELE and befund.problems == [], befund.problems[:10]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=30),
    lambda kinder: st.lists(kinder, max_size=4) | st.dictionaries(st.text(max_size=12), kinder, max_size=4),
    max_leaves=12)
"""Any JSON value (NaN and infinities too: Python's json writes them)."""
SCHLUESSEL = st.text(max_size=15) | st.sampled_from(["/(a+)+$/", "/[/", "/x/gimsuy", "/.*/", "/(?i)nova/", ""])


def _eintrag(text, liste, wert):
    return st.fixed_dictionaries({"keys": liste(SCHLUESSEL), "content": text}, optional={
        "secondary_keys": liste(SCHLUESSEL), "selective": wert, "constant": wert, "enabled": wert,
        "insertion_order": wert, "case_sensitive": wert, "name": text,
        "extensions": st.fixed_dictionaries({}, optional={"selectiveLogic": wert, "scan_depth": wert,
                                                          "match_whole_words": wert}) | JSON})


def _daten(text, liste, wert):
    return st.fixed_dictionaries({"name": st.text(min_size=1, max_size=30)}, optional={
        **{k: text for k in ("description", "personality", "scenario", "first_mes", "mes_example", "system_prompt",
                             "post_history_instructions", "creator_notes", "creator", "character_version")},
        "alternate_greetings": liste(st.text(max_size=30)), "tags": liste(st.text(max_size=10)),
        "extensions": st.dictionaries(st.text(max_size=12), JSON, max_size=4) | JSON,
        "character_book": st.fixed_dictionaries({}, optional={
            "entries": st.lists(_eintrag(text, liste, wert), max_size=4), "scan_depth": wert, "token_budget": wert,
            "extensions": JSON})})


def _liste(s):
    return st.lists(s, max_size=3)


_LESBAR = st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=80)
GEFORMT = _daten(_LESBAR, _liste, st.booleans() | st.integers(-3, 2000) | st.none())
"""A card's data with every field of its type (the values still anything their type allows)."""
BELIEBIG = _daten(st.text(max_size=80) | JSON, lambda s: _liste(s) | JSON, JSON)
"""A card's data whose fields may be any JSON."""


def _v2(spec, daten):
    return st.builds(lambda sp, d: {"spec": sp, "spec_version": "2.0", "data": d}, spec, daten)


_SPEC = st.sampled_from(["chara_card_v2", "chara_card_v3"])
KARTE = st.one_of(*[_v2(_SPEC, GEFORMT)] * 4, _v2(_SPEC, BELIEBIG), _v2(_SPEC | JSON, BELIEBIG),
                  st.builds(lambda d, text: {"description": text, **d}, GEFORMT, _LESBAR), JSON)
"""A card (V2/V3 with its data, V1 flat, or any JSON)."""


def _png(text: bytes | None) -> bytes:
    """A 1×1 PNG, with `text` as its `chara` chunk when given."""
    import io

    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    if text is not None:
        info.add_text("chara", text.decode("latin-1"))
    out = io.BytesIO()
    Image.new("RGB", (1, 1)).save(out, "PNG", pnginfo=info)
    return out.getvalue()


def _karte_bytes():
    import base64

    as_json = KARTE.map(lambda k: json.dumps(k).encode())
    return st.one_of(as_json, as_json, as_json.map(lambda b: _png(base64.b64encode(b))),
                     st.binary(max_size=300).map(_png), st.binary(max_size=500),
                     st.binary(max_size=200).map(lambda b: b"\x89PNG\r\n\x1a\n" + b))


def test_fuzzed_card_imports_get_no_server_error_and_what_came_in_can_be_shown_and_talked_to(system, keys, fuzz_key):
    befund, made, ids = Befund(), [], itertools.count()
    op = auth(keys["operator"])
    with requests.Session() as session:

        @_einstellungen(4 * BEISPIELE)
        @given(karte=_karte_bytes(), form=st.booleans(), replace=st.booleans())
        def run(karte, form, replace):
            cid = f"fuzzkarte-{next(ids)}"
            kw = {"files": {"file": ("karte.json", karte)}} if form else {"data": karte}
            r = session.post(f"{system.url}/v1/characters/import", params={"character_id": cid, "replace": replace},
                             headers=op, timeout=120, **kw)
            befund.pruefen(r, f"import {karte[:600]!r}", keys["operator"], operator=True)
            if r.status_code != 201:
                return
            made.append(cid)
            for what in ("", "/export"):
                r = session.get(f"{system.url}/v1/characters/{cid}{what}", headers=auth(fuzz_key), timeout=60)
                befund.pruefen(r, f"GET {cid}{what} of {karte[:600]!r}", fuzz_key)
            text = "".join(c for c in karte[:200].decode("utf-8", "replace") if c.isprintable())
            r = session.post(f"{system.url}/v1/pairs/{FUZZER}/{cid}/turns", headers=auth(fuzz_key), timeout=120,
                             json={"text": f"Hallo! {text}"})
            befund.pruefen(r, f"a turn with {cid} of {karte[:600]!r}", fuzz_key)

        try:
            run()
        finally:
            for cid in made:
                befund.pruefen(session.delete(f"{system.url}/v1/characters/{cid}", headers=op, timeout=120),
                               f"DELETE {cid}", keys["operator"], operator=True)
    print(befund.bericht("card fuzzing", f" ({len(made)} cards imported)"))
    assert befund.calls >= 3 * BEISPIELE and befund.problems == [], befund.problems[:10]


@pytest.mark.parametrize("data", [
    pytest.param({"name": "Liste", "extensions": [1]}, id="card"),
    pytest.param({"name": "Liste", "character_book": {"entries": [{"keys": ["a"], "content": "b", "extensions": 5}]}},
                 id="entry")])
def test_a_card_whose_extensions_are_no_object_is_refused_or_exported(system, keys, fuzz_key, data):
    cid = "fuzzkarte-extensions"
    card = {"spec": "chara_card_v2", "spec_version": "2.0", "data": data}
    r = requests.post(f"{system.url}/v1/characters/import", params={"character_id": cid}, json=card,
                      headers=auth(keys["operator"]), timeout=60)
    try:
        assert r.status_code in (201, 422), r.text[:300]
        if r.status_code == 201:
            exported = requests.get(f"{system.url}/v1/characters/{cid}/export", headers=auth(fuzz_key), timeout=60)
            assert exported.status_code == 200, exported.text[:300]
    finally:
        requests.delete(f"{system.url}/v1/characters/{cid}", headers=auth(keys["operator"]), timeout=60)


# ------------------------------------------------------------------------------------- the event stream
CURSOR = st.none() | st.text(max_size=30) | st.sampled_from(
    ["0", "0\n", "0\r\n", "1-1", "-1", "0-0", "999999999999999-9999999999", "18446744073709551616-0",
     "1733011200000-0\n", " 0", "0 ", "$", ">", "+", "1-1-1"])


def test_fuzzed_event_cursors_get_no_server_error(system, fuzz_key):
    befund, url = Befund(), f"{system.url}/v1/pairs/{FUZZER}/nova/events"
    with requests.Session() as session:

        @_einstellungen(4 * BEISPIELE)
        @given(after=CURSOR, last=CURSOR, key=st.sampled_from([fuzz_key, fuzz_key, None]))
        def run(after, last, key):
            headers = {**(auth(key) if key else {}), **({"Last-Event-ID": last} if last is not None else {})}
            try:
                r = session.get(url, params={"after": after} if after is not None else {}, headers=headers,
                                stream=True, timeout=30)
            except (requests.exceptions.InvalidHeader, ValueError, UnicodeError):
                return  # the client itself refused to send it
            with r:  # a stream that opened is hung up after its first line: the server frees its place
                first = next(r.iter_lines(), b"").decode("utf-8", "replace") if r.status_code == 200 else None
                befund.pruefen(r, f"events after={after!r} Last-Event-ID={last!r}", key, text=first)

        run()
    print(befund.bericht("cursor fuzzing"))
    assert befund.calls >= 2 * BEISPIELE and befund.problems == [], befund.problems[:10]
