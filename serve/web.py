"""The web layer as a deployment: search (Serper first when a key is set, SearXNG as fallback)
and page text (trafilatura, BeautifulSoup as fallback). Every fetch passes the WebGuard. Heavy
parsing stays here, out of the pair actors."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
from ray import serve

from core.errors import ServiceError
from core.names import WEB_DEPLOYMENT
from core.settings import WebSettings
from serve.web_guard import FetchRefused, WebGuard

log = logging.getLogger("novaberg.web")
MAX_HITS = 5
MAX_TEXT_CHARS = 8000


class NoSearchProvider(ServiceError, RuntimeError):
    pass


class PageUnavailable(ServiceError, RuntimeError):
    """A page could not be had: the guard refused its URL, the fetch failed, or the server answered
    an error status. `grund` says why in the words the thinker's tool hands the model (`HTTP 404`,
    `abgewiesen: …`); it is read as an attribute, which Ray's wrapper of a remote error hands on."""

    def __init__(self, grund: str, url: str = ""):
        super().__init__(grund, url)
        self.grund = grund
        self.url = url

    def __str__(self) -> str:
        return self.grund


def page_text(html: bytes, content_type: str) -> tuple[str, str]:
    """(text, extractor): trafilatura first, BeautifulSoup when it finds nothing."""
    if "html" not in content_type and not html.lstrip()[:15].lower().startswith((b"<!doctype", b"<html")):
        return html.decode("utf-8", errors="replace")[:MAX_TEXT_CHARS], "text"
    import trafilatura

    text = trafilatura.extract(html.decode("utf-8", errors="replace"), include_comments=False) or ""
    if text.strip():
        return text[:MAX_TEXT_CHARS], "trafilatura"
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(["script", "style", "noscript"]):
        tag.decompose()
    log.info("web: fallback beautifulsoup: trafilatura found no main text")
    return " ".join(soup.get_text(" ").split())[:MAX_TEXT_CHARS], "beautifulsoup"


class WebLayer:
    def __init__(self, settings: WebSettings, guard: WebGuard | None = None):
        self.settings = settings
        self.guard = guard or WebGuard(timeout_s=settings.web_timeout_s, max_bytes=settings.web_max_bytes,
                                       max_redirects=settings.web_max_redirects,
                                       allowed_networks=settings.web_allowed_networks)

    async def fetch(self, url: str) -> dict[str, Any]:
        """The page's text (`url`, `text`, `extraktor`, `gekuerzt`, `weiterleitungen`); a page that
        cannot be had raises `PageUnavailable` (from the guard's or httpx's error)."""
        try:
            res = await self.guard.fetch(url)
        except FetchRefused as e:
            log.warning("web: fetch refused for %s: %s", url, e)
            raise PageUnavailable(f"abgewiesen: {e}", url) from e
        except httpx.HTTPError as e:
            log.warning("web: fetch failed for %s: %s", url, e)
            raise PageUnavailable(f"{type(e).__name__}: {e}", url) from e
        if res.status >= 400:
            raise PageUnavailable(f"HTTP {res.status}", res.url)
        # parsing a page takes a while: on a thread, so the replica's loop keeps answering
        text, extractor = await asyncio.to_thread(page_text, res.body, res.content_type)
        return {"url": res.url, "text": text, "extraktor": extractor, "gekuerzt": res.truncated,
                "weiterleitungen": res.redirects}

    async def search(self, query: str) -> dict[str, Any]:
        """Hits (title, url, snippet) of the first provider that delivers; each failure named."""
        tried = []
        if self.settings.serper_api_key:
            try:
                return {"anbieter": "serper", "treffer": await self._serper(query), "versucht": tried}
            except Exception as e:
                tried.append(f"serper: {type(e).__name__}: {e}")
                log.warning("web: fallback searxng: serper failed (%s)", e)
        if self.settings.searxng_url:
            try:
                return {"anbieter": "searxng", "treffer": await self._searxng(query), "versucht": tried}
            except Exception as e:
                tried.append(f"searxng: {type(e).__name__}: {e}")
                log.warning("web: searxng failed (%s)", e)
        raise NoSearchProvider("no search provider delivered: " + ("; ".join(tried) or "none configured"))

    async def _serper(self, query: str) -> list[dict]:
        async with httpx.AsyncClient(timeout=self.settings.web_timeout_s) as c:
            r = await c.post(self.settings.serper_url, json={"q": query, "gl": "de", "hl": "de"},
                             headers={"X-API-KEY": self.settings.serper_api_key})
            r.raise_for_status()
            return [{"titel": h.get("title", ""), "url": h.get("link", ""), "snippet": h.get("snippet", "")}
                    for h in r.json().get("organic", [])[:MAX_HITS]]

    async def _searxng(self, query: str) -> list[dict]:
        # SearXNG is usually on the private network: it is the configured endpoint, not a fetched URL
        async with httpx.AsyncClient(timeout=self.settings.web_timeout_s) as c:
            r = await c.get(f"{self.settings.searxng_url.rstrip('/')}/search",
                            params={"q": query, "format": "json", "language": "de"})
            r.raise_for_status()
            return [{"titel": h.get("title", ""), "url": h.get("url", ""), "snippet": h.get("content", "")}
                    for h in r.json().get("results", [])[:MAX_HITS]]


@serve.deployment(name=WEB_DEPLOYMENT, max_ongoing_requests=64)
class WebDeployment:
    def __init__(self, settings: WebSettings):
        self.web = WebLayer(settings)

    async def fetch(self, url: str) -> dict[str, Any]:
        return await self.web.fetch(url)

    async def search(self, query: str) -> dict[str, Any]:
        return await self.web.search(query)
