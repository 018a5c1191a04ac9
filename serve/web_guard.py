"""The one guard every web fetch passes (a service that fetches arbitrary URLs must not become a
door into its own network).

http/https only; the host is resolved once and the connection pinned to the checked address (no
second DNS answer between check and connect); private, loopback, link-local (cloud metadata),
multicast, reserved, ULA and IPv4-mapped addresses are refused unless an allowed network names
them, and so are Teredo addresses and the IPv4 address a 6to4 or NAT64 address carries; every
redirect is checked again; size and time are capped, the size after decompression (a gzip page
is inflated only up to the limit). Fetched text is data: callers never put it into a system
message.
"""
from __future__ import annotations

import asyncio
import ipaddress
import socket
import zlib
from dataclasses import dataclass, field
from typing import Awaitable, Callable
from urllib.parse import urljoin, urlsplit

import httpcore
import httpx

from core.errors import RefusedError

Resolver = Callable[[str, int], Awaitable[list[str]]]


class FetchRefused(RefusedError, ValueError):
    """The URL or one of its redirects may not be fetched; the message says why."""


async def system_resolver(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({i[4][0] for i in infos})


_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def address_refusal(addr: str, allowed: list[ipaddress._BaseNetwork]) -> str | None:
    """Why this address may not be reached, or None when it may."""
    ip = ipaddress.ip_address(addr.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return f"IPv4-mapped address {ip}"
    if any(ip in net for net in allowed):
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.teredo is not None:
            return f"Teredo address {ip}"
        inner = ip.sixtofour or (ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) if ip in _NAT64 else None)
        why = inner is not None and address_refusal(str(inner), allowed)
        if why:
            return f"{'6to4' if ip.sixtofour else 'NAT64'} address {ip} that carries a {why}"
    for flag, why in (("is_loopback", "loopback"), ("is_link_local", "link-local (metadata)"),
                      ("is_multicast", "multicast"), ("is_reserved", "reserved"), ("is_unspecified", "unspecified"),
                      ("is_private", "private")):
        if getattr(ip, flag):
            return f"{why} address {ip}"
    if not ip.is_global:
        return f"non-global address {ip}"
    return None


class _PinnedBackend(httpcore.AsyncNetworkBackend):
    """Connects a hostname to the address the guard checked, whatever DNS says now."""

    def __init__(self, pins: dict[str, str]):
        self.pins = pins
        self.inner = httpcore.AnyIOBackend()

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        pinned = self.pins.get(host)
        if pinned is None:
            raise FetchRefused(f"connection to unchecked host {host}")
        return await self.inner.connect_tcp(pinned, port, timeout=timeout, local_address=local_address,
                                            socket_options=socket_options)

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise FetchRefused("unix sockets are never fetched")

    async def sleep(self, seconds):
        await self.inner.sleep(seconds)


@dataclass
class FetchResult:
    url: str
    status: int
    content_type: str
    body: bytes
    truncated: bool
    redirects: list[str] = field(default_factory=list)


class Inflater:
    """A response body's bytes as sent, decoded (gzip, deflate, or none) to at most `limit` + 1
    bytes in all, however far the sent bytes would inflate."""

    def __init__(self, encoding: str, limit: int):
        enc = encoding.strip().lower()
        if enc in ("", "identity"):
            self._d = None
        elif enc in ("gzip", "x-gzip", "deflate"):
            self._d = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib, by the header
        else:
            raise FetchRefused(f"content encoding {encoding!r} is not accepted (gzip, deflate)")
        self._left = limit + 1

    def feed(self, raw: bytes) -> bytes:
        if self._left <= 0:
            return b""
        try:
            out = raw if self._d is None else self._d.decompress(raw, self._left)
        except zlib.error as e:
            raise FetchRefused(f"the compressed body does not decode: {e}") from e
        out = out[:self._left]
        self._left -= len(out)
        return out


@dataclass
class WebGuard:
    timeout_s: float = 10.0
    max_bytes: int = 2_000_000
    max_redirects: int = 5
    allowed_networks: list[str] = field(default_factory=list)
    resolver: Resolver = system_resolver

    def __post_init__(self):
        self._allowed = [ipaddress.ip_network(n, strict=False) for n in self.allowed_networks]

    async def check(self, url: str) -> tuple[str, str, int]:
        """(host, pinned address, port) for a URL that may be fetched; FetchRefused otherwise."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise FetchRefused(f"scheme {parts.scheme or '(none)'} is not http/https")
        if not parts.hostname:
            raise FetchRefused("URL without host")
        if parts.username or parts.password:
            raise FetchRefused("credentials in the URL")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        host = parts.hostname
        try:
            literal = ipaddress.ip_address(host)
            addrs = [str(literal)]
        except ValueError:
            try:
                addrs = await self.resolver(host.rstrip("."), port)  # "localhost." is localhost
            except OSError as e:
                raise FetchRefused(f"host {host} does not resolve ({e})") from e
        if not addrs:
            raise FetchRefused(f"host {host} does not resolve")
        for a in addrs:  # every answer must be acceptable, or one could be picked later
            why = address_refusal(a, self._allowed)
            if why:
                raise FetchRefused(f"{host} resolves to a {why}")
        return host, addrs[0], port

    async def fetch(self, url: str, *, accept: str = "text/html,application/xhtml+xml,text/plain,*/*;q=0.5") -> FetchResult:
        redirects: list[str] = []
        current = url
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        for _ in range(self.max_redirects + 1):
            host, addr, _port = await self.check(current)
            transport = httpx.AsyncHTTPTransport(retries=0)
            transport._pool._network_backend = _PinnedBackend({host: addr})  # pin the checked address
            remaining = max(0.1, deadline - asyncio.get_running_loop().time())
            async with httpx.AsyncClient(transport=transport, timeout=remaining, follow_redirects=False,
                                         headers={"User-Agent": "Novaberg/0.1", "Accept": accept,
                                                  "Accept-Encoding": "gzip, deflate"}) as client:
                try:
                    async with asyncio.timeout(remaining):
                        async with client.stream("GET", current) as r:
                            if r.is_redirect:
                                loc = r.headers.get("location")
                                if not loc:
                                    raise FetchRefused("redirect without a location")
                                redirects.append(current)
                                current = urljoin(current, loc)
                                continue
                            body, truncated = bytearray(), False
                            inflate = Inflater(r.headers.get("content-encoding", ""), self.max_bytes)
                            async for chunk in r.aiter_raw():
                                body += inflate.feed(chunk)
                                if len(body) > self.max_bytes:
                                    body, truncated = body[: self.max_bytes], True
                                    break
                            return FetchResult(str(r.url), r.status_code, r.headers.get("content-type", ""),
                                               bytes(body), truncated, redirects)
                except TimeoutError as e:
                    raise FetchRefused(f"no answer within {self.timeout_s:.0f}s") from e
                except httpx.RemoteProtocolError as e:  # e.g. a redirect location httpx cannot parse
                    raise FetchRefused(f"unusable answer: {e}") from e
        raise FetchRefused(f"more than {self.max_redirects} redirects")
