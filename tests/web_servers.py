"""Local HTTP servers for the web tests: one that speaks Serper's JSON, one that speaks SearXNG's,
and real article HTML, with redirects on request. They count what they were asked."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

ARTICLE = ("""<!DOCTYPE html><html lang="de"><head><meta charset="utf-8"><title>Magnetar – Lexikon</title></head>
<body><header><nav><a href="/">Start</a> | <a href="/themen">Themen</a> | Anmelden</nav></header>
<main><article><h1>Magnetare</h1>
<p>Ein Magnetar ist ein Neutronenstern mit einem extrem starken Magnetfeld. Der naechste bekannte Magnetar,
SGR 0418+5729, ist etwa 6500 Lichtjahre von der Erde entfernt.</p>
<p>Magnetare entstehen vermutlich bei Supernovae besonders massereicher Sterne. Ihr Magnetfeld ist rund tausendmal
staerker als das gewoehnlicher Neutronensterne und zerfaellt innerhalb von etwa zehntausend Jahren.</p>
<p>Beobachtet werden sie vor allem durch Ausbrueche im Roentgen- und Gammabereich, die wenige Millisekunden bis
einige Sekunden dauern.</p></article></main>
<footer>Impressum · Datenschutz · Werbung</footer></body></html>""").encode()
FOOTER_ONLY = b"<html><body><script>x()</script><footer>Impressum Sternwarte</footer></body></html>"


class WebServers:
    def __init__(self):
        self.calls = {"serper": 0, "searxng": 0, "pages": 0}
        self.queries: list[tuple[str, str]] = []
        self.mode = {"serper": "ok", "searxng": "ok"}
        """ok | fail (HTTP 500) | empty (no hits)"""
        self.api_keys: list[str | None] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _json(self, status, obj):
                body = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _hits(self):
                return [(f"Magnetar – Treffer {i}", f"{outer.url}/artikel" if i == 1 else f"{outer.url}/seite{i}",
                         f"Schnipsel {i} ueber Magnetare") for i in range(1, 7)]

            def do_POST(self):
                if self.path != "/serper/search":
                    return self._json(404, {})
                outer.calls["serper"] += 1
                outer.api_keys.append(self.headers.get("X-API-KEY"))
                q = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}").get("q", "")
                outer.queries.append(("serper", q))
                if outer.mode["serper"] == "fail":
                    return self._json(500, {"message": "quota exceeded"})
                hits = [] if outer.mode["serper"] == "empty" else self._hits()
                self._json(200, {"searchParameters": {"q": q},
                                 "organic": [{"title": t, "link": u, "snippet": s, "position": i + 1}
                                             for i, (t, u, s) in enumerate(hits)]})

            def do_GET(self):
                parts = urlsplit(self.path)
                if parts.path == "/searxng/search":
                    outer.calls["searxng"] += 1
                    q = parse_qs(parts.query)
                    outer.queries.append(("searxng", q.get("q", [""])[0]))
                    if outer.mode["searxng"] == "fail":
                        return self._json(500, {})
                    hits = [] if outer.mode["searxng"] == "empty" else self._hits()
                    return self._json(200, {"query": q.get("q", [""])[0], "number_of_results": len(hits),
                                            "results": [{"title": t, "url": u, "content": s, "engine": "wikipedia"}
                                                        for t, u, s in hits]})
                outer.calls["pages"] += 1
                if parts.path in ("/artikel", "/seite2"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html; charset=utf-8")
                    self.end_headers()
                    self.wfile.write(ARTICLE if parts.path == "/artikel" else FOOTER_ONLY)
                elif parts.path == "/redirect":
                    self.send_response(302)
                    self.send_header("Location", parse_qs(parts.query)["to"][0])
                    self.end_headers()
                else:
                    self.send_response(404)
                    self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def settings(self, **extra):
        from core.settings import Settings

        values = dict(serper_api_key="test-key", serper_url=f"{self.url}/serper/search",
                      searxng_url=f"{self.url}/searxng", web_allowed_networks=["127.0.0.1/32"], web_timeout_s=5)
        return Settings(**{**values, **extra})

    def close(self):
        self.server.shutdown()


class _InProcess:
    """A deployment method's `.remote`, called in this process."""

    def __init__(self, fn):
        self.remote = fn


def LocalWeb(settings):
    """The web deployment's layer called in-process (the same WebLayer, no Ray), through the client
    the nodes use (`pipeline.services.WebClient`, which maps the layer's `PageUnavailable`)."""
    from types import SimpleNamespace

    from pipeline.services import WebClient
    from serve.web import WebLayer

    layer = WebLayer(settings)
    client = WebClient(SimpleNamespace(search=_InProcess(layer.search), fetch=_InProcess(layer.fetch)), settings)
    client.layer = layer
    return client
