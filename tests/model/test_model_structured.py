"""The embedded model held to each structured node's schema: every answer parses and validates
(without the schema SmolLM2 rarely writes JSON at all), and the Thinker's protocol grammar gives a
line the protocol reader understands. The backend alone, no Serve app."""
import asyncio

import pytest

from core.settings import Settings
from core.wire import ChatRequest
from pipeline.llm_json import engine_schema, first_json_object
from pipeline.thinker import protokoll
from serve.llm_backends import LlamaCppBackend
from tests.unit.test_structured_outputs import structured_nodes

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def backend():
    b = LlamaCppBackend(Settings(llm_threads=2, llm_ctx=1024))
    asyncio.run(b.start())
    return b


def _ask(backend, **extra):
    messages = [{"role": "system", "content": "Antworte knapp."},
                {"role": "user", "content": "Ich habe heute meinen Hund Bello im Park verloren und bin traurig."}]
    req = ChatRequest(messages=messages, temperature=0.2, max_tokens=160, **extra)
    return asyncio.run(backend.chat(req)).content


@pytest.mark.parametrize("node", sorted(structured_nodes()))
def test_every_structured_answer_validates(backend, node):
    model = structured_nodes()[node]
    text = _ask(backend, caller=node, response_schema=engine_schema(model))
    obj = first_json_object(text)
    assert obj is not None, text
    model.model_validate(obj)
    assert set(obj) == set(model.model_fields), text  # every field answered, none skipped


def test_the_thinker_answers_in_its_protocol(backend):
    text = _ask(backend, caller="thinker", protocol=protokoll.PROTOKOLL)
    assert protokoll.lesen(text).art in ("tool", "ok", "korrektur", "korrektur_ohne_text"), text



def test_a_set_seed_replays_a_run_s_answers():
    """Two fresh engines with the same seed answer the same calls in the same order alike (the
    prompt cache is part of the state: a call after another one is not the same call alone)."""
    calls = [ChatRequest(messages=[{"role": "user", "content": t}], temperature=1.2, max_tokens=24)
             for t in ("Erzaehl mir einen Satz ueber das Meer.", "Und einen ueber den Wald.")]

    def run(seed):
        b = LlamaCppBackend(Settings(llm_threads=2, llm_ctx=1024, llm_seed=seed))
        asyncio.run(b.start())
        return [asyncio.run(b.chat(c)).content for c in calls]

    first = run(7)
    assert run(7) == first and all(t.strip() for t in first)
    assert run(8) != first  # another seed, another run
