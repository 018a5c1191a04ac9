"""The spreading read's frame (seed 001 §4: `lzg_resonanz` — "Kontext-Rahmen (Anker-Anzahl,
Sprung-Tiefe, Cluster, Nova-Sektor) + Erinnerungen mit Pfad; Transport zum Formatter via
Reducer-Durchreiche"): the reducer hands it to the [GEDAECHTNIS] it formats; Nova's sector weighs
the spreading by the distance on Plutchik's wheel."""
import asyncio

from core.state import MemoryRecord, PairRecord, Resonanz, Stimulus, TurnState
from memory import lzg
from memory.config import MemoryConfig
from pipeline import vocab
from pipeline.nodes import reducer
from pipeline.runner import run_node
from tests.scripted_llm import ScriptedLLM, deps_for

RESONANZ = {"rahmen": {"anker_anzahl": 3, "sprung_tiefe": 2, "cluster": "feuerwerk", "nova_sektor": "freude"},
            "erinnerungen": [{"id": 1, "inhalt": "Bello war beim Tierarzt", "tiefe": 0},
                             {"id": 2, "inhalt": "Der Park im Regen", "tiefe": 1, "eingefallen_ueber": "Bello"}],
            "ids": [1, 2]}
ZEILE = "Rahmen der Erinnerungen: 3 Anker, Sprung-Tiefe 2, Landschaft feuerwerk, Sektor freude"


def _kontext(resonanz):
    state = TurnState(stimulus=Stimulus(user_id="u", character_id="nova", turn_id="t", user_prompt="Bello?"),
                      pair=PairRecord(character_name="Nova"),
                      memory=MemoryRecord(kzg=[{"inhalt": "Bello ist ein Beagle", "similarity": 0.8}],
                                          lzg_resonanz=resonanz))
    return asyncio.run(run_node(reducer.NODE, state, deps_for(ScriptedLLM())))["kontext"]


def test_the_frame_heads_the_memories_in_the_gedaechtnis_blocks():
    k = _kontext(RESONANZ)
    for block in (k.gedaechtnis_verfasser, k.gedaechtnis_thinker):
        lines = block.split("\n")
        assert lines == ["- (kzg) Bello ist ein Beagle", ZEILE, "- (erinnerung) Bello war beim Tierarzt",
                         "- (erinnerung) Der Park im Regen [Bello]"]
    # the fact check reads anchors, no spreading: no frame of a spreading read
    assert "Rahmen" not in k.gedaechtnis_tribunal


def test_a_read_that_recalled_nothing_has_no_frame_line():
    kalt = Resonanz.model_validate({"rahmen": {"cluster": "hafen", "kaltstart": True, "bester_kosinus": 0.2}})
    k = _kontext(kalt)
    assert "Rahmen" not in k.gedaechtnis_verfasser and k.gedaechtnis_verfasser == "- (kzg) Bello ist ein Beagle"
    # a read without Nova's sector names none
    ohne = Resonanz.model_validate({**RESONANZ, "rahmen": {**RESONANZ["rahmen"], "nova_sektor": None}})
    assert reducer.rahmen_zeile(ohne.rahmen) == ZEILE.removesuffix(", Sektor freude")


def test_the_sector_factor_follows_plutchiks_wheel():
    cfg = MemoryConfig()
    f = [round(lzg.sektor_faktor("freude", e, cfg), 6)
         for e in ("freude", "vertrauen", "angst", "ueberraschung", "traurigkeit", "ekel", "aerger", "erwartung")]
    assert f == [1.0, 0.9, 0.8, 0.7, 0.6, 0.7, 0.8, 0.9]
    assert lzg.sektor_faktor("aerger", "frustration", cfg) == 1.0  # an emotion within a sector
    assert lzg.sektor_faktor("freude", "zufriedenheit", cfg) == 1.0
    # a side without a sector colours nothing; damping 0 switches it off
    for nova, emotion in (("neutral", "angst"), (None, "angst"), ("freude", None), ("freude", "neutral"),
                          ("freude", "unbekannt")):
        assert lzg.sektor_faktor(nova, emotion, cfg) == 1.0
    assert lzg.sektor_faktor("freude", "traurigkeit", MemoryConfig(spreading_sector_damping=0)) == 1.0


def test_the_wheel_is_the_vocabularys():
    assert lzg.SEKTOREN == vocab.EMOTIONEN[:8]
    assert {e: lzg.EMOTION_SEKTOR.get(e, e) for e in vocab.EMOTIONEN if e != "neutral"} == {
        e: s for e, s in vocab.SEKTOR.items() if e != "neutral"}


def test_the_pair_actor_runs_the_enricher_without_the_store():
    import subprocess
    import sys

    # the pair actor runs the enricher and stays light: no Postgres driver comes with it
    out = subprocess.run([sys.executable, "-c", "import sys, actors.pair, pipeline.chains; print('psycopg' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
