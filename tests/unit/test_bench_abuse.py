"""The fairness benchmark's pure parts (bench/abuse.py): its payloads are what they claim to be, and
its figures and table say what was measured."""
import codecs
import json
from collections import Counter

import pytest

from bench import abuse


def test_the_history_fills_the_body_limit_and_ends_with_the_user():
    body = abuse.history_body(1024 * 1024)
    req = json.loads(body)
    assert len(body) <= 1024 * 1024
    assert len(req["messages"]) > 20_000  # as many as fit, far more than any client sends
    assert req["messages"][-1]["role"] == "user" and req["model"] == "nova"
    assert len(json.loads(abuse.history_body(10**9, want=51))["messages"]) == 51


def test_the_punycode_payload_decodes_to_one_character_a_digit():
    text = codecs.decode(abuse.punycode_payload(500, "n1"), "punycode")
    assert len(text) == len("n1") + 500


def test_the_pdf_has_many_pages_over_one_content_stream():
    pypdf = pytest.importorskip("pypdf")
    import io

    data = abuse.pdf_shared_stream(40, 4096, "x1")
    reader = pypdf.PdfReader(io.BytesIO(data))
    assert len(reader.pages) == 40
    assert data.count(b"\nstream\n") == 1  # one stream, every page pointing at it
    assert "Hallo Welt" in reader.pages[39].extract_text()


def test_the_cards_are_cards():
    card = abuse.regex_card("Regula", 200)
    entries = card["data"]["character_book"]["entries"]
    assert len(entries) == 200 and all(e["keys"][0] in abuse.CATASTROPHIC for e in entries)
    deep = json.loads(abuse.deep_card("Tiefe", 50))
    node, depth = deep["data"]["extensions"], 0
    while isinstance(node, dict):
        node, depth = node["a"], depth + 1
    assert depth == 50 and deep["data"]["name"] == "Tiefe"


def _phase(name, ms, honest=None, attacker=None, healthz=(10.0,), hz_codes=None):
    ph = abuse.Phase(name, t0=0.0, t1=25.0, honest_ms=list(ms), honest_codes=Counter(honest or {200: len(ms)}),
                     attacker_codes=Counter(attacker or {}), healthz_ms=list(healthz),
                     healthz_codes=Counter(hz_codes or {200: len(healthz)}))
    return ph


def test_a_phase_is_set_beside_the_baseline():
    base = _phase("baseline", [100, 100, 200, 200, 400])
    hit = _phase("logins", [200, 300, 400, 800, 800], honest={200: 5, 429: 3, 502: 1},
                 attacker={401: 60, 429: 900, 0: 2}, healthz=(20.0, 1500.0))
    row = abuse.phase_figures(hit, base)
    assert (row["honest_p50_ms"], row["p50_over_baseline"], row["p95_over_baseline"]) == (400, 2.0, 2.0)
    assert (row["honest_5xx"], row["honest_refused"], row["honest_429"]) == (1, 3, 3)
    attacker = (row["attacker_requests"], row["attacker_4xx"], row["attacker_429"], row["attacker_5xx"])
    assert attacker == (962, 60, 900, 0)
    assert row["healthz_max_ms"] == 1500.0 and row["healthz_ok"] is False
    assert abuse.phase_figures(base, base)["healthz_ok"] is True


def test_the_table_has_a_row_per_phase_and_marks_a_slow_healthz():
    base = _phase("baseline", [100])
    slow = _phase("regex", [], healthz=(1200.0,))
    table = abuse.markdown([abuse.phase_figures(base, base), abuse.phase_figures(slow, base)]).splitlines()
    assert len(table) == 4 and table[0].startswith("| phase |")
    assert "| regex | 0 | — |" in table[3] and "1200 ✗" in table[3]
    assert "✗" not in table[2]


def test_attacks_are_named_in_order_and_unknown_ones_refused():
    assert abuse.parse_attacks("all") == abuse.DEFAULT_ORDER and abuse.DEFAULT_ORDER[-1] == "logins"
    assert abuse.parse_attacks("logins, history") == ["logins", "history"]
    with pytest.raises(ValueError, match="unknown attacks"):
        abuse.parse_attacks("history,ddos")
