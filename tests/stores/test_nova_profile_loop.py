"""Nova grows (issue #10): her own profiles and the relationship in both directions are written by the
background node `selbstbild` from her turns, slowly and once per turn, and reach the next reply's
prompt — [PERSON A — WER SIE IST] and [ZWISCHEN BEIDEN], labelled both ways (seed 004 §3.1, §3.3)."""
import asyncio
import json
import logging

import pytest

from core.beziehung import ProfilGewachsen
from core.settings import Settings
from memory import beziehung, pg
from pipeline import vocab
from pipeline.nodes import db_zugriff, praegung, responder, selbstbild
from pipeline.nodes.dispatcher import BACKGROUND_RECORDS
from pipeline.chains import BACKGROUND_CHAIN, NODES
from pipeline.runner import run_node
from pipeline.services import Deps, Services
from core.state import (DraftRecord, HintergrundRecord, MemoryRecord, NovaPerzeptionRecord, PerzeptionRecord,
                            Stimulus, TurnState)
from pipeline.trace import TurnTrace
from prompts import PromptLibrary
from tests.conftest import new_pair, unit, with_pool
from tests.scripted_llm import PoolStore, ScriptedLLM

C = "nova"
NEU = "Die beiden kennen sich noch nicht lange."


class _Store(PoolStore):
    """The store deployment in-process: its memory operations and the pair load of db_zugriff."""

    async def load_pair(self, user_id, character_id):
        return await pg.load_pair(self.pool, user_id, character_id)


class _Embedder:
    async def embed(self, trace, text):
        return unit(0).tolist()


REDIS_URL: list[str] = []
"""The session's Redis (db_zugriff reads Nova's committed state there)."""


@pytest.fixture(autouse=True)
def _redis_url(stores):
    REDIS_URL[:] = [stores.redis_url]


def _deps(p, user, turn_id, llm, chain):
    from redis.asyncio import Redis

    services = Services(settings=Settings(), llm=llm, embedder=_Embedder(), store=_Store(p),
                        redis=Redis.from_url(REDIS_URL[0]), prompts=PromptLibrary())
    trace = TurnTrace(user, C, turn_id)
    trace.chain = chain
    return Deps(services, trace)


def _antwort(selbst="", thema="", sie="", er=""):
    return json.dumps({"selbst": selbst, "thema": thema, "sie_ueber_ihn": sie, "er_zu_ihr": er})


def _stimulus(user, turn_id, text, impulse=False):
    stim = dict(eigener_gedanke=text, herkunft="eigener_impuls") if impulse else dict(user_prompt=text)
    return Stimulus(user_id=user, character_id=C, turn_id=turn_id, **stim)


async def _background(p, user, turn_id, text, answers, *, reply="Erzaehl mir mehr.", dynamik="neutral",
                      impulse=False, nova=None):
    """One delivery of the turn's background job to selbstbild, with the pair as db_zugriff loaded it
    at the start of the turn; the records travel through the job as the dispatcher copies them
    (`nova`: how her reply was perceived, None for a job without it)."""
    start = TurnState(stimulus=_stimulus(user, turn_id, text, impulse))
    await run_node(db_zugriff.NODE, start, _deps(p, user, turn_id, ScriptedLLM(), "character"))
    llm = ScriptedLLM({"selbstbild": list(answers)})
    turn = TurnState(stimulus=start.stimulus, pair=start.pair, draft=DraftRecord(reply=reply, model="m"),
                     perzeption=PerzeptionRecord(beziehungs_dynamik=dynamik), nova_perzeption=nova)
    job = {r: getattr(turn, r).model_dump(mode="json") for r in BACKGROUND_RECORDS if getattr(turn, r) is not None}
    state = TurnState.model_validate(json.loads(json.dumps(job)))
    deps = _deps(p, user, turn_id, llm, "background")
    await run_node(selbstbild.NODE, state, deps)
    return deps, llm


async def _next_prompt(p, user, turn_id, text="Hallo Nova"):
    """The next turn's responder prompt, as the engine receives it: the profiles stand after the
    history, the system message keeps what is stable for the pair."""
    chat = ScriptedLLM({"responder": ["Schoen, dass du wieder da bist."]})
    deps = _deps(p, user, turn_id, chat, "character")
    state = TurnState(stimulus=_stimulus(user, turn_id, text), memory=MemoryRecord())
    await run_node(db_zugriff.NODE, state, deps)
    await run_node(responder.NODE, state, deps)
    [call] = [c for c in chat.calls if c["node"] == "responder"]
    system, user = (m["content"] for m in call["messages"])
    assert "[PERSON A — WER SIE IST]" not in system and "[ZWISCHEN BEIDEN]" not in system
    return user


async def _praegung(p, user, turn_id, answer):
    """One delivery of the turn's background job to praegung (the human's core)."""
    start = TurnState(stimulus=_stimulus(user, turn_id, "Ich habe Bienen."))
    await run_node(db_zugriff.NODE, start, _deps(p, user, turn_id, ScriptedLLM(), "character"))
    state = TurnState(stimulus=start.stimulus, pair=start.pair, draft=DraftRecord(reply="Wie schoen.", model="m"),
                      hintergrund=HintergrundRecord(kern="Bienen"), memory=MemoryRecord(),
                      perzeption=PerzeptionRecord())
    await run_node(praegung.NODE, state, _deps(p, user, turn_id, ScriptedLLM({"praegung": [answer]}), "background"))


def _block(text, name):
    start = text.index(name) + len(name)
    end = text.find("\n[", start)
    return text[start:end if end != -1 else len(text)].strip()


def _outcomes(deps, entscheidung=selbstbild.ENTSCHEIDUNG):
    return [r.outcome for r in deps.trace.decisions(entscheidung)]


def _grundton(deps):
    [row] = [r for r in deps.trace.decisions(selbstbild.GRUNDTON)]
    return row


def _on_pool(pool, fn):
    return asyncio.run(with_pool(pool, fn))


def test_after_some_turns_nova_and_the_relationship_have_grown_and_the_next_prompt_shows_both_directions(pool):
    turns = [
        ("t1", "Ich bin Imker und habe drei Voelker im Garten.",
         _antwort(selbst="Nova merkt, dass sie gern nachfragt.", thema="Nova denkt an Bienen.",
                  sie="Nova sieht in Person B einen geduldigen Imker.", er="Person B erzaehlt Nova offen von sich.")),
        ("t2", "Heute hat mich eine Biene gestochen, aber halb so wild.",
         _antwort(thema="Nova denkt an den Stich.", sie="Nova mag seinen trockenen Humor.")),
        ("t3", "Danke, dass du immer zuhoerst.",
         _antwort(er="Person B vertraut Nova und dankt ihr.")),
    ]

    async def go(p):
        user = new_pair("selbst-a")[0]
        before = await _next_prompt(p, user, "t0")
        runs = [await _background(p, user, tid, text, [answer]) for tid, text, answer in turns]
        return before, runs, await beziehung.profile(p, user, C), await _next_prompt(p, user, "t4")

    before, runs, prof, after = _on_pool(pool, go)
    assert _block(before, "[ZWISCHEN BEIDEN]") == NEU
    assert "Gewachsene Persoenlichkeit" not in _block(before, "[PERSON A — WER SIE IST]")
    assert [_outcomes(deps) for deps, _ in runs] == [["gewachsen"]] * 3
    # slow growth: a sentence a turn per profile, the newest last
    assert prof.nova_beziehung == "Nova sieht in Person B einen geduldigen Imker.\nNova mag seinen trockenen Humor."
    assert prof.mensch_beziehung == "Person B erzaehlt Nova offen von sich.\nPerson B vertraut Nova und dankt ihr."
    assert prof.nova_adaptiv == "Nova denkt an Bienen.\nNova denkt an den Stich."
    # the second turn's model saw what the first had grown, so it adds only what is new
    task = runs[1][1].calls[0]["messages"][1]["content"]
    bild = _block(task, "[BISHERIGES BILD]")
    assert "Wie Nova Person B sieht: Nova sieht in Person B einen geduldigen Imker." in bild
    zwischen = _block(after, "[ZWISCHEN BEIDEN]")
    assert zwischen.splitlines() == [
        "Wie Nova Person B sieht: Nova sieht in Person B einen geduldigen Imker. Nova mag seinen trockenen Humor.",
        "Wie Person B Nova begegnet: Person B erzaehlt Nova offen von sich. Person B vertraut Nova und dankt ihr."]
    wer = _block(after, "[PERSON A — WER SIE IST]")
    assert "Gewachsene Persoenlichkeit: Nova merkt, dass sie gern nachfragt." in wer
    assert "Was sie gerade beschaeftigt: Nova denkt an Bienen. Nova denkt an den Stich." in wer
    assert wer.startswith("Wie sie angelegt ist: Nova ist")  # what grew stands after how she was created
    assert BACKGROUND_CHAIN.index(NODES["selbstbild"]) > BACKGROUND_CHAIN.index(NODES["praegung"])


def test_growth_is_bounded_repeats_are_not_added_and_an_own_thought_leaves_his_side_alone(pool):
    async def go(p):
        user = new_pair("selbst-b")[0]
        for i in range(1, 6):
            await _background(p, user, f"t{i}", f"Nachricht {i}", [_antwort(thema=f"Nova denkt an Thema {i}.")])
        same, _ = await _background(p, user, "t6", "Nachricht 6", [_antwort(thema="nova denkt an thema 5")])
        own, _ = await _background(p, user, "t7", "Ob er die Bienen heute gesehen hat?", impulse=True,
                                   answers=[_antwort(sie="Nova denkt oft an ihn.", er="Person B vermisst Nova.")])
        return same, own, await beziehung.profile(p, user, C)

    same, own, prof = _on_pool(pool, go)
    assert prof.nova_adaptiv.splitlines() == [f"Nova denkt an Thema {i}." for i in (3, 4, 5)]  # oldest dropped
    assert _outcomes(same) == ["nichts_neu"]
    assert _outcomes(own) == ["gewachsen"]
    assert prof.nova_beziehung == "Nova denkt oft an ihn." and prof.mensch_beziehung == ""


def test_a_redelivered_job_writes_nothing_twice(pool):
    answer = _antwort(selbst="Nova wird mutiger.", sie="Nova sieht in Person B einen Freund.",
                      er="Person B sucht Novas Naehe.")

    async def go(p):
        user = new_pair("selbst-c")[0]
        first, _ = await _background(p, user, "t1", "Du bist mir wichtig.", [answer])
        after_first = await beziehung.profile(p, user, C)
        again, llm = await _background(p, user, "t1", "Du bist mir wichtig.", [answer])
        # two deliveries racing past the check: the step's record under the row lock admits one
        race = [await beziehung.profil_wachsen(p, user, C, "selbstbild:t9", {"nova_kern": "Nova lacht viel."},
                                               {"nova_kern": 5}) for _ in range(2)]
        # the human's core (praegung) grows once per turn the same way
        for _ in range(2):
            await _praegung(p, user, "t1", '{"erinnerungen": [], "profil_mensch": "Person B haelt Bienen."}')
        return after_first, again, llm, race, await beziehung.profile(p, user, C)

    after_first, again, llm, race, prof = _on_pool(pool, go)
    assert _outcomes(again) == ["schon_erledigt"] and llm.calls == []
    assert {k: getattr(prof, k) for k in ("nova_beziehung", "mensch_beziehung")} == \
        {k: getattr(after_first, k) for k in ("nova_beziehung", "mensch_beziehung")}
    assert prof.nova_beziehung == "Nova sieht in Person B einen Freund."
    assert race == [ProfilGewachsen(neu=True, gewachsen=["nova_kern"], wie_oft={}),
                    ProfilGewachsen(neu=False, gewachsen=[], wie_oft={})]
    assert prof.nova_kern == "Nova wird mutiger.\nNova lacht viel."
    assert prof.mensch_kern == "Person B haelt Bienen."


def test_an_unusable_answer_takes_the_named_fallback(pool, caplog):
    caplog.set_level(logging.WARNING, logger="novaberg.node.selbstbild")

    async def go(p):
        user = new_pair("selbst-d")[0]
        dyn, _ = await _background(p, user, "t1", "Du hilfst mir wirklich.", ["keine Ahnung"], dynamik="vertrauen")
        after_dyn = await beziehung.profile(p, user, C)
        none, _ = await _background(p, user, "t2", "Na gut.", ['{"selbst": '], dynamik="neutral")
        return dyn, after_dyn, none, await beziehung.profile(p, user, C), await _next_prompt(p, user, "t3")

    dyn, after_dyn, none, prof, prompt = _on_pool(pool, go)
    assert _outcomes(dyn) == ["dynamik_kein_json"]
    assert "fallback dynamik" in caplog.text
    # Person B's side grew from the perceived dynamic; Nova's side stays as it was
    assert after_dyn.mensch_beziehung == "Person B begegnet {{char}} mit Vertrauen."
    assert after_dyn.nova_beziehung == after_dyn.nova_kern == after_dyn.nova_adaptiv == ""
    assert _outcomes(none) == ["unveraendert_kein_json"] and "fallback unveraendert" in caplog.text
    assert prof == after_dyn
    assert _block(prompt, "[ZWISCHEN BEIDEN]") == "Wie Person B Nova begegnet: Person B begegnet Nova mit Vertrauen."
    # every relationship dynamic that says something has its sentence (pipeline/vocab.py keeps the set)
    assert set(selbstbild.DYNAMIK_SATZ) == set(vocab.BEZIEHUNGSDYNAMIK) - {"neutral"}


async def _zaehlung(p, user):
    async with p.connection() as conn:
        cur = await conn.execute("SELECT profil_zaehlung FROM pair_profiles WHERE user_id=%s AND character_id=%s",
                                 (user, C))
        return (await cur.fetchone())[0]


def test_her_base_mood_and_way_of_speaking_grow_from_how_her_replies_were_perceived(pool, caplog):
    """No model token for it: the emotion and style perceived in her replies are counted, and what
    recurs in half her recent turns becomes a sentence of nova_emotions / nova_intentionen."""
    caplog.set_level(logging.WARNING, logger="novaberg.node.selbstbild")
    gesehen = [("freude", "locker"), ("neutral", "locker"), ("freude", "fachlich"), ("freude", "locker"),
               ("traurigkeit", "locker"), ("freude", "locker"), ("freude", "locker")]

    async def go(p):
        user = new_pair("selbst-e")[0]
        before = await _next_prompt(p, user, "t0")
        runs = [(await _background(p, user, f"t{i}", f"Nachricht {i}", [_antwort()],
                                   nova=NovaPerzeptionRecord(emotion=e, arousal=0.6, stil=st)))[0]
                for i, (e, st) in enumerate(gesehen, start=1)]
        after_runs = await beziehung.profile(p, user, C), await _zaehlung(p, user)
        # a turn whose perception fell back to her computed state: its default style is not counted
        fallback, _ = await _background(p, user, "t8", "Nachricht 8", [_antwort()],
                                        nova=NovaPerzeptionRecord(emotion="freude", wahrgenommen=False))
        # a job from before the perception travelled with it counts nothing
        ohne, _ = await _background(p, user, "t9", "Nachricht 9", [_antwort()])
        return before, runs, after_runs, fallback, ohne, await _zaehlung(p, user), \
            await _next_prompt(p, user, "t10")

    before, runs, (prof, tally), fallback, ohne, tally_end, after = _on_pool(pool, go)
    wer_vorher = _block(before, "[PERSON A — WER SIE IST]")
    assert "Emotionale Grundstimmung" not in wer_vorher and "Ihre Art zu kommunizieren" not in wer_vorher
    grundton = [_grundton(deps) for deps in runs]
    assert [g.outcome for g in grundton] == ["gezaehlt"] * 4 + ["gewachsen"] * 2 + ["gezaehlt"]
    assert grundton[4].inputs["gewachsen"] == ["nova_intentionen"]  # "locker" the fourth time
    assert grundton[5].inputs["gewachsen"] == ["nova_emotions"]  # "freude" the fourth time
    assert grundton[5].inputs["wiederkehr"] == {"nova_emotions": 4, "nova_intentionen": 5}
    assert grundton[5].threshold == selbstbild.MINDESTENS == 4
    # the model's question is the same as before: the growth cost no token
    assert [_outcomes(deps) for deps in runs] == [["nichts_neu"]] * 7
    assert prof.nova_emotions == "{{char}} ist meist froehlich gestimmt."
    assert prof.nova_intentionen == "{{char}} spricht meist locker und ungezwungen."
    assert tally == {"nova_emotions": [e for e, _ in gesehen], "nova_intentionen": [s for _, s in gesehen]}
    assert _grundton(fallback).outcome == "gezaehlt" and "fallback stil_ungezaehlt" in caplog.text
    assert _grundton(ohne).outcome == "ohne_wahrnehmung" and "fallback ohne_wahrnehmung" in caplog.text
    # the fallback turn counted its emotion only; the window keeps her last eight
    assert tally_end == {"nova_emotions": [e for e, _ in gesehen] + ["freude"],
                         "nova_intentionen": [s for _, s in gesehen]}
    assert len(tally_end["nova_emotions"]) == selbstbild.FENSTER
    wer = _block(after, "[PERSON A — WER SIE IST]")
    assert "Emotionale Grundstimmung: Nova ist meist froehlich gestimmt." in wer
    assert "Ihre Art zu kommunizieren: Nova spricht meist locker und ungezwungen." in wer
    # every emotion that says something and every style has its sentence (pipeline/vocab.py keeps the sets)
    assert set(selbstbild.EMOTION_SATZ) == set(vocab.EMOTIONEN) - {"neutral"}
    assert set(selbstbild.STIL_SATZ) == set(vocab.SPRACHSTILE)


def test_the_base_mood_follows_what_recurs_now_bounded_and_once_per_turn(pool):
    async def go(p):
        user = new_pair("selbst-f")[0]
        n = 0
        for emotion in ["freude"] * 4 + ["traurigkeit"] * 4 + ["angst"] * 4 + ["aerger"] * 4:
            n += 1
            await _background(p, user, f"t{n}", f"Nachricht {n}", [_antwort()],
                              nova=NovaPerzeptionRecord(emotion=emotion, stil="formell"))
        prof, tally = await beziehung.profile(p, user, C), await _zaehlung(p, user)
        # the last turn's job once more: neither the profile nor the tally changes, no model call
        again, llm = await _background(p, user, f"t{n}", f"Nachricht {n}", [_antwort()],
                                       nova=NovaPerzeptionRecord(emotion="aerger", stil="formell"))
        # two deliveries racing past the check: the step's record under the row lock admits one
        beob = {"nova_emotions": beziehung.Beobachtung(wert="aerger", satz="{{char}} ist oft veraergert.",
                                                       fenster=8, mindestens=4)}
        race = [await beziehung.profil_wachsen(p, user, C, "selbstbild:t99", {}, {"nova_emotions": 3},
                                               beobachtet=beob) for _ in range(2)]
        return prof, tally, again, llm, race, await beziehung.profile(p, user, C), await _zaehlung(p, user)

    prof, tally, again, llm, race, prof_end, tally_end = _on_pool(pool, go)
    # three sentences at most, the oldest mood dropped for the one that recurs now
    assert prof.nova_emotions.splitlines() == ["{{char}} ist oft nachdenklich und traurig.",
                                                  "{{char}} ist oft besorgt.", "{{char}} ist oft veraergert."]
    assert prof.nova_intentionen == "{{char}} drueckt sich meist foermlich aus."  # not added again
    assert tally["nova_emotions"] == ["angst"] * 4 + ["aerger"] * 4  # the window: her last eight turns
    assert _outcomes(again) == ["schon_erledigt"] and _grundton(again).outcome == "schon_erledigt"
    assert llm.calls == []
    assert race[0].neu and race[0].wie_oft == {"nova_emotions": 5}
    assert race[1] == ProfilGewachsen(neu=False, gewachsen=[], wie_oft={})
    assert prof_end == prof
    assert tally_end["nova_emotions"] == ["angst"] * 3 + ["aerger"] * 5  # the racing step counted once


def test_what_occupies_him_grows_from_praegung_and_reaches_the_next_prompt(pool):
    """Seed 004 §3.1: [PERSON B — WER ER IST] carries "sein Kern · was ihn beschäftigt". praegung
    writes what occupies him (`beschaeftigt_mensch`) into the pair's `mensch_themen`, the newest
    three sentences kept; the next turn's prompt shows it under his core."""
    answers = [json.dumps({"erinnerungen": [], "profil_mensch": "Person B ist Imker." if i == 0 else "",
                           "beschaeftigt_mensch": f"Person B sorgt sich um Volk {i}."}) for i in range(4)]

    async def go(p):
        user = new_pair("themen")[0]
        before = await _next_prompt(p, user, "t0")
        for i, answer in enumerate(answers):
            await _praegung(p, user, f"t{i + 1}", answer)
        return before, await beziehung.profile(p, user, C), await _next_prompt(p, user, "t9")

    before, prof, after = _on_pool(pool, go)
    assert "beschaeftigt" not in _block(before, "[PERSON B — WER ER IST]")
    assert prof.mensch_themen.splitlines() == [f"Person B sorgt sich um Volk {i}." for i in (1, 2, 3)]
    wer = _block(after, "[PERSON B — WER ER IST]").splitlines()
    assert wer == ["Sein Kern: Person B ist Imker.",
                   "Was ihn gerade beschaeftigt: Person B sorgt sich um Volk 1. Person B sorgt sich um Volk 2. "
                   "Person B sorgt sich um Volk 3."]
