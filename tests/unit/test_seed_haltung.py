"""The attitude reaches both writers as seed 004 §3.3 says: [SZENE] carries every axis of the
attitude, the initiative among them; the Verfasser receives the three content quantities (span,
energy, initiative) and not nearness and warmth, which stay with the responder."""
import asyncio

from pipeline.nodes import responder, verfasser
from pipeline.runner import run_node
from core.state import HaltungRecord, KontextRecord
from tests.scripted_llm import ScriptedLLM, deps_for
from tests.unit.test_golden_responder import golden_state


def _verfasser_prompt(h: HaltungRecord) -> str:
    state = golden_state()
    state.haltung, state.kontext = h, KontextRecord(gedaechtnis_verfasser="- (kzg) Bello ist ein Beagle")
    llm = ScriptedLLM({"verfasser": ["Nova stellt fest: Bello."]})
    asyncio.run(run_node(verfasser.NODE, state, deps_for(llm)))
    return "\n".join(m["content"] for m in llm.calls[0]["messages"])


def test_the_verfasser_gets_the_three_content_quantities_and_not_nearness_or_warmth():
    fuehrt = HaltungRecord(umfang="ausfuehrlich", spanne="350 bis 700 Zeichen", energie="lebhaft", initiative=0.8,
                           naehe=0.9, waerme=0.2)
    prompt = _verfasser_prompt(fuehrt)
    haltung = prompt.split("[HALTUNG]")[1].split("\n[")[0]
    assert "Umfang: ausfuehrlich, 350 bis 700 Zeichen" in haltung and "Energie: lebhaft" in haltung
    assert "Initiative: 0.8 (sie fuehrt" in haltung
    assert "Naehe" not in prompt and "Waerme" not in prompt
    folgt = _verfasser_prompt(HaltungRecord(initiative=0.2))
    assert "Initiative: 0.2 (sie folgt ihm" in folgt.split("[HALTUNG]")[1]


def test_the_scene_carries_every_axis_of_the_attitude():
    state = golden_state()
    state.haltung = HaltungRecord(umfang="knapp", naehe=0.7, waerme=0.4, energie="ruhig", initiative=0.3)
    (_, user), _ = responder.build_messages(state, deps_for(ScriptedLLM()), "m")
    szene = user["content"].split("[SZENE]")[1].split("\n[")[0]
    assert "Achsen: Umfang knapp, Naehe 0.7, Waerme 0.4, Energie ruhig, Initiative 0.3" in szene
