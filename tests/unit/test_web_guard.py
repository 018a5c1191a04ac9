"""The web guard against a real local HTTP server: refusals by address class, the pinned
connection, redirects checked again, size and time caps; page text with its fallback."""
import asyncio
import gzip
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from core.settings import Settings
from serve.web import PageUnavailable, WebLayer, page_text
from serve.web_guard import FetchRefused, WebGuard, address_refusal

ARTICLE = (b"<html><head><title>T</title></head><body><nav>Menue</nav><article><h1>Beagle</h1>"
           + b"<p>Der Beagle ist eine von der FCI anerkannte britische Hunderasse. " * 8 + b"</p></article></body></html>")


BOMBE = gzip.compress(b"\0" * 20_000_000, compresslevel=9)
"""20 MB of zeros in about 20 kB: a page that inflates a thousandfold."""


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        if self.path == "/artikel":
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.end_headers()
            self.wfile.write(ARTICLE)
        elif self.path == "/weiter":
            self.send_response(302)
            self.send_header("Location", "/artikel")
            self.end_headers()
        elif self.path == "/nach-innen":
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
            self.end_headers()
        elif self.path == "/gross":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"x" * 50_000)
        elif self.path in ("/gepackt", "/bombe"):
            body = gzip.compress(ARTICLE) if self.path == "/gepackt" else BOMBE
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.path == "/brotli":
            self.send_response(200)
            self.send_header("Content-Encoding", "br")
            self.end_headers()
            self.wfile.write(b"\x0b\x02\x80hi\x03")
        elif self.path == "/langsam":
            time.sleep(3)
            self.send_response(200)
            self.end_headers()
        else:
            self.send_response(404)
            self.end_headers()


@pytest.fixture(scope="module")
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", srv.server_address[1]
    srv.shutdown()


def test_address_classes():
    refused = {"127.0.0.1": "loopback", "10.1.2.3": "private", "192.168.0.5": "private", "169.254.169.254": "link-local",
               "::1": "loopback", "fd00::1": "private", "::ffff:10.0.0.1": "IPv4-mapped", "0.0.0.0": "unspecified",
               "224.0.0.1": "multicast", "100.64.0.1": "non-global",
               # addresses that carry an IPv4 address inside: 6to4 of loopback and of a private one, NAT64, Teredo
               "2002:7f00:1::1": "6to4 address 2002:7f00:1::1 that carries a loopback",
               "2002:a00:1::1": "carries a private address 10.0.0.1", "64:ff9b::a00:1": "NAT64",
               "2001:0:4136:e378:8000:63bf:3fff:fdd2": "Teredo"}
    for addr, why in refused.items():
        assert why in (address_refusal(addr, []) or ""), addr
    assert address_refusal("93.184.216.34", []) is None
    assert address_refusal("2002:5db8:d822::1", []) is None  # 6to4 of a public address
    import ipaddress

    assert address_refusal("127.0.0.1", [ipaddress.ip_network("127.0.0.0/8")]) is None


def test_refusals(server):
    url, _ = server
    g = WebGuard()

    async def refused(u):
        with pytest.raises(FetchRefused) as e:
            await g.fetch(u)
        return str(e.value)

    assert "loopback" in asyncio.run(refused(f"{url}/artikel"))
    assert "scheme" in asyncio.run(refused("file:///etc/passwd"))
    assert "scheme" in asyncio.run(refused("gopher://example.org/"))
    assert "credentials" in asyncio.run(refused("http://user:pw@example.org/"))

    async def to_private(host, port):
        return ["93.184.216.34", "10.0.0.7"]  # one bad answer among good ones is enough to refuse

    with pytest.raises(FetchRefused, match="private"):
        asyncio.run(WebGuard(resolver=to_private).check("http://mixed.example/"))


def test_pinned_fetch_redirects_and_caps(server):
    url, port = server

    async def public_name(host, port_):
        return ["127.0.0.1"]  # what the guard checked is what it connects to

    g = WebGuard(allowed_networks=["127.0.0.0/8"], resolver=public_name, max_bytes=10_000, timeout_s=1.0)
    res = asyncio.run(g.fetch(f"http://news.example:{port}/weiter"))
    assert res.status == 200 and res.redirects == [f"http://news.example:{port}/weiter"] and b"Beagle" in res.body
    big = asyncio.run(g.fetch(f"http://news.example:{port}/gross"))
    assert big.truncated and len(big.body) == 10_000
    with pytest.raises(FetchRefused, match="link-local"):
        asyncio.run(g.fetch(f"http://news.example:{port}/nach-innen"))  # the redirect is checked again
    packed = asyncio.run(g.fetch(f"http://news.example:{port}/gepackt"))
    assert packed.body == ARTICLE and not packed.truncated  # a gzip page, inflated
    bomb = asyncio.run(g.fetch(f"http://news.example:{port}/bombe"))  # 20 MB inflated from 20 kB sent
    assert bomb.truncated and len(bomb.body) == 10_000
    with pytest.raises(FetchRefused, match="content encoding 'br'"):
        asyncio.run(g.fetch(f"http://news.example:{port}/brotli"))
    with pytest.raises(FetchRefused, match="within"):
        asyncio.run(g.fetch(f"http://news.example:{port}/langsam"))
    with pytest.raises(FetchRefused, match="redirects"):
        asyncio.run(WebGuard(allowed_networks=["127.0.0.0/8"], resolver=public_name, max_redirects=0)
                    .fetch(f"http://news.example:{port}/weiter"))


def test_page_text_and_the_web_layer(server):
    url, _ = server
    text, how = page_text(ARTICLE, "text/html")
    assert how == "trafilatura" and "britische Hunderasse" in text and "Menue" not in text
    # trafilatura finds no main text in a footer-only page; BeautifulSoup still reads it
    text, how = page_text(b"<html><body><script>x()</script><footer>Impressum Beagle-Club</footer></body></html>",
                          "text/html")
    assert how == "beautifulsoup" and text == "Impressum Beagle-Club"
    web = WebLayer(Settings(web_allowed_networks=["127.0.0.0/8"]))
    out = asyncio.run(web.fetch(f"{url}/artikel"))
    assert "Beagle" in out["text"]
    with pytest.raises(PageUnavailable) as blocked:
        asyncio.run(WebLayer(Settings()).fetch(f"{url}/artikel"))
    assert blocked.value.grund.startswith("abgewiesen")
    with pytest.raises(Exception, match="none configured"):
        asyncio.run(WebLayer(Settings()).search("Beagle"))
