"""A lorebook as SillyTavern applies it, from a Character Card V2 as SillyTavern exports it: the
triggered entries taken highest insertion order first within the token budget (no count cuts them),
placed lowest order first, `{{char}}`/`{{user}}`/`<BOT>`/`<USER>` filled with the names, and the
triggered lore in the reply's prompt on a turn where an agent acted too."""
import asyncio
import json
import uuid

from memory import charaktere
from memory.config import for_model
from pipeline.nodes import reducer, responder
from core.state import MemoryRecord, PairRecord, PlanRecord, Stimulus, TurnState
from serve import charakterkarte
from tests.conftest import embed_with, with_pool
from tests.scripted_llm import ScriptedLLM, deps_for


def _st_entry(uid: int, keys: list[str], content: str, order: int, **over) -> dict:
    """An entry the way SillyTavern's export writes it (`convertWorldInfoToCharacterBook`)."""
    return {"id": uid, "keys": keys, "secondary_keys": [], "comment": f"Eintrag {uid}", "content": content,
            "constant": False, "selective": True, "insertion_order": order, "enabled": True,
            "position": "before_char", "use_regex": True,
            "extensions": {"position": 0, "exclude_recursion": False, "display_index": uid, "probability": 100,
                           "useProbability": True, "depth": 4, "selectiveLogic": 0, "group": "",
                           "group_override": False, "group_weight": 100, "prevent_recursion": False,
                           "delay_until_recursion": False, "scan_depth": None, "match_whole_words": None,
                           "use_group_scoring": False, "case_sensitive": None, "automation_id": "", "role": 0,
                           "vectorized": False, "sticky": 0, "cooldown": 0, "delay": 0}, **over}


CARD = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
    "name": "Mira", "description": "{{char}} ist Leuchtturmwaerterin.", "personality": "", "scenario": "",
    "first_mes": "Moin, {{user}}.", "mes_example": "", "creator_notes": "", "system_prompt": "",
    "post_history_instructions": "", "alternate_greetings": [], "tags": [], "creator": "", "character_version": "",
    "extensions": {"talkativeness": "0.5", "fav": False, "world": "Hallig", "depth_prompt": {}},
    "character_book": {"name": "Hallig", "entries": [
        _st_entry(0, ["Sturm"], "Bei Sturm faehrt die Faehre nicht; {{char}} bleibt dann im Turm.", 10),
        _st_entry(1, ["Sturm"], "{{user}} darf bei Sturm im Turm schlafen, sagt <BOT>.", 20),
        _st_entry(2, ["sturm"], "Der Sturm von 1962 riss die alte Mole weg.", 30),
        _st_entry(3, ["/st(u|ue)rm/i"], "<BOT> zaehlt bei Sturm die Schiffe; <USER> hilft ihr.", 40),
        _st_entry(4, ["Sturm", "Wind"], "Das Leuchtfeuer brennt bei Sturm die ganze Nacht.", 50),
        _st_entry(5, [], "{{CHAR}} spricht Platt, wenn sie muede ist.", 5, constant=True),
        _st_entry(6, ["Fenja"], "Fenja ist die Schwester von {{char}}.", 60),
    ]}}}


def _lore_lines(block: str) -> list[str]:
    return [x for x in block.split("\n") if x.startswith("- (bibliothek) Eintrag")]


def test_a_cards_book_keeps_every_triggered_entry_in_its_budget_highest_order_first(pool, minilm):
    embed = embed_with(minilm)
    cfg = for_model("all-minilm-l6-v2")
    karte = charakterkarte.lesen(json.dumps(CARD).encode())
    wissen = [w.model_dump() for w in karte.wissen]
    vecs = embed([f"{w['titel']}: {w['inhalt']}" for w in wissen])
    text = "Heute Nacht kommt ein Sturm auf."

    async def lore(p, cid):
        hits = await charaktere.wissen_suchen(p, cid, embed([text])[0], [text], cfg)
        kept = reducer.reduce(reducer.entries(MemoryRecord(bibliothek=hits), "Mira", "Jonas"))
        return _lore_lines(reducer.block(kept, None))

    async def go(p):
        cid = f"mira-{uuid.uuid4().hex[:8]}"
        await charaktere.create(p, cid, {**karte.felder, "karte_rest": karte.karte_rest},
                                [{**w, "embedding": v} for w, v in zip(wissen, vecs)])
        lines = await lore(p, cid)
        # six triggered (five by their keys, a regex one among them, one constant), not three; placed
        # lowest order first, as SillyTavern places them; the names filled in, any case of the macro
        assert lines == [
            "- (bibliothek) Eintrag 5: Mira spricht Platt, wenn sie muede ist.",
            "- (bibliothek) Eintrag 0: Bei Sturm faehrt die Faehre nicht; Mira bleibt dann im Turm.",
            "- (bibliothek) Eintrag 1: Jonas darf bei Sturm im Turm schlafen, sagt Mira.",
            "- (bibliothek) Eintrag 2: Der Sturm von 1962 riss die alte Mole weg.",
            "- (bibliothek) Eintrag 3: Mira zaehlt bei Sturm die Schiffe; Jonas hilft ihr.",
            "- (bibliothek) Eintrag 4: Das Leuchtfeuer brennt bei Sturm die ganze Nacht."]
        # a budget for about three entries: the highest orders stay, the budget cuts from the end
        await charaktere.update(p, cid, {"karte_rest": {**karte.karte_rest, "character_book": {
            **karte.karte_rest.get("character_book", {}), "token_budget": 45}}})
        lines = await lore(p, cid)
        assert [x.split(":")[0] for x in lines] == ["- (bibliothek) Eintrag 2", "- (bibliothek) Eintrag 3",
                                                    "- (bibliothek) Eintrag 4"]

    asyncio.run(with_pool(pool, go))


def _hits() -> list[dict]:
    return [{"id": 1, "titel": "Turm", "inhalt": "{{user}} darf bei Sturm bei <BOT> schlafen.", "gewicht": 1.0,
             "weg": "schluessel", "similarity": 0.2},
            {"id": 2, "titel": "Immer", "inhalt": "{{char}} spricht Platt.", "gewicht": 1.0, "weg": "immer",
             "similarity": 0.1},
            {"id": 3, "titel": "Thema", "inhalt": "Nur verwandt.", "gewicht": 0.6, "weg": "thema", "similarity": 0.6}]


def _state(cut: bool) -> TurnState:
    stim = Stimulus(user_id="u", character_id="mira", turn_id="t", user_prompt="Kommt ein Sturm?", person_name="Jonas")
    return TurnState(stimulus=stim, pair=PairRecord(character_name="Mira"), memory=MemoryRecord(bibliothek=_hits()),
                     plan=PlanRecord(task_block="Erfolg: Mira hat soeben selbst erledigt: Notiz angelegt.",
                                     task_context_cut=cut))


def test_triggered_lore_reaches_the_reply_when_an_agent_cut_the_context():
    deps = deps_for(ScriptedLLM())
    (_, user), info = responder.build_messages(_state(cut=True), deps, "m")
    welt = user["content"][user["content"].index("[WELT]"):]
    assert "- Turm: Jonas darf bei Sturm bei Mira schlafen." in welt and "- Immer: Mira spricht Platt." in welt
    assert "Nur verwandt" not in welt and "{{" not in user["content"] and "WELT" in info["bloecke"]
    # without a cut the Verfasser carries the memory: no second copy
    (_, user), _ = responder.build_messages(_state(cut=False), deps, "m")
    assert "[WELT]" not in user["content"]


def test_the_reducer_fills_the_names_in_and_caps_only_what_the_budget_did_not_bound():
    hits = _hits() + [{"id": 10 + i, "titel": f"T{i}", "inhalt": f"verwandt {i}", "gewicht": 0.5 + i / 100,
                       "weg": "thema", "similarity": 0.5} for i in range(5)]
    kept = reducer.reduce(reducer.entries(MemoryRecord(bibliothek=hits), "Mira", "Person B"))
    texts = [e["inhalt"] for e in kept]
    assert "Turm: Person B darf bei Sturm bei Mira schlafen." in texts and "Immer: Mira spricht Platt." in texts
    assert sum(1 for e in kept if not e["lore"]) == reducer.CAPS["bibliothek"]  # topic finds keep their cap
