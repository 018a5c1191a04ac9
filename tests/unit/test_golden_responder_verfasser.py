"""The Verfasser's [GEDAECHTNIS] as seed 004 §3a 3.4 gives it, read in what the engine receives:
the block opens with its usage lines and then carries the memory entries (the seed's
`{memory_context}`: the reducer's `gedaechtnis_verfasser`, unchanged), on a turn of his and on an
impulse turn of hers; on an impulse turn a memory is measured against her own thought, which stands
as hers and not as a message of Person B's (§4); on a turn whose context an agent cut, no memory
reaches the engine at all ("[GEDAECHTNIS] (bei Agent-Erfolg: weggelassen)")."""
from __future__ import annotations

import asyncio
import re

import pytest

from core.state import BibliothekTreffer, KontextRecord, KzgTreffer, PlanRecord, RouteRecord
from pipeline.nodes import reducer, responder, verfasser
from pipeline.runner import run_node
from tests.scripted_llm import ScriptedLLM, deps_for
from tests.unit.test_golden_responder import golden_state, verfasser_prompt

SEED_ZEILEN = ("Informationen aus dem Langzeitgedaechtnis und aktuellen Notizen.",
               "Nutze sie nur wenn der aktuelle Prompt darauf Bezug nimmt.",
               "Erfinde keine Verbindungen zwischen verschiedenen Eintraegen.",
               "Mische keine Inhalte verschiedener Notizen oder Fakten zusammen.")
"""The usage lines of the seed's block (seed 004 §3a 3.4), word for word."""
AKTUELLER_PROMPT = {"reiz": "die Nachricht von Person B", "impuls": "ihr eigener Gedanke"}
"""What "der aktuelle Prompt" is in the Verfasser's message: his message, or on an impulse turn her
own thought."""


def _block(text: str, header: str) -> str:
    """One block of a message: from its header line to the blank line before the next header."""
    start = re.search(r"^" + re.escape(header) + r"$", text, re.MULTILINE).start()
    nxt = re.search(r"\n\n\[[A-ZÄÖÜ —\-]+\]$", text[start:], re.MULTILINE)
    return text[start: start + nxt.start()] if nxt else text[start:]


@pytest.mark.parametrize("fall", ["reiz", "impuls"])
def test_the_block_the_engine_receives_has_the_seeds_shape(fall):
    prompt = verfasser_prompt(fall == "impuls")
    zeilen = _block(prompt, "[GEDAECHTNIS]").split("\n")
    usage = [z.replace("der aktuelle Prompt", AKTUELLER_PROMPT[fall]) for z in SEED_ZEILEN]
    assert zeilen[0] == "[GEDAECHTNIS]"
    assert zeilen[1:1 + len(usage)] == usage  # the seed's lines, in its order, before the entries
    eintraege = zeilen[1 + len(usage):]
    assert "- (kzg) Bello ist ein Beagle" in eintraege and "- (notizen) Einkauf — Milch und Brot" in eintraege
    assert "- (erinnerung) Der Park im Regen [Bello]" in eintraege


def test_the_entries_follow_the_usage_lines_as_the_reducer_shaped_them():
    state = golden_state()
    state.kontext = KontextRecord(gedaechtnis_verfasser="- (kzg) Bello ist ein Beagle\n- (notizen) Einkauf — Milch")
    llm = ScriptedLLM({"verfasser": ["Nova stellt fest: Bello."]})
    asyncio.run(run_node(verfasser.NODE, state, deps_for(llm)))
    block = _block(llm.calls[-1]["messages"][-1]["content"], "[GEDAECHTNIS]")
    assert block == "\n".join(["[GEDAECHTNIS]", SEED_ZEILEN[0], SEED_ZEILEN[1].replace(
        "der aktuelle Prompt", AKTUELLER_PROMPT["reiz"]), *SEED_ZEILEN[2:], state.kontext.gedaechtnis_verfasser])


def test_on_an_impulse_turn_her_thought_is_hers_and_the_measure_of_a_memory():
    prompt = verfasser_prompt(impulse=True)
    assert "[NACHRICHT VON PERSON B]" not in prompt
    assert "Ob Bello den Park vermisst?" in _block(prompt, "[EIGENER GEDANKE]")
    assert "Nutze sie nur wenn ihr eigener Gedanke darauf Bezug nimmt." in _block(prompt, "[GEDAECHTNIS]")
    reiz = verfasser_prompt()
    assert "Und dann hat er einfach aufgelegt!" in _block(reiz, "[NACHRICHT VON PERSON B]")
    assert "[EIGENER GEDANKE]" not in reiz


def test_the_usage_lines_stand_when_only_the_appointments_bring_material():
    state = golden_state()
    state.kontext = KontextRecord()
    state.route = RouteRecord(termine=[{"titel": "Zahnarzt", "wochentag": "Montag",
                                        "beginn_lokal": "2026-12-07T14:00:00+01:00"}])
    llm = ScriptedLLM({"verfasser": ["Nova stellt fest: Zahnarzt am Montag."]})
    asyncio.run(run_node(verfasser.NODE, state, deps_for(llm)))
    block = _block(llm.calls[-1]["messages"][-1]["content"], "[GEDAECHTNIS]")
    assert block.split("\n")[1:] == [SEED_ZEILEN[0], "Nutze sie nur wenn die Nachricht von Person B darauf Bezug nimmt.",
                                     *SEED_ZEILEN[2:], "(nichts)"]


def _cut_turn(memory_update: dict):
    """The golden turn after an agent acted (the planner cut the context), with `memory_update`, run
    through reducer, Verfasser and responder: the engine's calls."""
    state = golden_state()
    state.plan = PlanRecord(task_block="Erfolg: Nova hat soeben selbst erledigt: Notiz 'Chef' angelegt.",
                            task_context_cut=True)
    state.memory = state.memory.model_copy(update=memory_update)
    llm = ScriptedLLM({"verfasser": ["Nova stellt fest: Beagle."], "responder": ["Erledigt."]})
    deps = deps_for(llm)

    async def go():
        for node in (reducer, verfasser, responder):
            await run_node(node.NODE, state, deps)
    asyncio.run(go())
    return llm.calls


def test_on_a_context_cut_no_memory_reaches_the_engine():
    calls = _cut_turn({"bibliothek": [BibliothekTreffer(titel="Bello", inhalt="ist ein Beagle", gewicht=0.9)]})
    assert [c["node"] for c in calls] == ["responder"]  # the Verfasser did not ask
    sent = "\n".join(m["content"] for m in calls[0]["messages"])
    assert "[GEDAECHTNIS]" not in sent and "Beagle" not in sent and "[INHALT]" not in sent


def test_on_a_context_cut_a_kzg_hit_or_a_note_does_not_stop_the_responder():
    calls = _cut_turn({"kzg": [KzgTreffer(inhalt="Bello ist ein Beagle", similarity=0.8)],
                       "plugins": {"notizen": [{"name": "Einkauf"}]}})
    assert [c["node"] for c in calls] == ["responder"]
    sent = "\n".join(m["content"] for m in calls[0]["messages"])
    assert "Beagle" not in sent and "Einkauf" not in sent
