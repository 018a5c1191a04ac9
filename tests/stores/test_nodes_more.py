"""sachlage, erinnerungsanker, verfasser, perzeption_assistant, ei_calc_persist, salience,
praegung and aufgriff with a scripted LLM: their branches, fallbacks and decision entries."""
import asyncio
import json
from datetime import datetime, timezone

from pipeline.nodes import (aufgriff, ei_calc_persist, erinnerungsanker, perzeption_assistant, praegung, sachlage,
                            salience, verfasser)
from core.bestand import EpisodeReceipt
from core.state import (DraftRecord, EmotionRecord, HaltungRecord, HintergrundRecord, KontextRecord, MemoryRecord,
                            NovaPerzeptionRecord, PairRecord, PerzeptionRecord, PlanRecord, Stimulus, TurnState)
from tests.scripted_llm import ScriptedLLM, deps_for
from tests.stores.test_nodes_planner_agents import RecordingStore
from pipeline.runner import run_node


def _state(text="Hallo", herkunft="user", **records):
    stim = Stimulus(user_id="u", character_id="nova", turn_id="t9", herkunft=herkunft,
                    **({"user_prompt": text} if herkunft == "user" else {"eigener_gedanke": text}))
    return TurnState(stimulus=stim, pair=PairRecord(character_name="Nova"), **records)


def _d(deps):
    return [(r.entscheidung, r.outcome) for r in deps.trace.decisions()]


def test_sachlage_names_the_missing_web_provider():
    deps = deps_for(ScriptedLLM({"sachlage": ['{"objekte": [{"name": "Tritium", "behauptung": "ist radioaktiv"}]}']}))
    out = asyncio.run(run_node(sachlage.NODE, _state("Tritium ist radioaktiv, oder?"), deps))["sachlage"]
    assert out.objekte[0].name == "Tritium" and ("sachlage.recherche", "keine_suchmaschine") in _d(deps)
    deps = deps_for(ScriptedLLM({"sachlage": ['{"objekte": []}']}))
    assert asyncio.run(run_node(sachlage.NODE, _state(), deps))["sachlage"].objekte == []
    assert ("sachlage.recherche", "keine_objekte") in _d(deps)

    class _Web:
        configured = True

        async def search(self, q):
            assert q == "Tritium"
            return {"anbieter": "searxng", "treffer": [{"titel": "Tritium", "url": "https://x", "snippet": "H-3"}]}

    deps = deps_for(ScriptedLLM({"sachlage": ['{"objekte": [{"name": "Tritium"}]}']}), web=_Web())
    out = asyncio.run(run_node(sachlage.NODE, _state("Tritium?"), deps))["sachlage"]
    assert ("sachlage.recherche", "recherchiert") in _d(deps) and out.objekte[0].recherche[0]["snippet"] == "H-3"


def test_sachlage_searches_with_the_wording_filter(caplog):
    # seed 000 §4.4: "Die Sachlage sucht mit dem Wortlaut-Filter" — only hits that name the thing stay
    mod = {"titel": "Bmw 318 Mods for BeamNG.drive", "url": "https://m", "snippet": "Browse mods"}
    pulsar = {"titel": "PSR J1748-2446ad", "url": "https://p", "snippet": "Der schnellste bekannte Pulsar, ein "
                                                                          "Neutronenstern mit 716 Hz"}

    class _Web:
        configured = True

        def __init__(self, treffer):
            self.treffer, self.queries = treffer, []

        async def search(self, q):
            self.queries.append(q)
            return {"anbieter": "serper", "treffer": list(self.treffer)}

    def lauf(name, treffer):
        web = _Web(treffer)
        deps = deps_for(ScriptedLLM({"sachlage": [json.dumps({"objekte": [{"name": name}]})]}), web=web)
        out = asyncio.run(run_node(sachlage.NODE, _state(f"Was ist mit {name}?"), deps))["sachlage"]
        entry = next(r for r in deps.trace.decisions("sachlage.recherche"))
        return out.objekte[0], entry, web.queries

    caplog.set_level("INFO", logger="novaberg.node.sachlage")
    objekt, entry, queries = lauf("Neutronenstern-Rotation", [mod, pulsar])
    assert queries == ["Neutronenstern-Rotation"] and [h["url"] for h in objekt.recherche] == ["https://p"]
    assert entry.outcome == "recherchiert"
    assert (entry.inputs["treffer"], entry.inputs["nennen_die_sache"]) == (2, 1)
    # the log carries the name's length, not the name (logs quote the person only with log_utterances)
    assert "wording filter: 2 hits, 1 name <23 chars>" in caplog.text and "Neutronenstern" not in caplog.text
    # no hit names the thing: the research stays empty, and the Thinker's first search goes to the provider
    objekt, entry, _ = lauf("Kollaps", [mod, pulsar])
    assert objekt.recherche == [] and entry.outcome == "recherche_ohne_sache"
    # an ending is the same wording; a short word must stand whole
    assert sachlage.nennt_die_sache("Tritium", {"titel": "Eigenschaften des Tritiums", "snippet": ""})
    assert not sachlage.nennt_die_sache("ISS", {"titel": "Kiss", "snippet": "Band"})
    assert sachlage.nennt_die_sache("ISS", {"titel": "Die ISS", "snippet": ""})


def test_erinnerungsanker_writes_an_anchor_for_a_dated_experience():
    store = RecordingStore({"timeline.add": 77})
    deps = deps_for(ScriptedLLM({"erinnerungsanker": ['{"datiert": true, "datum": "2026-11-24", "titel": "Konzert"}']}),
                    store=store)
    out = asyncio.run(run_node(erinnerungsanker.NODE, _state("Letzten Dienstag war ich im Konzert"), deps))["anker"]
    assert ("erinnerungsanker.ergebnis", "geschrieben") in _d(deps) and out.geschrieben[0].id == 77
    op, args, kwargs = store.calls[0]
    assert op == "timeline.add" and args[2] == "Konzert" and args[3] == datetime(2026, 11, 24, 12, 0)
    assert kwargs == {"typ": "erinnerungs_anker", "turn_id": "t9", "schritt": "erinnerungsanker:0"}
    deps = deps_for(ScriptedLLM({"erinnerungsanker": ['{"datiert": true, "datum": "letzte Woche"}']}), store=RecordingStore())
    assert asyncio.run(run_node(erinnerungsanker.NODE, _state(), deps))["anker"].geschrieben == []
    assert ("erinnerungsanker.ergebnis", "datum_unlesbar") in _d(deps)
    deps = deps_for(ScriptedLLM())
    assert asyncio.run(run_node(erinnerungsanker.NODE, _state("gedanke", herkunft="eigener_impuls"), deps))["anker"].geschrieben == []
    assert ("erinnerungsanker.lauf", "kein_nutzerreiz") in _d(deps)


def test_verfasser_skips_on_a_context_cut_and_without_material():
    deps = deps_for(ScriptedLLM({"verfasser": ["Nova stellt fest: Bello ist ein Beagle."]}))
    base = dict(memory=MemoryRecord(), kontext=KontextRecord(gedaechtnis_verfasser="- (kzg) Bello ist ein Beagle"),
                haltung=HaltungRecord())
    out = asyncio.run(run_node(verfasser.NODE, _state(**base, plan=PlanRecord(task_context_cut=True)), deps))["verfasser"]
    assert out.inhalt == "" and ("verfasser.lauf", "uebersprungen_kontext_schnitt") in _d(deps)
    out = asyncio.run(run_node(verfasser.NODE, _state(**base), deps))["verfasser"]
    assert out.inhalt.startswith("Nova stellt fest")
    deps = deps_for(ScriptedLLM())
    out = asyncio.run(run_node(verfasser.NODE, _state(memory=MemoryRecord(), kontext=KontextRecord()), deps))
    assert ("verfasser.lauf", "ohne_material") in _d(deps)


def test_perzeption_assistant_falls_back_to_the_computed_state_and_persist_consolidates_it():
    deps = deps_for(ScriptedLLM({"perzeption_assistant": ["?"]}))
    st = _state(draft=DraftRecord(reply="Oh nein.", model="m"), emotion=EmotionRecord(nova_emotion="traurigkeit", nova_arousal=0.6))
    out = asyncio.run(run_node(perzeption_assistant.NODE, st, deps))["nova_perzeption"]
    assert (out.emotion, out.arousal) == ("traurigkeit", 0.6)
    store = RecordingStore()
    deps = deps_for(ScriptedLLM(), store=store)
    st = _state(emotion=EmotionRecord(nova_arousal=0.4, emotions_vektor="einbruch",
                                      emotions_verlauf=[{"emotion": "angst"}]),
                nova_perzeption=NovaPerzeptionRecord(emotion="traurigkeit", arousal=0.8))
    z = asyncio.run(run_node(ei_calc_persist.NODE, st, deps))["nova_zustand"]
    # the state goes with the turn's commit (the dispatcher), not in a store write of its own
    assert (z.emotion, z.arousal, z.vektor, z.verlauf) == ("traurigkeit", 0.6, "einbruch", [{"emotion": "angst"}])
    assert z.stand == st.stimulus.received_at and store.calls == []


def test_salience_scores_and_decides_the_writes():
    ans = '{"kern": "Bello ist krank", "intentionen": ["hilferuf"], "tags": ["hund"], "wichtigkeit": 0.9, "delegation": "Was hilft kranken Beagle?"}'
    deps = deps_for(ScriptedLLM({"salience": [ans]}))
    st = _state("Bello ist krank", draft=DraftRecord(reply="Das tut mir leid.", model="m"),
                perzeption=PerzeptionRecord(emotion="angst", arousal=0.8), memory=MemoryRecord(zielsog_roh=0.5))
    out = asyncio.run(run_node(salience.NODE, st, deps))["hintergrund"]
    entry = next(r for r in deps.trace.decisions("salience.schreiben"))
    assert entry.inputs["salienz"] == salience.score(0.9, 0.8, 0.5) and out.kern == "Bello ist krank"
    assert [w.art for w in out.pending_writes] == ["kzg", "delegation"]
    deps = deps_for(ScriptedLLM({"salience": ['{"wichtigkeit": 0.0}']}))
    st = _state("ok", draft=DraftRecord(reply="ok", model="m"), perzeption=PerzeptionRecord(arousal=0.1))
    out = asyncio.run(run_node(salience.NODE, st, deps))["hintergrund"]
    assert out.pending_writes == [] and ("salience.schreiben", "nichts") in _d(deps)


class _Embedder:
    async def embed(self, trace, text):
        return [1.0] + [0.0] * 383


def test_praegung_imprints_and_links_to_the_resonating_anchors():
    store = RecordingStore({"lzg.knoten_der_quelle": [], "lzg.episode_schreiben": EpisodeReceipt(
        neu=True, ids=[99, 100, 101], episode=[99, 100], verdichtungen=[101], anschluss=None, resonanz=[5, 6])})
    deps = deps_for(ScriptedLLM({"praegung": ['{"erinnerungen": [{"inhalt": "Bello war krank", "dimension": "erlebnis"}], '
                                              '"profil_mensch": "sorgt sich um Bello"}']}), store=store, embedder=_Embedder())
    st = _state("Bello ist krank", draft=DraftRecord(reply="Oh.", model="m"), hintergrund=HintergrundRecord(kern="Bello krank"),
                memory=MemoryRecord(lzg_resonanz={"ids": [5, 6], "erinnerungen": []}))
    asyncio.run(run_node(praegung.NODE, st, deps))
    ops = [c[0] for c in store.calls]
    # the profile's step first, then the nodes with every link in one write
    assert ops == ["lzg.knoten_der_quelle", "beziehung.profil_wachsen", "lzg.episode_schreiben"]
    # the turn is the nodes' source: what makes the imprint once per turn (tests/stores/test_exactly_once.py)
    assert store.calls[0][1] == ("u", "nova", "t9") and store.calls[2][1][:2] == ("u", "nova")
    ep = store.calls[2][1][2]
    assert ep.quelle == "t9" and [a.text for a in ep.aeusserungen] == ["Bello ist krank", "Oh."]
    assert [v.inhalt for v in ep.verdichtungen] == ["Bello war krank"] and ep.anschluss_s == praegung.SITZUNG_LUECKE_S
    # the distilled memories are linked to the resonating anchors in the same write
    assert (ep.resonanz, ep.resonanz_gewicht) == ([5, 6], praegung.SYNAPSE_GEWICHT)
    # the human's core grows by the sentence, once for the turn (tests/stores/test_nova_profile_loop.py)
    assert store.calls[1][1] == ("u", "nova", "praegung:t9", {"mensch_kern": "sorgt sich um Bello"},
                                 {"mensch_kern": praegung.MENSCH_KERN_SAETZE})
    assert ("praegung.ergebnis", "modell") in _d(deps)
    assert next(r for r in deps.trace.decisions(praegung.ENTSCHEIDUNG)).inputs["kanten"] == 2


def test_aufgriff_plans_an_impulse_and_skips_non_user_turns(stores):
    from redis.asyncio import Redis

    async def go():
        r = Redis.from_url(stores.redis_url)
        try:
            deps = deps_for(ScriptedLLM({"aufgriff": ['{"aufgreifen": true, "gedanke": "Wie geht es Bello?", "in_minuten": 30}']}),
                            redis=r)
            st = _state("Bello ist krank", hintergrund=HintergrundRecord(kern="Bello krank"))
            st.stimulus.user_id = f"auf-{id(st)}"
            assert await run_node(aufgriff.NODE, st, deps) == {}
            due = await r.zrange(aufgriff.DUE_KEY, 0, -1, withscores=True)
            mine = [json.loads(m) for m, _ in due if json.loads(m)["user_id"] == st.stimulus.user_id]
            assert mine and mine[0]["gedanke"] == "Wie geht es Bello?"
            assert ("aufgriff.plan", "geplant") in _d(deps)
            # the same turn's job delivered again plans nothing twice, and asks no model
            nochmal = ScriptedLLM()
            again = deps_for(nochmal, redis=r)
            await run_node(aufgriff.NODE, st, again)
            due = await r.zrange(aufgriff.DUE_KEY, 0, -1)
            assert len([m for m in due if json.loads(m)["user_id"] == st.stimulus.user_id]) == 1
            assert ("aufgriff.plan", "schon_geplant") in _d(again) and nochmal.calls == []
            deps2 = deps_for(ScriptedLLM(), redis=r)
            await run_node(aufgriff.NODE, _state("x", herkunft="eigener_impuls"), deps2)
            assert ("aufgriff.plan", "kein_nutzerreiz") in _d(deps2)
            # a replayed message an operator dated plans nothing, and asks no model
            modell = ScriptedLLM({"aufgriff": ['{"aufgreifen": true, "gedanke": "Und Bello?", "in_minuten": 5}']})
            deps3 = deps_for(modell, redis=r)
            alt = _state("Bello ist wieder gesund", hintergrund=HintergrundRecord(kern="Bello gesund"))
            alt.stimulus = alt.stimulus.model_copy(update={"user_id": f"auf-alt-{id(alt)}", "datiert": True,
                                                           "received_at": datetime(2023, 5, 8, 12, 0, tzinfo=timezone.utc)})
            await run_node(aufgriff.NODE, alt, deps3)
            assert ("aufgriff.plan", "datiert") in _d(deps3) and modell.calls == []
            assert not [m for m in await r.zrange(aufgriff.DUE_KEY, 0, -1)
                        if json.loads(m)["user_id"] == alt.stimulus.user_id]
        finally:
            await r.aclose()

    asyncio.run(go())


def test_the_pull_of_emotional_memories_moves_novas_persisted_state():
    from core.state import GravitationRecord

    def saved(gravitation):
        store = RecordingStore()
        deps = deps_for(ScriptedLLM(), store=store)
        st = _state(emotion=EmotionRecord(nova_arousal=0.4), gravitation=gravitation,
                    nova_perzeption=NovaPerzeptionRecord(emotion="freude", arousal=0.4))
        z = asyncio.run(run_node(ei_calc_persist.NODE, st, deps))["nova_zustand"]
        return (z.emotion, z.arousal), _d(deps)

    (emotion, arousal), d = saved(None)
    assert (emotion, arousal) == ("freude", 0.4) and ("ei_calc_persist.gravitation", "kein_zug") in d
    (emotion, arousal), d = saved(GravitationRecord(term=0.2, richtung="traurigkeit", punkte=1))
    assert emotion == "freude" and arousal > 0.4 and ("ei_calc_persist.gravitation", "erregung") in d
    (emotion, arousal), d = saved(GravitationRecord(term=0.8, richtung="traurigkeit", punkte=4))
    assert emotion == "traurigkeit" and ("ei_calc_persist.gravitation", "richtung") in d
    # the pull acted on this reply already (emotionale_gravitation): it is not applied a second time;
    # what is kept consolidates the reply as perceived with the pulled state it was written under
    (emotion, arousal), d = saved(GravitationRecord(term=0.8, richtung="traurigkeit", punkte=4,
                                                    emotion="traurigkeit", arousal=0.8))
    assert (emotion, arousal) == ("freude", 0.6) and ("ei_calc_persist.gravitation", "im_turn") in d


def test_the_thinker_knows_the_anchor_this_turn_wrote():
    from pipeline.nodes import thinker
    from core.state import Anker, AnkerRecord

    st = _state(anker=AnkerRecord(geschrieben=[Anker(id=3, datum="2026-11-24", titel="Konzert")]))
    assert "Erinnerungsanker eingetragen: Konzert (2026-11-24)" in thinker.verarbeitung(st)
    assert thinker.verarbeitung(_state()) is None
