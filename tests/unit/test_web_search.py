"""The web layer against local servers that speak Serper's and SearXNG's JSON and serve real
article HTML: provider order and fallback, page text (trafilatura, BeautifulSoup fallback), and a
guard suite of SSRF attempts of which none may get through."""
import asyncio

import pytest

from core.settings import Settings
from serve.web import NoSearchProvider, PageUnavailable, WebLayer
from serve.web_guard import FetchRefused, WebGuard
from tests.web_servers import WebServers


@pytest.fixture(scope="module")
def web():
    servers = WebServers()
    yield servers
    servers.close()


@pytest.fixture(autouse=True)
def _reset(web):
    web.mode.update(serper="ok", searxng="ok")


def test_serper_first_with_its_key(web):
    before = dict(web.calls)
    out = asyncio.run(WebLayer(web.settings()).search("naechster Magnetar Entfernung"))
    assert out["anbieter"] == "serper" and len(out["treffer"]) == 5  # capped at five
    assert out["treffer"][0] == {"titel": "Magnetar – Treffer 1", "url": f"{web.url}/artikel",
                                 "snippet": "Schnipsel 1 ueber Magnetare"}
    assert web.calls["serper"] == before["serper"] + 1 and web.calls["searxng"] == before["searxng"]
    assert web.api_keys[-1] == "test-key" and web.queries[-1] == ("serper", "naechster Magnetar Entfernung")


def test_searxng_is_the_fallback_and_each_failure_is_named(web):
    web.mode["serper"] = "fail"
    out = asyncio.run(WebLayer(web.settings()).search("Magnetar"))
    assert out["anbieter"] == "searxng" and out["treffer"][0]["url"] == f"{web.url}/artikel"
    assert out["versucht"] and out["versucht"][0].startswith("serper: HTTPStatusError")
    # without a Serper key SearXNG is asked directly
    n = web.calls["serper"]
    out = asyncio.run(WebLayer(web.settings(serper_api_key=None)).search("Magnetar"))
    assert out["anbieter"] == "searxng" and web.calls["serper"] == n
    web.mode["searxng"] = "fail"
    with pytest.raises(NoSearchProvider, match="(?s)serper: HTTPStatusError.*searxng: HTTPStatusError"):
        asyncio.run(WebLayer(web.settings()).search("Magnetar"))


def test_empty_results_are_an_answer_not_a_failure(web):
    web.mode["serper"] = "empty"
    out = asyncio.run(WebLayer(web.settings()).search("xyzzy"))
    assert out == {"anbieter": "serper", "treffer": [], "versucht": []}


def test_page_text_trafilatura_and_the_beautifulsoup_fallback(web):
    layer = WebLayer(web.settings())
    page = asyncio.run(layer.fetch(f"{web.url}/artikel"))
    assert page["extraktor"] == "trafilatura"
    assert "SGR 0418+5729" in page["text"] and "Impressum" not in page["text"] and "Anmelden" not in page["text"]
    page = asyncio.run(layer.fetch(f"{web.url}/seite2"))
    assert page["extraktor"] == "beautifulsoup" and page["text"] == "Impressum Sternwarte"
    # a page that cannot be had is the project's error, its reason named (the client maps it once)
    with pytest.raises(PageUnavailable) as missing:
        asyncio.run(layer.fetch(f"{web.url}/gibtsnicht"))
    assert missing.value.grund == "HTTP 404"


# --- the guard: every one of these must be refused, for the reason named -------------------------
LITERAL_ATTEMPTS = [
    # loopback in every spelling
    ("http://127.0.0.1/", "loopback"), ("http://127.1/", "loopback"), ("http://127.0.1/", "loopback"),
    ("http://2130706433/", "loopback"), ("http://017700000001/", "loopback"), ("http://0x7f000001/", "loopback"),
    ("http://0177.0.0.1/", "loopback"), ("http://0x7f.0.0.1/", "loopback"), ("http://0x7f.1/", "loopback"),
    ("http://0177.1/", "loopback"), ("http://127.255.255.254/", "loopback"), ("http://[::1]/", "loopback"),
    ("http://[0:0:0:0:0:0:0:1]/", "loopback"), ("https://127.0.0.1:8443/admin", "loopback"),
    ("http://localhost/", "loopback"), ("http://localhost:6379/", "loopback"),
    # unspecified / reserved
    ("http://0/", "unspecified"), ("http://0.0.0.0/", "unspecified"), ("http://[::]/", "reserved"),
    ("http://255.255.255.255/", "reserved"), ("http://240.0.0.1/", "reserved"), ("http://[::127.0.0.1]/", "reserved"),
    # private
    ("http://10.0.0.1/", "private"), ("http://167772161/", "private"), ("http://0xa000001/", "private"),
    ("http://012.0.0.1/", "private"), ("http://172.16.0.1/", "private"), ("http://172.31.255.255/", "private"),
    ("http://192.168.0.1/", "private"), ("http://3232235521/", "private"), ("http://0xc0.0xa8.0.1/", "private"),
    ("http://198.18.0.1/", "private"), ("http://192.0.0.1/", "private"), ("http://[fc00::1]/", "private"),
    ("http://[fd12:3456:789a::1]/", "private"), ("http://[2001:db8::1]/", "private"),
    # link-local and cloud metadata
    ("http://169.254.169.254/latest/meta-data/", "link-local"), ("http://2852039166/", "link-local"),
    ("http://0xa9fea9fe/", "link-local"), ("http://0251.0376.0251.0376/", "link-local"),
    ("http://0xa9.0xfe.0xa9.0xfe/", "link-local"), ("http://169.254.170.2/v2/credentials", "link-local"),
    ("http://[fe80::1]/", "link-local"), ("http://[fe80::a9fe:a9fe]/", "link-local"),
    ("http://100.100.100.200/latest/meta-data", "non-global"), ("http://100.64.0.1/", "non-global"),
    # IPv4-mapped IPv6 of internal addresses
    ("http://[::ffff:127.0.0.1]/", "IPv4-mapped"), ("http://[::ffff:7f00:1]/", "IPv4-mapped"),
    ("http://[0:0:0:0:0:ffff:7f00:1]/", "IPv4-mapped"), ("http://[::ffff:169.254.169.254]/", "IPv4-mapped"),
    ("http://[::ffff:10.0.0.1]/", "IPv4-mapped"), ("http://[::ffff:a9fe:a9fe]/", "IPv4-mapped"),
    # multicast
    ("http://224.0.0.1/", "multicast"), ("http://[ff02::1]/", "multicast"),
    # not http, or with credentials
    ("file:///etc/passwd", "scheme"), ("gopher://127.0.0.1:6379/_FLUSHALL", "scheme"), ("ftp://10.0.0.1/", "scheme"),
    ("dict://127.0.0.1:11211/stat", "scheme"), ("http://user:pw@example.org/", "credentials"),
    ("http://example.org@127.0.0.1/", "credentials"),
]

# names whose DNS answer is internal (the resolver of the test stands in for hostile DNS)
DNS = {"intern.example": ["10.0.0.7"], "metadata.google.internal": ["169.254.169.254"],
       "rebind.example": ["93.184.216.34", "127.0.0.1"], "public.example": ["93.184.216.34"], "v6.example": ["fd00::5"],
       "mapped.example": ["::ffff:192.168.1.1"], "localtest.me": ["127.0.0.1"], "nip.example": ["192.168.1.10"]}
NAME_ATTEMPTS = [("http://intern.example/", "private"), ("http://metadata.google.internal/computeMetadata/v1/", "link-local"),
                 ("http://rebind.example/", "loopback"), ("http://v6.example/", "private"),
                 ("http://mapped.example/", "IPv4-mapped"), ("http://localtest.me:8080/", "loopback"),
                 ("https://nip.example/x", "private"), ("http://INTERN.example./", "private")]


async def hostile_dns(host, port):
    from serve.web_guard import system_resolver

    return DNS.get(host.lower().rstrip(".")) or await system_resolver(host, port)


def _refusal(guard, url):
    try:
        asyncio.run(guard.fetch(url))
    except FetchRefused as e:
        return str(e)
    return None


@pytest.mark.parametrize("url,why", LITERAL_ATTEMPTS)
def test_guard_refuses_internal_addresses_in_every_spelling(url, why):
    reason = _refusal(WebGuard(timeout_s=2), url)
    assert reason is not None, f"{url} got through"
    assert why in reason, (url, reason)


@pytest.mark.parametrize("url,why", NAME_ATTEMPTS)
def test_guard_refuses_names_that_resolve_inside(url, why):
    reason = _refusal(WebGuard(timeout_s=2, resolver=hostile_dns), url)
    assert reason is not None and why in reason, (url, reason)


REDIRECT_TARGETS = ["http://127.0.0.2/", "http://2130706434/", "http://0x7f.0.0.3/", "http://[::1]/",
                    "http://[::ffff:127.0.0.1]/", "http://169.254.169.254/latest/meta-data/", "http://0251.0376.0251.0376/",
                    "http://10.0.0.1/", "http://192.168.1.1/", "http://intern.example/", "http://metadata.google.internal/",
                    "file:///etc/passwd", "gopher://127.0.0.1:6379/_", "http://v6.example:6379/"]


def test_redirects_into_private_space_are_refused(web):
    """The server's own address is allowed by configuration (127.0.0.1/32); every redirect target
    is checked again, and none of these may be reached."""
    from urllib.parse import quote

    async def dns(host, port):
        return ["127.0.0.1"] if host == "public.example" else await hostile_dns(host, port)

    guard = WebGuard(timeout_s=2, resolver=dns, allowed_networks=["127.0.0.1/32"])
    ok = asyncio.run(guard.fetch(f"http://public.example:{web.port}/redirect?to={quote('/artikel')}"))
    assert ok.status == 200 and b"Magnetar" in ok.body and ok.redirects  # a redirect that stays outside is followed
    for target in REDIRECT_TARGETS:
        before = web.calls["pages"]
        reason = _refusal(guard, f"http://public.example:{web.port}/redirect?to={quote(target, safe='')}")
        assert reason is not None, f"redirect to {target} got through"
        assert web.calls["pages"] == before + 1  # only the redirecting page itself was fetched


def test_the_attempt_count():
    assert len(LITERAL_ATTEMPTS) + len(NAME_ATTEMPTS) + len(REDIRECT_TARGETS) >= 50


def test_no_provider_is_a_named_failure():
    with pytest.raises(NoSearchProvider, match="none configured"):
        asyncio.run(WebLayer(Settings()).search("x"))
