"""The project's exceptions: one root, a few families, each error class under one family.

Every exception the project defines derives from `NovabergError`, so `except NovabergError` catches
what the project raises and nothing a library raises. A family says what went wrong in which part
of the system; the class under it says exactly what. Many classes keep their old builtin base as a
second base (`ValueError`, `RuntimeError`, `KeyError`, FastAPI's `HTTPException`), because callers
and libraries catch the builtin: a class is an instance of both.

The tree (a class, the module it is defined in, its builtin second base):

    NovabergError
    ├── ConfigError                 a setting, a model reference or a prompt file names nothing usable
    │   ├── ModellFehler            serve.modelle; RuntimeError
    │   ├── UnsafeRedis             memory.embedded; RuntimeError
    │   └── PromptError             prompts; ValueError
    ├── InputError                  a client's request, an uploaded file, a card or an import file
    │   │                           cannot be read or taken: the client's mistake, answered with a 4xx
    │   ├── KarteFehler             serve.charakterkarte; ValueError
    │   ├── DateiFehler             serve.dateien; ValueError (carries its HTTP status and error type)
    │   ├── ParseTimeout            serve.parse_worker; TimeoutError (a parser process killed at its time)
    │   ├── ParseFailed             serve.parse_worker; ValueError (a parser process failed on the bytes)
    │   ├── ImportFormatError       memory.importer; ValueError
    │   └── CharacterExists         memory.charaktere; ValueError
    ├── RefusedError                a guard or a limit says no to something well-formed: a URL that
    │   │                           may not be fetched, a body too large, one instruction too many
    │   ├── FetchRefused            serve.web_guard; ValueError
    │   ├── _TooLarge               serve.body_limit; fastapi.HTTPException (413)
    │   ├── ParserBusy              serve.parse_worker; RuntimeError (every parser process stayed busy)
    │   ├── TooManyInstructions     memory.beziehung; ValueError
    │   └── NutzerGeloescht         memory.erasure; RuntimeError (a write for a user whose erasure began)
    ├── StoreError                  the memory stores (Postgres, Redis) hold or are asked something
    │   │                           they cannot serve
    │   ├── SchemaMismatch          memory.migrate; RuntimeError
    │   ├── SessionDefect           pipeline.nodes.enricher; RuntimeError
    │   └── UnknownOperation        memory.ops; KeyError
    ├── OutageError                 something the work needs is away right now (a store, a process): no
    │   │                           fault of the work's; it waits, or is asked again, and is not counted
    │   ├── StoreUnavailable        Postgres or Redis refused, timed out, lost the connection or is still
    │   │                           loading (memory.seams maps the drivers' errors to it)
    │   ├── ReplicaGone             the process a call went to died or cannot be reached (Ray's actor
    │   │                           errors, mapped by memory.seams)
    │   └── FollowUpWaits           actors.background; RuntimeError (a self-trigger's follow-up failed for an outage)
    ├── ServiceError                a service the project calls did not deliver
    │   ├── NoSearchProvider        serve.web; RuntimeError
    │   ├── PageUnavailable         serve.web; RuntimeError (a page could not be fetched; `grund` says why)
    │   ├── PairSuperseded          core.wire; RuntimeError (the process serves the pair no more)
    │   ├── JobTooNew               core.wire; RuntimeError (an outbox job of a newer release waits for its worker)
    │   └── EngineError             the model engine failed a call, or its answer cannot be used
    │       ├── LLMBackendError     serve.llm_backends; RuntimeError (`transient`: worth a retry)
    │       ├── ModelUnavailable    a background job's model is away: the job waits for it alone
    │       │   └── ModelAway       pipeline.llm_json; RuntimeError (a background chain's model call found it away)
    │       └── NichtEndlich        pipeline.llm_json; ValueError
    └── ChainError                  a node broke its contract with the chain runner, or failed
        ├── NodeDeclarationError    pipeline.node; ValueError (a node's declaration, at import)
        ├── NodeContractError       pipeline.runner; RuntimeError
        ├── NodeFailed              pipeline.runner; RuntimeError (carries `node` and `cause`)
        └── FollowUpFailed          actors.background; RuntimeError (a self-trigger's follow-up, delivered again)

A family is defined here; a class under it is defined beside the code that raises it, in the module
named. A library's exception is mapped to a family once, where the library is called (as httpx maps
httpcore's): `memory.seams` maps the Redis, psycopg and Ray errors that say a store or a process is
away to `StoreUnavailable` and `ReplicaGone`, raised from the original; a decision on an error is an
`isinstance` check on a family, never a test of a class's name. A new exception class takes its family as its first base (tests/unit/test_errors.py fails
for a class outside the tree, or one the tree above does not name under its family).

This module is the ground floor: it imports nothing of the project, and nothing heavy.
"""
from __future__ import annotations

__all__ = [
    "NovabergError", "ConfigError", "InputError", "RefusedError", "StoreError", "ServiceError",
    "EngineError", "ChainError", "OutageError", "StoreUnavailable", "ReplicaGone", "ModelUnavailable",
]


class NovabergError(Exception):
    """The root of every exception the project defines."""


class ConfigError(NovabergError):
    """A setting, a model reference or a prompt file names nothing usable; the message says what to set."""


class InputError(NovabergError):
    """A client's request, an uploaded file, a card or an import file cannot be read or taken (4xx)."""


class RefusedError(NovabergError):
    """A guard or a limit says no to something well-formed (a URL, a body's size, an instruction)."""


class StoreError(NovabergError):
    """The memory stores (Postgres, Redis) hold or are asked something they cannot serve."""


class ServiceError(NovabergError):
    """A service the project calls (a search provider, the model engine) did not deliver."""


class EngineError(ServiceError):
    """The model engine failed a call, or its answer cannot be used."""


class ModelUnavailable(EngineError):
    """A background job's model is away: the job waits for it alone (the outbox keeps it pending
    while the jobs behind it go on), instead of a default standing in."""


class OutageError(NovabergError):
    """Something the work needs is away right now (a store, a process): no fault of the work's.
    An outbox job waits uncounted, a request is answered 503, a model call is asked again."""


class StoreUnavailable(OutageError):
    """Postgres or Redis refused, timed out, lost the connection or is still loading its data
    (`memory.seams` raises it from the driver's error)."""


class ReplicaGone(OutageError):
    """The process a call went to died or cannot be reached (Ray's actor errors, mapped by
    `memory.seams`): Serve routes a repeat to a live replica."""


class ChainError(NovabergError):
    """A node broke its contract with the chain runner, or failed while it ran."""
