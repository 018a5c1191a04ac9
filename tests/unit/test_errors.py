"""One exception root (core/errors.py): every exception class the project defines derives from
NovabergError through one family, and the tree in core.errors' docstring names each class under
the family it derives from, with the module that defines it and its builtin second base."""
from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil
import re
from pathlib import Path

import pytest
from fastapi import FastAPI, HTTPException, Request
from fastapi.testclient import TestClient

from core import errors
from core.errors import NovabergError

PACKAGES = ("actors", "serve", "pipeline", "memory", "prompts", "cluster", "core")
ROOT = Path(errors.__file__).resolve().parents[1]


def _project_exceptions() -> tuple[dict[str, type[BaseException]], list[str], list[str]]:
    """Every exception class defined at module level in the project, by `module.QualName`, the
    modules that do not import (their classes would go unseen) and the modules walked."""
    names: list[str] = []
    broken: list[str] = []
    for top in PACKAGES:
        # walked by the package's folder, not by `import top`: under pytest, tests/cluster is found
        # as `cluster` before the project's package
        names.append(top)
        names += [m.name for m in pkgutil.walk_packages([str(ROOT / top)], top + ".", onerror=broken.append)]
    found: dict[str, type[BaseException]] = {}
    for name in names:
        try:
            mod = importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - a module that does not import hides its classes
            broken.append(f"{name}: {type(e).__name__}: {e}")
            continue
        for obj in vars(mod).values():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == name:
                found[f"{name}.{obj.__qualname__}"] = obj
    return found, broken, names


EXCEPTIONS, BROKEN, WALKED = _project_exceptions()
FAMILIES = {name: cls for name, cls in vars(errors).items()
            if inspect.isclass(cls) and issubclass(cls, NovabergError) and cls.__module__ == errors.__name__}


def _tree() -> list[tuple[int, str, str]]:
    """The docstring's tree as (depth, class name, the rest of its line); a description's second
    line (no branch in front of it) is passed over."""
    lines = errors.__doc__.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "NovabergError")
    base = lines[start].index("NovabergError")
    out = [(0, "NovabergError", "")]
    for line in lines[start + 1:]:
        if not line.strip():
            break
        m = re.match(r"^(?P<prefix>[ │]*)[├└]── (?P<name>\w+)(?P<rest>.*)$", line[base:])
        if m is None:
            assert re.match(r"^[ │]+\S", line[base:]), f"not a line of the tree: {line!r}"
            continue
        assert len(m["prefix"]) % 4 == 0, f"tree line out of step: {line!r}"
        out.append((len(m["prefix"]) // 4 + 1, m["name"], m["rest"].strip()))
    return out


TREE = _tree()


def _tree_parents() -> dict[str, str]:
    parents: dict[str, str] = {}
    stack: list[str] = []
    for depth, name, _ in TREE:
        del stack[depth:]
        parents[name] = stack[-1] if stack else ""
        stack.append(name)
    return parents


def test_every_project_module_imports():
    assert not BROKEN, f"project modules that do not import: {BROKEN}"


def test_the_walk_finds_the_project_exceptions():
    # a guard for the walk itself: these are defined in four packages, and it walks the project's
    # cluster package (cluster.runtime), not the tests' one
    assert not any(n.startswith("cluster.test_") for n in WALKED)
    assert "cluster.runtime" in WALKED
    for name in ("serve.llm_backends.LLMBackendError", "pipeline.runner.NodeFailed", "memory.ops.UnknownOperation",
                 "prompts.PromptError", "core.errors.NovabergError"):
        assert name in EXCEPTIONS


@pytest.mark.parametrize("name", sorted(EXCEPTIONS))
def test_every_project_exception_derives_from_the_root(name):
    assert issubclass(EXCEPTIONS[name], NovabergError), \
        f"{name} has no family: give it one of core/errors.py's families as its first base"


@pytest.mark.parametrize("name", sorted(n for n in EXCEPTIONS if not n.startswith("core.errors.")))
def test_every_project_exception_has_exactly_one_family_as_its_first_base(name):
    cls = EXCEPTIONS[name]
    families = [b for b in cls.__bases__ if issubclass(b, NovabergError)]
    assert len(families) == 1 and families[0] is cls.__bases__[0], cls.__bases__
    assert families[0] in FAMILIES.values() and families[0] is not NovabergError, \
        f"{name} derives from {families[0].__name__}, not from a family of core/errors.py"


def test_the_tree_names_every_family_under_its_parent():
    parents = _tree_parents()
    for name, cls in FAMILIES.items():
        assert name in parents, f"family {name} is missing from core.errors' docstring tree"
        if cls is not NovabergError:
            assert parents[name] == cls.__bases__[0].__name__, f"{name} stands under {parents[name]} in the tree"


def test_the_tree_names_every_class_under_its_family_with_its_module_and_builtin_base():
    rows = {name: rest for _, name, rest in TREE}
    parents = _tree_parents()
    assert len(rows) == len(TREE), "a class is named twice in the tree"
    for qual, cls in EXCEPTIONS.items():
        if cls.__module__ == errors.__name__:
            continue
        name = cls.__qualname__
        assert name in rows, f"{qual} is missing from core.errors' docstring tree"
        assert parents[name] == cls.__bases__[0].__name__, \
            f"{name} stands under {parents[name]} in the tree, but derives from {cls.__bases__[0].__name__}"
        assert rows[name].split(";")[0].strip() == cls.__module__, f"{name}: the tree names another module"
        for extra in cls.__bases__[1:]:
            assert extra.__name__ in rows[name], f"{name}: the tree does not name its second base {extra.__name__}"
    known = set(FAMILIES) | {c.__qualname__ for c in EXCEPTIONS.values()}
    assert not set(rows) - known, f"the tree names classes that do not exist: {sorted(set(rows) - known)}"


def test_the_builtin_bases_stay_so_callers_that_catch_them_still_do():
    from memory.ops import UnknownOperation
    from serve.charakterkarte import KarteFehler
    from serve.llm_backends import LLMBackendError

    assert issubclass(KarteFehler, ValueError)
    assert issubclass(LLMBackendError, RuntimeError)
    assert issubclass(UnknownOperation, KeyError)
    with pytest.raises(KeyError):
        from memory.ops import lookup
        lookup("keine.operation")


def test_llm_backend_error_keeps_transient_across_pickling_and_ray():
    from ray.exceptions import RayTaskError

    from serve.llm_backends import LLMBackendError

    back = pickle.loads(pickle.dumps(LLMBackendError("engine down", transient=True)))
    assert type(back) is LLMBackendError and back.transient is True and str(back) == "engine down"
    over_ray = RayTaskError("chat", "traceback", LLMBackendError("engine down", transient=True)).as_instanceof_cause()
    assert isinstance(over_ray, LLMBackendError) and isinstance(over_ray, NovabergError) and over_ray.transient


@pytest.mark.parametrize("name", sorted(n for n in EXCEPTIONS if not n.startswith("core.errors.")))
def test_ray_can_raise_each_class_as_itself(name):
    # Ray re-raises a remote error as a class derived from RayTaskError and the error's class
    from ray.exceptions import RayTaskError

    cls = EXCEPTIONS[name]
    args = {"_TooLarge": (10,), "DateiFehler": (422, "invalid_request", "x"), "NodeFailed": ("n", ValueError("x"))}
    cause = cls(*args.get(cls.__qualname__, ("x",)))
    dual = RayTaskError("f", "traceback", cause).as_instanceof_cause()
    assert isinstance(dual, cls) and isinstance(dual, RayTaskError)


def test_fastapi_answers_too_large_with_the_apps_http_exception_handler():
    from serve.body_limit import BodyLimit, _TooLarge
    from serve.ingress import _http_error

    app = FastAPI()
    app.add_exception_handler(HTTPException, _http_error)

    @app.post("/raise")
    async def _raise():
        raise _TooLarge(10)

    @app.post("/read")
    async def _read(request: Request):
        return {"bytes": len(await request.body())}

    guarded = BodyLimit(app, lambda path: 10)
    with TestClient(guarded) as client:
        r = client.post("/raise")
        assert r.status_code == 413
        assert r.json() == {"error": {"type": "too_large", "message": "body larger than 10 bytes"}}
        r = client.post("/read", content=iter([b"12345678", b"12345678"]))  # chunked: no declared length
        assert r.status_code == 413 and r.json()["error"]["type"] == "too_large"
        assert client.post("/read", content=b"1234").json() == {"bytes": 4}


@pytest.mark.parametrize("name", sorted(EXCEPTIONS))
def test_every_project_exception_survives_pickling_as_itself(name):
    """Errors cross Ray's process boundaries pickled: each comes back as its class, with its message."""
    cls = EXCEPTIONS[name]
    args = {"_TooLarge": (10,), "DateiFehler": (422, "invalid_request", "x"), "NodeFailed": ("n", ValueError("x"))}
    error = cls(*args.get(cls.__qualname__, ("x",)))
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is cls and str(back) == str(error) and vars(back).keys() >= vars(error).keys()
