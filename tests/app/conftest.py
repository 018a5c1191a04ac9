"""The app tier: the whole Serve application, real Ray, real stores, with the scripted engine
injected into the LLM deployment (tests/scripted_engine.py), so that API, auth, bad input,
idempotency, OpenAI shape, streaming, characters and dashboard are tested without model compute.
Every call answers after a fixed short latency, so a turn is under way long enough to be seen."""
import pytest
from ray import cloudpickle

from tests import scripted_engine
from tests.conftest import make_keys, start_system

# the engine class travels to the LLM replica by value: the replica cannot import tests/
cloudpickle.register_pickle_by_value(scripted_engine)

LATENCY_S = 0.2
UNSICHER = "[unsicher]"
"""A message carrying this marker gets a Thinker that answers in its reasoning alone, twice: the
seed's last resort, a second message as its own turn (seed 000 §3.5)."""


@pytest.fixture(scope="package")
def system(settings, migrated):
    engine = scripted_engine.ScriptedEngine.with_script(latency_s=LATENCY_S, wenn={
        UNSICHER: {"thinker": [["", "Ich bin mir nicht sicher, ob der Termin am Montag ist."]], "thinker_nachfass": [""]}})
    # the scripted engine is configured as a model that may answer in its reasoning alone
    settings = settings.model_copy(update={"thinker_reasoning_models": [*settings.thinker_reasoning_models,
                                                                          "scripted-engine"]})
    yield from start_system(settings, engine=engine)


@pytest.fixture(scope="package")
def keys(system):
    return make_keys()
