"""The operators' dashboard against the running system: its decision rates are the counts of
`pipeline_log`, and what headless Chromium shows on the page matches the JSON endpoints."""
import os
import re
import shutil
import subprocess
from datetime import datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.conftest import auth, redis_call, wait_for

pytestmark = pytest.mark.e2e
ARTIFACTS = Path(os.environ.get("NOVABERG_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-artifacts"))
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-default-apps", "--disable-sync", "--no-first-run",
                  "--disable-dev-shm-usage"]


@pytest.fixture(scope="module")
def chromium():
    """Debian's chromium, installed from the package registry when it is not there yet."""
    path = shutil.which("chromium")
    if path is None and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        cmd = ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]
        if os.geteuid() != 0 and shutil.which("sudo"):
            cmd = ["sudo", "-E"] + cmd
        if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
            subprocess.run(cmd[:-4] + ["update"] if cmd[0] == "sudo" else ["apt-get", "update"], env=env,
                           capture_output=True)
            subprocess.run(cmd, env=env, capture_output=True)
        path = shutil.which("chromium")
    if path is None:
        pytest.fail("chromium is not installed and could not be installed with apt-get")
    return path


def _drained(settings):
    from memory import outbox

    return redis_call(settings.redis_url, outbox.backlog)["pending"] == 0


def _turns(client, key, user, ch, texts):
    out = []
    for t in texts:
        r = client.post(f"/v1/pairs/{user}/{ch}/turns", json={"text": t}, headers=auth(key))
        assert r.status_code == 200, r.text
        out.append(r.json()["turn_id"])
    return out


def _snapshot(client, op, window):
    r = client.get(f"/v1/operator/dashboard?window_s={window}", headers=auth(op))
    assert r.status_code == 200, r.text
    return r.json()


def _sql_rates(database_url, since, until):
    import psycopg

    with psycopg.connect(database_url) as conn:
        rows = conn.execute("SELECT entscheidung, outcome, count(*) FROM pipeline_log WHERE art = 'switch'"
                            " AND created_at >= %s AND created_at <= %s GROUP BY 1, 2", (since, until)).fetchall()
    return {(e, o): n for e, o, n in rows}


def test_decision_rates_are_the_counts_of_pipeline_log(client, keys, settings, character):
    ch = character("dash")
    ids = _turns(client, keys["alice"], "alice", ch, ["Hallo Nova!", "Am Freitag um 9 Uhr fahre ich nach Berlin."])
    from memory import pg
    from tests.conftest import pg_call

    wait_for(lambda: pg_call(settings.database_url, pg.pipeline_rows, "alice", ch, ids[-1]), timeout=60)
    wait_for(lambda: _drained(settings), timeout=120)
    for attempt in range(3):  # a background job of another test may land in between: take it again
        snap = _snapshot(client, keys["operator"], 3600)
        direct = _sql_rates(settings.database_url, datetime.fromisoformat(snap["since"]),
                            datetime.fromisoformat(snap["generated_at"]))
        shown = {(d["entscheidung"], o["outcome"]): o["count"] for d in snap["decisions"] for o in d["outcomes"]}
        if shown == direct:
            break
    assert shown == direct and shown
    assert ("thinker.schnellcheck", "reasoning") in shown  # "Am Freitag um 9 Uhr" sends the turn to reasoning
    for d in snap["decisions"]:
        total = sum(direct[(d["entscheidung"], o["outcome"])] for o in d["outcomes"])
        assert d["total"] == total
        for o in d["outcomes"]:
            assert abs(o["rate"] - direct[(d["entscheidung"], o["outcome"])] / total) < 1e-6
    # the pair view: the pair's turns with each node's duration and decisions
    view = client.get(f"/v1/operator/pairs/alice/{ch}/turns", headers=auth(keys["operator"])).json()["turns"]
    assert [t["turn_id"] for t in view] == ids[::-1]
    assert any(n["node"] == "responder" and n["ms"] > 0 for n in view[0]["nodes"])
    assert any(d["entscheidung"] == "thinker.schnellcheck" for d in view[0]["decisions"])
    # operators only
    assert client.get("/v1/operator/dashboard", headers=auth(keys["alice"])).status_code == 403
    assert client.get("/v1/operator/dashboard").status_code == 401


class _Figures(HTMLParser):
    """The figures on the rendered page: data-figure spans, decision, node and agent table cells."""

    def __init__(self):
        super().__init__()
        self.figures, self.cells = {}, {}
        self._target, self._row = None, None
        self.loaded = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.loaded = a.get("data-loaded")
        if tag == "tr" and "data-decision" in a:
            self._row = ("decision", a["data-decision"], a["data-outcome"])
        elif tag == "tr" and "data-node" in a:
            self._row = ("node", a["data-node"])
        elif tag == "tr" and "data-agent" in a:
            self._row = ("agent", a["data-agent"])
        if "data-figure" in a:
            self._target = ("figure", a["data-figure"])
        elif "data-cell" in a and self._row:
            self._target = self._row + (a["data-cell"],)

    def handle_data(self, data):
        if self._target and data.strip():
            if self._target[0] == "figure":
                self.figures[self._target[1]] = data.strip()
            else:
                self.cells[self._target] = data.strip()

    def handle_endtag(self, tag):
        if tag in ("span", "td"):
            self._target = None


def _value(text):
    if text == "–":
        return None
    if text.endswith("%"):
        return float(text[:-1]) / 100
    return float(text)


def _close(shown, value, share=False):
    if value is None:
        return shown is None
    if share:
        return abs(shown - value) <= 0.0006
    return abs(shown - value) <= 0.006 + 1e-9 * abs(value)


def test_the_page_in_chromium_shows_what_the_json_says(client, keys, settings, system, chromium, character):
    ch = character("dashpage")
    _turns(client, keys["alice"], "alice", ch, ["Wie war dein Tag?"])
    wait_for(lambda: _drained(settings), timeout=120)
    from memory import agent_quoten
    redis_call(settings.redis_url, agent_quoten.zugestellt, "notizen", "character")  # one delivered: a row at least
    op = keys["operator"]
    url = f"{system.url}/dashboard#key={op}&window=3600&pair=alice/{ch}"
    before = _snapshot(client, op, 3600)
    dom = subprocess.run([chromium, *CHROMIUM_FLAGS, "--virtual-time-budget=10000", "--dump-dom", url],
                         capture_output=True, text=True, timeout=180).stdout
    after = _snapshot(client, op, 3600)
    page = _Figures()
    page.feed(dom)
    assert page.loaded, "the page did not render a snapshot: " + dom[-2000:]
    assert f"Pair alice/{ch}" in dom

    shares = {"llm.busy_share", "embedder.busy_share"}
    compared = 0
    for fig, text in page.figures.items():
        group, name = fig.split(".")
        b, a = before[group].get(name), after[group].get(name)
        if b != a:
            continue  # a figure that moved while the page loaded (a rate, an eviction) is not compared
        assert _close(_value(text), b, fig in shares), (fig, text, b)
        compared += 1
    for key in ("turns.count", "turns.p50_ms", "turns.p95_ms"):
        assert key in page.figures and before["turns"] == after["turns"]
    assert compared >= 10
    decisions = {(d["entscheidung"], o["outcome"]): o for d in after["decisions"] for o in d["outcomes"]}
    stable = before["decisions"] == after["decisions"]
    shown_decisions = {k[1:3] for k in page.cells if k[0] == "decision"}
    if stable:
        assert shown_decisions == set(decisions)
        for (kind, *rest), text in page.cells.items():
            if kind == "decision":
                ent, outcome, cell = rest
                expected = decisions[(ent, outcome)][cell]
                assert _close(_value(re.sub(r"\s+", " ", text)), expected, cell == "rate"), (ent, outcome, cell, text)
    nodes = {n["node"]: n for n in after["nodes"]}
    if before["nodes"] == after["nodes"]:
        for (kind, node, cell), text in ((k, v) for k, v in page.cells.items() if k[0] == "node"):
            if cell in ("runs", "p50_ms", "p95_ms"):
                assert _close(_value(text), nodes[node][cell]), (node, cell, text)

    # the agents' quota counters (seed 003): a row per agent and chain, as the JSON has them
    agents = {f"{q['agent']}:{q['chain']}": q for q in after["agents"]}
    assert agents and agents == {f"{q['agent']}:{q['chain']}": q for q in before["agents"]}
    shown = {k[1] for k in page.cells if k[0] == "agent"}
    assert shown == set(agents)
    for (kind, agent, cell), text in ((k, v) for k, v in page.cells.items() if k[0] == "agent"):
        if cell in ("zugestellt", "zustellverlust", "geroutet"):
            assert _value(text) == agents[agent][cell], (agent, cell, text)

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "dashboard.png"
    subprocess.run([chromium, *CHROMIUM_FLAGS, "--virtual-time-budget=10000", "--window-size=1280,2200",
                    f"--screenshot={shot}", url], capture_output=True, timeout=180)
    assert shot.exists() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_healthz_shows_the_agents_quota_counters(client, settings):
    """Seed 003: the quota counters are readable over the health check, with the router's
    denominator in every row (`/healthz` needs no key: aggregate counts, nobody's data)."""
    from memory import agent_quoten

    redis_call(settings.redis_url, agent_quoten.zugestellt, "timeline", "agent")
    redis_call(settings.redis_url, agent_quoten.bearbeitet, "timeline", "agent", "ok")
    health = client.get("/healthz").json()
    stored = {(q.agent, q.chain): q.model_dump() for q in redis_call(settings.redis_url, agent_quoten.lesen)}
    shown = {(q["agent"], q["chain"]): q for q in health["agenten"]}
    assert health["status"] == "ok" and shown == stored
    row = shown[("timeline", "agent")]
    assert row["zugestellt"] >= 1 and row["bearbeitet"].get("ok", 0) >= 1 and "geroutet" in row and "quote" in row
