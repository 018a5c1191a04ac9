"""The chaos tier: the whole Serve application on the real stores, with the scripted engine
injected (as in tests/app), scripted so that every turn leaves side effects that can be counted:
one timeline anchor (erinnerungsanker, on the reply's path), one KZG entry (salience) and one LZG
node (praegung) from the background job. Outbox jobs left by a killed worker are re-claimed after
a few seconds here, so a short run drains in time."""
import pytest
from ray import cloudpickle

from tests import scripted_engine
from tests.conftest import make_keys, start_system

cloudpickle.register_pickle_by_value(scripted_engine)

LATENCY_S = 0.02
ANKER = '{"datiert": true, "datum": "2026-11-28", "titel": "Umzug nach Leipzig"}'
"""Every turn dates something: one anchor per turn (timeline, step `erinnerungsanker:0`)."""
SALIENZ = '{"kern": "Person B erzaehlt vom Umzug", "wichtigkeit": 1.0}'
"""Salience 0.5 + 0.3 * arousal ≥ 0.35: every turn writes one KZG entry (id `turn-{turn_id}`)."""
PRAEGUNG = '{"erinnerungen": [{"inhalt": "Person B zieht nach Leipzig", "dimension": "erlebnis"}]}'
"""One long-term node per turn, its source (`quelle`) the turn id."""
CLAIM_IDLE_MS = 3000
ADMISSION_LEASE_S = 20.0
"""A turn's place in the user's and pair's bounds, given back after this at the latest: an ingress
replica killed mid-turn (or Redis killed before the release) leaves its place taken until then."""


@pytest.fixture(scope="package")
def system(settings, migrated):
    engine = scripted_engine.ScriptedEngine.with_script(
        latency_s=LATENCY_S, script={"erinnerungsanker": [ANKER], "salience": [SALIENZ], "praegung": [PRAEGUNG]})
    settings = settings.model_copy(update={"outbox_claim_idle_ms": CLAIM_IDLE_MS,
                                           "admission_lease_s": ADMISSION_LEASE_S,
                                           # pairs stay alive through the run, so there is something to kill
                                           "pair_idle_timeout_s": 120.0})
    yield from start_system(settings, engine=engine)


@pytest.fixture(scope="package")
def keys(system):
    return make_keys()
