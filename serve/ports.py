"""What the routers may use of the running ingress (`serve.ingress.Ingress`): `IngressPort`, the
type of a route's `ing: TheIngress` (serve/routes/common.py). The ingress class satisfies it
(tests/unit/test_ingress_port.py compares every member and its signature), so a router calls
only what the ingress has, with the arguments it takes."""
from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any, AsyncIterator, Awaitable, Callable, Protocol, TypeVar

from ray.actor import ActorHandle
from ray.serve.handle import DeploymentHandle

from core.bestand import Charakter
from core.settings import Settings
from core.wire import TurnFailure, TurnResult, TurnStreamEvent
from memory.clients import StoreOps
from memory.redis_client import StoreRedis
from serve.dashboard import DashboardLoop

T = TypeVar("T")


class IngressPort(Protocol):
    """The ingress replica as the routes see it: its settings and handles, authentication,
    admission, the pairs' actors, the characters it knows, erasure."""

    settings: Settings
    store: DeploymentHandle
    """The store deployment (its own calls: `ready`, `create_api_key`, `create_character`)."""
    llm: DeploymentHandle
    embedder: DeploymentHandle
    store_ops: StoreOps
    """The store's typed operations over the store deployment."""
    streams: dict[str, int]
    """Open event streams per user on this replica."""
    dashboard_loop: DashboardLoop

    # authentication
    async def principal(self, authorization: str | None) -> dict: ...

    async def operator(self, authorization: str | None) -> dict: ...

    def owner(self, principal: dict, user_id: str) -> None: ...

    async def revoke(self, api_key: str | None = None, user_id: str | None = None, alle: bool = False) -> None: ...

    # requests and admission
    def validate_text(self, text: str) -> str: ...

    async def redis_client(self) -> StoreRedis: ...

    def admitted(self, user_id: str, character_id: str,
                 ankunft: bool = False) -> AbstractAsyncContextManager[int | None]: ...

    # turns and the pairs' actors
    async def run_turn(self, user_id: str, character_id: str, text: str, turn_id: str, *, name: str | None = None,
                       received_at: datetime | None = None) -> TurnResult | TurnFailure: ...

    async def run_stream(self, user_id: str, character_id: str, text: str, turn_id: str, *, name: str | None = None,
                         received_at: datetime | None = None) -> AsyncIterator[TurnStreamEvent]: ...

    async def call(self, user_id: str, character_id: str, send: Callable[[Any], Awaitable[T]]) -> T: ...

    async def live_pair(self, user_id: str, character_id: str) -> ActorHandle | None: ...

    def forget(self, user_id: str, character_id: str) -> None: ...

    # characters
    async def known_character(self, character_id: str) -> None: ...

    async def character_or_404(self, character_id: str) -> Charakter: ...

    def remember_character(self, character_id: str) -> None: ...

    def forget_character(self, character_id: str) -> None: ...

    # erasure
    async def erase(self, user_id: str | None = None, character_id: str | None = None) -> dict[str, int]: ...
