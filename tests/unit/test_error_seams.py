"""Errors are mapped once at each seam (memory/seams.py), as httpx maps httpcore's: a Redis,
psycopg or Ray error that says a store or a process is away arrives as a family of core/errors.py
(`StoreUnavailable`, `ReplicaGone`) with the driver's error as its `__cause__`, and every decision
on an error is an `isinstance` check; no module outside tests/ and bench/ decides on an exception
by its class's name."""
from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path

import psycopg
import pytest
from psycopg_pool import PoolTimeout
from ray.exceptions import ActorDiedError, ActorUnavailableError, RayTaskError
from redis.exceptions import BusyLoadingError, ConnectionError as RedisConnectionError, ResponseError, WatchError

from core.errors import ModelUnavailable, OutageError, ReplicaGone, StoreUnavailable
from memory import erasure, outbox, seams

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("actors", "serve", "pipeline", "memory", "core", "cluster", "prompts")
EXCEPTION_NAME = re.compile(r"^[A-Z]\w*(Error|Exception|Exit|Interrupt|Warning|Away|Gone|Geloescht|Superseded|Waits)$")


def _string_names(node: ast.AST, constants: dict[str, set[str]]) -> set[str]:
    """The strings a compared operand stands for: a literal, a collection of literals
    (`frozenset({...})` too), or a module-level name bound to one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Set, ast.Tuple, ast.List)):
        return {s for e in node.elts for s in _string_names(e, constants)}
    if isinstance(node, ast.Call) and node.args and getattr(node.func, "id", "") in ("frozenset", "set", "tuple"):
        return _string_names(node.args[0], constants)
    if isinstance(node, ast.Name):
        return constants.get(node.id, set())
    return set()


def _mro_names(tree: ast.AST) -> set[str]:
    """Names bound by a comprehension or loop over something that walks a class's `__mro__`."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.comprehension, ast.For, ast.AsyncFor)) and any(
                isinstance(x, ast.Attribute) and x.attr == "__mro__" for x in ast.walk(node.iter)):
            out |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
    return out


def name_decisions(source: str) -> list[str]:
    """The comparisons in `source` that decide on an exception by its class's name: `==`, `!=`,
    `in`, `not in` over `X.__name__` (or `__qualname__`) where X is `type(...)`, `....__class__`,
    a class out of a `__mro__`, or where the other side names an exception class by a string."""
    tree = ast.parse(source)
    constants = {t.id: _string_names(n.value, {}) for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                 for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)
                 and n.value is not None}
    mro = _mro_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        named = [x.value for o in operands for x in ast.walk(o)
                 if isinstance(x, ast.Attribute) and x.attr in ("__name__", "__qualname__")]
        if not named:
            continue
        of_a_class = any((isinstance(v, ast.Call) and getattr(v.func, "id", "") == "type")
                         or (isinstance(v, ast.Attribute) and v.attr == "__class__")
                         or (isinstance(v, ast.Name) and v.id in mro) for v in named)
        strings = {s for o in operands for s in _string_names(o, constants)}
        if of_a_class or any(EXCEPTION_NAME.match(s) for s in strings):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_decides_on_an_exception_by_its_class_name():
    offenders = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            offenders += [f"{path.relative_to(ROOT)} {hit}" for hit in name_decisions(path.read_text())]
    assert not offenders, "decide with isinstance on a family of core/errors.py (memory/seams.py maps the " \
                          "drivers' errors), not by a class's name:\n" + "\n".join(offenders)


@pytest.mark.parametrize("source", [
    'def f(e):\n    return type(e).__name__ == "ModelAway"\n',
    'OUTAGES = frozenset({"OperationalError", "ConnectionError"})\n'
    'def f(x):\n    return any(c.__name__ in OUTAGES for c in type(x).__mro__)\n',
    'def f(e, causes):\n    return any(c.__name__ == "NutzerGeloescht" for x in causes(e) for c in type(x).__mro__)\n',
    'def f(e):\n    return e.__class__.__name__ != "ActorDiedError"\n',
    'def f(cls):\n    return cls.__name__ in ("PoolTimeout", "BusyLoadingError")\n',
])
def test_the_check_finds_the_old_decisions_by_name(source):
    assert name_decisions(source)


@pytest.mark.parametrize("source", [
    'if __name__ == "__main__":\n    pass\n',
    'def f(factory):\n    return factory.__name__ != "<lambda>"\n',
    'def f(e):\n    return f"{type(e).__name__}: {e}"\n',
])
def test_the_check_leaves_other_uses_of_a_name(source):
    assert not name_decisions(source)


@pytest.mark.parametrize("error, family", [
    (RedisConnectionError("Error 111 connecting to redis.sock. Connection refused."), StoreUnavailable),
    (BusyLoadingError("Redis is loading the dataset in memory"), StoreUnavailable),
    (psycopg.OperationalError("connection to server on socket failed"), StoreUnavailable),
    (PoolTimeout("couldn't get a connection after 30.00 sec"), StoreUnavailable),
    (ConnectionRefusedError(111, "refused"), StoreUnavailable),
    (ActorDiedError(), ReplicaGone),
    (ActorUnavailableError("the replica is unreachable", b"\0" * 16), ReplicaGone),
])
def test_a_store_call_raises_the_family_from_the_drivers_error(error, family):
    with pytest.raises(family) as e:
        with seams.store_calls():
            raise error
    assert e.value.__cause__ is error and isinstance(e.value, OutageError) and outbox.is_outage(e.value)


@pytest.mark.parametrize("error", [ValueError("bad job"), ResponseError("NOGROUP"), WatchError("changed"),
                                   KeyError("turn")])
def test_what_no_table_names_passes_a_seam_as_itself(error):
    with pytest.raises(type(error)) as e:
        with seams.store_calls():
            raise error
    assert e.value is error and not outbox.is_outage(e.value)


def test_a_service_call_maps_rays_errors_only():
    died = ActorDiedError()
    with pytest.raises(ReplicaGone) as e:
        with seams.service_calls():
            raise died
    assert e.value.__cause__ is died
    late = TimeoutError("the model took too long")
    with pytest.raises(TimeoutError) as t:
        with seams.service_calls():
            raise late
    assert t.value is late  # a model call's timeout is the model's, not a store's


def test_the_families_come_through_rays_wrappers():
    """A remote error arrives as a class derived from RayTaskError and the error's class, or as a
    plain RayTaskError carrying it as `cause`; either way the family decides."""
    from pipeline.llm_json import ModelAway

    over_ray = RayTaskError("call", "traceback", StoreUnavailable("OperationalError: gone")).as_instanceof_cause()
    assert isinstance(over_ray, StoreUnavailable) and outbox.is_outage(over_ray)
    plain = RayTaskError("call", "traceback", RuntimeError("x"))
    plain.cause = psycopg.OperationalError("server closed the connection")  # a process that mapped nothing
    assert outbox.is_outage(plain)
    away = RayTaskError("call", "traceback", ModelAway("salience: the model is away")).as_instanceof_cause()
    assert isinstance(away, ModelUnavailable) and outbox.is_model_away(away) and not outbox.is_outage(away)
    refused = RayTaskError("call", "traceback", erasure.abgewiesen("u1", "a turn")).as_instanceof_cause()
    assert erasure.ist_geloescht(refused) and not outbox.is_outage(refused)


def test_the_model_client_is_a_seam_for_a_replica_that_died():
    from core.settings import Settings
    from pipeline.services import LLMClient
    from pipeline.trace import TurnTrace

    died = ActorDiedError()

    class _Chat:
        def remote(self, request):
            async def answer():
                raise died
            return answer()

    class _Handle:
        chat = _Chat()

        def options(self, **_):
            return self

    client = LLMClient(_Handle(), Settings(llm_retries=0, llm_retry_backoff_s=0.001))
    with pytest.raises(ReplicaGone) as e:
        asyncio.run(client.chat(TurnTrace("u", "c", "t"), "salience", [{"role": "user", "content": "Hallo"}]))
    assert e.value.__cause__ is died


def test_the_store_client_is_a_seam_for_the_store_deployment():
    from pipeline.services import StoreClient

    died = ActorDiedError()
    lost = psycopg.OperationalError("server closed the connection unexpectedly")

    class _Call:
        def remote(self, op, *args, **kwargs):
            async def answer():
                raise died
            return answer()

    class _Batch:
        def remote(self, calls):
            async def answer():
                return [(lost, None), (None, 2)]
            return answer()

    class _Handle:
        call = _Call()
        batch = _Batch()

    async def go():
        store = StoreClient(_Handle())
        with pytest.raises(ReplicaGone) as single:
            await store._run("x.y", (), {})
        both = await asyncio.gather(store._run("x.y", (), {}), store._run("x.z", (), {}), return_exceptions=True)
        return single.value, both

    single, (first, second) = asyncio.run(go())
    assert single.__cause__ is died
    assert isinstance(first, StoreUnavailable) and first.__cause__ is lost and second == 2


def test_startup_checks_raise_config_error(tmp_path):
    """A start that cannot go on for a setting says so as `ConfigError`, the family of settings."""
    from cluster import runtime
    from core.errors import ConfigError
    from core.settings import Settings
    from serve.app import app_builder

    with pytest.raises(ConfigError, match="DATABASE_URL and REDIS_URL"):
        app_builder({"database_url": None, "redis_url": None})
    attached = Settings(home=tmp_path, ray_address="ray://head.example:10001", database_url=None, redis_url=None)
    with pytest.raises(ConfigError, match="needs external stores"):
        runtime.start(attached)
    from serve.llm import _make_backend

    with pytest.raises(ConfigError, match="Ray Serve LLM server deployment"):
        _make_backend(Settings(home=tmp_path, llm_backend="vllm").llm, None)


def test_the_web_client_maps_the_web_deployments_page_error_once():
    """The web deployment raises `PageUnavailable` (no `{"ok": False}` dict crosses the process); its
    client hands the tools the page or the reason, also through Ray's wrapper of the remote error."""
    from core.settings import Settings
    from pipeline.services import WebClient
    from serve.web import PageUnavailable

    outcomes = {"http://a.example/": {"url": "http://a.example/", "text": "Seite", "extraktor": "text",
                                      "gekuerzt": False, "weiterleitungen": 0},
                "http://b.example/": RayTaskError("fetch", "traceback", PageUnavailable("HTTP 404", "http://b.example/"))
                .as_instanceof_cause(),
                "http://c.example/": PageUnavailable("abgewiesen: loopback", "http://c.example/")}

    class _Fetch:
        def remote(self, url):
            async def answer():
                if isinstance(outcomes[url], BaseException):
                    raise outcomes[url]
                return outcomes[url]
            return answer()

    class _Handle:
        fetch = _Fetch()

    client = WebClient(_Handle(), Settings())
    page = asyncio.run(client.fetch("http://a.example/"))
    assert page["ok"] and page["text"] == "Seite"
    assert asyncio.run(client.fetch("http://b.example/")) == {"url": "http://b.example/", "ok": False,
                                                              "fehler": "HTTP 404"}
    assert asyncio.run(client.fetch("http://c.example/"))["fehler"] == "abgewiesen: loopback"
