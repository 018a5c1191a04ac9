"""The routers reach the ingress through `serve.ports.IngressPort` (`ing: TheIngress`): the real
ingress class has every member of it, each method with the same parameters, defaults, kinds and
types and the same way of being awaited, each attribute declared with its type and set by the
constructor, so the port cannot drift from the class."""
import ast
import inspect
import textwrap
import typing
from contextlib import AbstractAsyncContextManager
from typing import Annotated, get_args, get_origin, get_type_hints

from serve import ports
from serve.ports import IngressPort


def _ingress_class() -> type:
    from serve import ingress

    return next(c for c in ingress.Ingress.func_or_class.__mro__ if "principal" in vars(c))  # not Serve's wrapper


def _members(proto: type) -> tuple[set[str], set[str]]:
    """The protocol's attributes and methods (what `typing` checks for a runtime protocol)."""
    names = typing._get_protocol_attrs(proto)  # noqa: SLF001 - Python 3.11 has no public form
    methods = {n for n in names if callable(getattr(proto, n, None))}
    return names - methods, methods


def _set_by_init(cls: type) -> set[str]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls.__init__)))
    targets = [t for node in ast.walk(tree) if isinstance(node, (ast.Assign, ast.AnnAssign))
               for t in (node.targets if isinstance(node, ast.Assign) else [node.target])]
    flat = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
    return {e.attr for e in flat if isinstance(e, ast.Attribute) and getattr(e.value, "id", None) == "self"}


def _shape(fn) -> tuple:
    """What a caller relies on: the parameters (name, kind, default, type), the result's type and
    whether the call is awaited; an `asynccontextmanager` counts as a function returning its manager."""
    hints = {k: repr(v) for k, v in get_type_hints(fn).items()}
    returns = hints.pop("return", None)
    wrapped = getattr(fn, "__wrapped__", None)
    if wrapped is not None and inspect.isasyncgenfunction(wrapped):  # @asynccontextmanager
        yielded = get_args(get_type_hints(wrapped)["return"])[0]
        returns = repr(AbstractAsyncContextManager[yielded])
    params = [(p.name, p.kind, p.default, hints.get(p.name)) for p in inspect.signature(fn).parameters.values()]
    return params, returns, inspect.iscoroutinefunction(fn)


def test_the_port_names_what_the_routers_use():
    attrs, methods = _members(IngressPort)
    assert {"settings", "store_ops", "redis_client", "principal", "run_turn", "admitted", "call"} <= attrs | methods
    assert attrs and methods


def test_the_real_ingress_satisfies_the_port():
    cls = _ingress_class()
    attrs, methods = _members(IngressPort)
    missing = sorted(n for n in attrs | methods if not hasattr(cls, n) and n not in getattr(cls, "__annotations__", {}))
    assert missing == []
    declared, wanted = get_type_hints(cls), get_type_hints(IngressPort)
    assert {n: repr(declared.get(n)) for n in attrs} == {n: repr(wanted[n]) for n in attrs}
    assert attrs - _set_by_init(cls) == set()  # each declared attribute is really there
    for name in sorted(methods):
        assert _shape(getattr(cls, name)) == _shape(getattr(IngressPort, name)), name


def test_the_routes_are_handed_the_port():
    from serve.routes import common

    assert get_origin(common.TheIngress) is Annotated and get_args(common.TheIngress)[0] is IngressPort
    assert get_type_hints(common.ingress)["return"] is IngressPort
    assert ports.IngressPort is IngressPort


def test_the_routers_use_only_what_the_port_names():
    from pathlib import Path

    import serve.routes

    attrs, methods = _members(IngressPort)
    used: dict[str, set[str]] = {}
    files = [*Path(serve.routes.__file__).parent.glob("*.py"), Path(ports.__file__).with_name("schwere_ops.py")]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ing":
                used.setdefault(node.attr, set()).add(path.name)
    assert {n: sorted(f) for n, f in used.items() if n not in attrs | methods} == {}
