"""A background chain whose model is away waits for it instead of letting a default stand in
(fallback `hintergrund_wartet`): its job fails with `ModelAway`, the outbox keeps it pending and runs
it again, so what it would write (a KZG entry, a memory) is not lost. A turn's own chain goes on with
the node's default, as before; a timeout or a refusal is no outage, the default stands in."""
import asyncio
import logging

import pytest
from ray.exceptions import ActorUnavailableError

from memory.outbox import is_model_away
from pipeline.llm_json import ModelAway, ask
from pipeline.runner import NodeFailed
from tests.scripted_llm import ScriptedLLM, deps_for


class _Weg(ScriptedLLM):
    def __init__(self, fehler: BaseException):
        super().__init__()
        self.fehler = fehler

    async def chat(self, trace, node, messages, **kw):
        self.calls.append({"node": node})
        raise self.fehler


def _ask(chain: str, fehler: BaseException):
    deps = deps_for(_Weg(fehler))
    deps.trace.chain = chain
    return asyncio.run(ask(deps, "salience", {"character_name": "Nova", "mensch": "Hallo", "antwort": "Hi!"}))


def test_a_background_chain_waits_for_a_model_that_is_away(caplog):
    weg = ActorUnavailableError("the replica is unreachable", b"\0" * 16)
    for chain in ("background", "background_mensch"):
        with caplog.at_level(logging.WARNING), pytest.raises(ModelAway) as e:
            _ask(chain, weg)
        # as the runner hands it on, the outbox knows the job waits for its model: it stays pending
        assert e.value.__cause__ is weg and is_model_away(NodeFailed("salience", e.value))
    assert "fallback hintergrund_wartet" in caplog.text and "fallback aufruf_gescheitert" not in caplog.text


def test_a_turns_chain_and_a_failure_of_another_kind_take_the_default():
    weg = ActorUnavailableError("the replica is unreachable", b"\0" * 16)
    assert _ask("character", weg) == (None, "aufruf_gescheitert")
    assert _ask("human", weg) == (None, "aufruf_gescheitert")
    assert _ask("background", asyncio.TimeoutError()) == (None, "aufruf_gescheitert")
    assert _ask("background", RuntimeError("refused")) == (None, "aufruf_gescheitert")
