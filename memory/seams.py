"""Where the libraries' errors become the project's: one table from a driver's exception to a
family of core/errors.py, applied where the driver is called (as httpx maps httpcore's
exceptions to its own in its transport), so every decision on an error is an `isinstance` check
on a family.

- Redis (`redis.exceptions.ConnectionError`, `TimeoutError`, `BusyLoadingError`), psycopg and its
  pool (`OperationalError`, `InterfaceError`, `PoolTimeout`, `PoolClosed`) and a socket's refused,
  reset or timed-out connection: `StoreUnavailable`.
- Ray's actor errors (`ActorDiedError`, `ActorUnavailableError`): `ReplicaGone`.

`store_calls()` wraps a call to a store (the Redis client of `memory.redis_client`, a connection
of the pool `memory.pg.open_pool`); `service_calls()` wraps a call to a deployment through its
handle (the model, the store deployment, whose own outages its pool mapped already): only Ray's
errors are its. Each raises the
family from the original (`__cause__`). An error that crossed a process unmapped (pickled by Ray,
its cause left behind) is mapped by the same table when a decision asks (`caused_by`).

The drivers are imported when an error is first mapped: a module that imports this one pulls in
no driver."""
from __future__ import annotations

from contextlib import contextmanager
from functools import cache
from typing import Iterator

from core.errors import NovabergError, ReplicaGone, StoreUnavailable


@cache
def _store_errors() -> tuple[type[BaseException], ...]:
    import psycopg
    from redis import exceptions as redis_errors

    # psycopg_pool's PoolTimeout and PoolClosed derive from OperationalError, Redis's BusyLoadingError
    # from its ConnectionError, the refused/reset/broken-pipe errors from the builtin ConnectionError
    return (psycopg.OperationalError, psycopg.InterfaceError, redis_errors.ConnectionError,
            redis_errors.TimeoutError, ConnectionError, TimeoutError)


@cache
def _replica_errors() -> tuple[type[BaseException], ...]:
    from ray import exceptions as ray_errors

    return (ray_errors.ActorDiedError, ray_errors.ActorUnavailableError)


def family(e: BaseException, *, stores: bool = True) -> BaseException:
    """The project's error for a library's `e` (its `__cause__` is `e`); `e` itself when it is the
    project's own or the table names it not. `stores=False`: Ray's errors only (a model call's
    timeout or lost connection is the model's, not a store's)."""
    if isinstance(e, NovabergError):
        return e
    if isinstance(e, _replica_errors()):
        mapped: BaseException = ReplicaGone(f"{type(e).__name__}: {e}")
    elif stores and isinstance(e, _store_errors()):
        mapped = StoreUnavailable(f"{type(e).__name__}: {e}")
    else:
        return e
    mapped.__cause__ = e
    return mapped


@contextmanager
def store_calls() -> Iterator[None]:
    """Around a call to Redis or Postgres: a store that is away raises
    `StoreUnavailable`, a replica that died `ReplicaGone`, each from the driver's error."""
    try:
        yield
    except Exception as e:
        mapped = family(e)
        if mapped is e:
            raise
        raise mapped from e


@contextmanager
def service_calls() -> Iterator[None]:
    """Around a call to a deployment through its handle (the model, the store deployment): a
    replica that died or cannot be reached raises `ReplicaGone` from Ray's error; every other error
    passes as it is (a model call's timeout is the model's, not a store's)."""
    try:
        yield
    except Exception as e:
        mapped = family(e, stores=False)
        if mapped is e:
            raise
        raise mapped from e


def causes(e: BaseException) -> Iterator[BaseException]:
    """The exception and its causes (a Ray task error carries the remote exception as `cause`, a
    failed node its own as `cause`; a mapped error the driver's as `__cause__`)."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [e]
    while stack:
        x = stack.pop()
        if not isinstance(x, BaseException) or id(x) in seen:
            continue
        seen.add(id(x))
        yield x
        stack += [x.__cause__, x.__context__, getattr(x, "cause", None)]


def caused_by(e: BaseException, families: type[BaseException] | tuple[type[BaseException], ...]) -> bool:
    """Whether `e` or one of its causes is of `families`, each mapped by the table first (an error
    that reached here from a process that did not map it)."""
    return any(isinstance(family(x), families) for x in causes(e))
