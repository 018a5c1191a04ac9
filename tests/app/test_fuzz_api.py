"""API fuzzing (issue #15): requests generated from the ingress's own OpenAPI schema — valid ones
and deliberately invalid ones — with the first user's key, an unknown key and none, against the
running app. No answer may be a server error, and none may carry what another user said: the
second user tells his pair a secret word first, and the path parameters are pointed at his pair
in part of the cases. The operator key is not used: its routes may delete what other tests use.
The events stream (a response that never ends) is left to its own tests. The number of cases per operation and mode is `NOVABERG_FUZZ_EXAMPLES` (default 6; an operator's
long run sets more)."""
from __future__ import annotations

import os

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


def _fuzz(schema, base_url: str, keys: list[str | None], session) -> tuple[int, list[str]]:
    calls, problems = 0, []
    for result in schema.get_all_operations():
        op = result.ok()
        if op.method.upper() == "GET" and op.path.endswith("/events"):
            continue  # a server-sent event stream never ends: tested in test_e2e_events.py
        for mode in GenerationMode:

            @settings(max_examples=BEISPIELE, deadline=None, database=None, derandomize=True,
                      suppress_health_check=list(HealthCheck), phases=[Phase.generate])
            @given(case=op.as_strategy(generation_mode=mode), key=st.sampled_from(keys), fremd=st.booleans())
            def run(case, key, fremd):
                nonlocal calls
                if fremd and case.path_parameters and "user_id" in case.path_parameters:
                    case.path_parameters = {**case.path_parameters, "user_id": "bob", "character_id": "nova"}
                headers = {**(case.headers or {}), **(auth(key) if key else {})}
                try:
                    r = case.call(base_url=base_url, session=session, headers=headers, timeout=60)
                except (requests.exceptions.InvalidHeader, ValueError, UnicodeError):
                    return  # the client itself refused to send it (a header it cannot encode)
                calls += 1
                if r.status_code >= 500:
                    problems.append(f"{r.status_code} {op.method.upper()} {case.formatted_path} ({mode.value}): {r.text[:200]}")
                if GEHEIM in r.text:
                    problems.append(f"leak {op.method.upper()} {case.formatted_path} with key {key and key[:8]}")

            try:
                run()
            except Unsatisfiable:
                pass  # an operation with nothing to make invalid (no parameters, no body)
    return calls, problems


def test_fuzzed_requests_get_no_server_error_and_no_other_users_data(system, client, keys):
    told = client.post("/v1/pairs/bob/nova/turns", json={"text": f"Mein Geheimwort ist {GEHEIM}."},
                       headers=auth(keys["bob"]))
    assert told.status_code == 200
    # the control: bob's own history holds the word, so a leak would be seen
    assert GEHEIM in client.get("/v1/pairs/bob/nova/turns", headers=auth(keys["bob"])).text
    schema = schemathesis.openapi.from_url(f"{system.url}/openapi.json")
    with requests.Session() as session:
        calls, problems = _fuzz(schema, system.url, [keys["alice"], "nbk_unknown-key", None], session)
    print(f"fuzzing: {calls} requests over {len(list(schema.get_all_operations()))} operations, "
          f"{len(problems)} problems")
    assert calls >= 100 and problems == [], problems[:10]
