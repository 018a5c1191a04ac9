"""The session summary loop (seed 001 §3.1, issue #10): turns that leave the chain's window are
folded into `session:{u}:{c}:summary` in the background, once each, and the next reply sees it."""
import asyncio
import json
import logging
from datetime import datetime, timezone

from core.settings import Settings
from memory import session
from pipeline.nodes import enricher, responder, zusammenfassung
from pipeline.chains import NODES
from pipeline.runner import ChainRunner
from pipeline.services import Deps, Services
from core.state import PairRecord, SessionTurn, Stimulus, TurnState
from pipeline.trace import TurnTrace
from prompts import PromptLibrary
from tests.conftest import new_pair, unit
from tests.scripted_llm import PoolStore, ScriptedLLM
from pipeline.runner import run_node
from core.wire import TurnCommit
from tests.commit_jobs import entry, result

C = "nova"


class _Embedder:
    async def embed(self, trace, text):
        return unit(0).tolist()


def _nachricht(i: int) -> str:
    return f"Nachricht {i}: Mein Hund Bello{i} war heute im Park. Er hat einen Stock gefunden."


def _antwort(i: int) -> str:
    return f"Antwort {i}: Bello{i} klingt nach einem gluecklichen Hund."


async def _commit(r, user: str, i: int, settings: Settings) -> str:
    tid = f"t{i:02d}"
    now = datetime.now(timezone.utc).isoformat()
    await session.commit_turn(r, TurnCommit(
        result=result(user, C, tid, _antwort(i)),
        mensch=entry(_nachricht(i), tid, herkunft="user", time=now),
        nova=entry(_antwort(i), tid, rolle="assistant", herkunft="user", time=now),
        keep_turns=settings.session_keep_turns, ttl_s=settings.turn_result_ttl_s))
    return tid


def _job_state(user: str, tid: str) -> TurnState:
    """The records the background job carries that the node reads."""
    return TurnState(stimulus=Stimulus(user_id=user, character_id=C, turn_id=tid, user_prompt="..."),
                     pair=PairRecord(character_name="Nova"))


def _deps(llm, r, user: str, tid: str, settings: Settings, store=None, chain: str = "background") -> Deps:
    services = Services(settings=settings, llm=llm, embedder=_Embedder(), store=store, redis=r,
                        prompts=PromptLibrary())
    trace = TurnTrace(user, C, tid)
    trace.chain = chain
    return Deps(services, trace)


async def _background(llm, r, user: str, tid: str, settings: Settings) -> Deps:
    """One delivery of the turn's background job, through the runner (the node contract holds)."""
    deps = _deps(llm, r, user, tid, settings)
    await ChainRunner((NODES["zusammenfassung"],), name="background").run(_job_state(user, tid), deps)
    return deps


def _falten(deps: Deps) -> list[tuple[str, dict]]:
    return [(x.outcome, x.inputs) for x in deps.trace.decisions("zusammenfassung.falten")]


def _prompts(llm: ScriptedLLM, node: str) -> list[str]:
    return [c["messages"][-1]["content"] for c in llm.calls if c["node"] == node]


def _answers(n: int) -> list[str]:
    return [json.dumps({"zusammenfassung": f"Fassung {k}: Person B erzaehlte von Bello."}) for k in range(1, n + 1)]


def _redis(stores):
    from redis.asyncio import Redis

    return Redis.from_url(stores.redis_url)


def test_turns_that_left_the_window_reach_the_next_reply_as_a_summary(stores, pool):
    from memory import pg

    settings = Settings()
    window = settings.session_max_turns

    async def go():
        r, p = _redis(stores), pg.open_pool(pool, 1, 2)
        await p.open(wait=True)
        try:
            user = new_pair("sum")[0]
            llm = ScriptedLLM({"zusammenfassung": _answers(40)})
            outcomes = []
            for i in range(1, 26):  # 25 turns, each followed by its background job
                tid = await _commit(r, user, i, settings)
                outcomes.append(_falten(await _background(llm, r, user, tid, settings))[0][0])
            stored = await session.load_summary(r, user, C)
            # the next turn: the enricher loads the summary, the responder's prompt carries it
            nxt = TurnState(stimulus=Stimulus(user_id=user, character_id=C, turn_id="t26",
                                              user_prompt="Weisst du noch, wie mein erster Hund hiess?"),
                            pair=PairRecord(character_name="Nova"))
            chat = ScriptedLLM({"responder": ["Natuerlich, Bello1!"]})
            deps = _deps(chat, r, user, "t26", settings, store=PoolStore(p), chain="character")
            nxt.memory = (await run_node(enricher.NODE, nxt, deps))["memory"]
            await run_node(responder.NODE, nxt, deps)
            return llm, outcomes, stored, nxt.memory, _prompts(chat, "responder")[0]
        finally:
            await p.close()
            await r.aclose()

    llm, outcomes, stored, memory, prompt = asyncio.run(go())
    folds = _prompts(llm, "zusammenfassung")
    # after turn i its 2i entries stand in the session; the window (at most the newest `window`, from
    # a block's start) starts at `outside[i - 1]`: it moves a block of entries at a time
    outside = [session.fenster_start(2 * i, window, hoechstens=True) for i in range(1, 26)]
    moved = [o > (outside[k - 1] if k else 0) for k, o in enumerate(outside)]
    # nothing is summarised while the window still shows it; a job folds what the window just left
    assert outcomes == ["modell" if m else "nichts_neu" for m in moved] and sum(moved) == len(folds) >= 2
    assert outside[0] == 0 and all(o % session.FENSTER_BLOCK == 0 for o in outside)
    starts = [0] + [o for o, m in zip(outside, moved) if m]
    for k, fold in enumerate(folds, 1):
        # each fold takes the turns that just left the window, and the summary before it
        first, last = starts[k - 1] // 2 + 1, starts[k] // 2
        assert _nachricht(first) in fold and _antwort(last) in fold and _nachricht(last + 1) not in fold
        assert _nachricht(first - 1) not in fold or first == 1
        assert (f"Fassung {k - 1}:" in fold) == (k > 1)
    gone = outside[-1] // 2  # turns 1..gone are no longer in the window
    assert stored.gefaltet == 2 * gone and stored.bis_turn_id == f"t{gone:02d}"
    assert stored.text == f"Fassung {len(folds)}: Person B erzaehlte von Bello."
    assert memory.zusammenfassung == stored.text
    # the reply's prompt: the summary in its block before the verbatim history, which starts after it
    assert "[FRUEHER IM GESPRAECH]" in prompt and stored.text in prompt
    assert prompt.index("[FRUEHER IM GESPRAECH]") < prompt.index("[GESPRAECHSVERLAUF]")
    assert _nachricht(gone) not in prompt and _nachricht(gone + 1) in prompt and _antwort(25) in prompt


def test_a_redelivered_job_folds_no_turn_twice(stores):
    settings = Settings()

    async def go():
        r = _redis(stores)
        try:
            user = new_pair("sum2")[0]
            for i in range(1, 15):  # 28 entries: a block of 8 has left the window
                tid = await _commit(r, user, i, settings)
            llm = ScriptedLLM({"zusammenfassung": _answers(5)})
            first = await _background(llm, r, user, tid, settings)
            after_first = await session.load_summary(r, user, C)
            again = await _background(llm, r, user, tid, settings)  # the same job, delivered again
            after_again = await session.load_summary(r, user, C)
            # a wider window takes folded turns back in: they are not folded again
            wider = await _background(llm, r, user, tid, Settings(session_max_turns=settings.session_max_turns + 4))
            return llm, first, after_first, again, after_again, wider, await session.load_summary(r, user, C)
        finally:
            await r.aclose()

    llm, first, after_first, again, after_again, wider, end = asyncio.run(go())
    assert _falten(first)[0][0] == "modell" and after_first.gefaltet == 8 and after_first.bis_turn_id == "t04"
    assert _falten(again)[0][0] == "nichts_neu" and after_again == after_first
    assert _falten(wider)[0][0] == "nichts_neu" and end == after_first
    assert len(_prompts(llm, "zusammenfassung")) == 1


class _Together:
    """An engine that answers only when `n` calls wait: two deliveries of one job that both read
    the summary before either stored it (an outbox re-claim of a job still running)."""

    def __init__(self, inner: ScriptedLLM, n: int):
        self.inner, self.n, self.waiting, self.go = inner, n, 0, asyncio.Event()

    async def chat(self, *a, **k):
        self.waiting += 1
        if self.waiting >= self.n:
            self.go.set()
        await asyncio.wait_for(self.go.wait(), 10)
        return await self.inner.chat(*a, **k)

    async def model_name(self):
        return await self.inner.model_name()


def test_two_deliveries_at_once_store_one_fold(stores):
    settings = Settings()

    async def go():
        r = _redis(stores)
        try:
            user = new_pair("sum3")[0]
            for i in range(1, 15):  # 28 entries: a block of 8 has left the window
                tid = await _commit(r, user, i, settings)
            llm = _Together(ScriptedLLM({"zusammenfassung": _answers(2)}), 2)
            runs = await asyncio.gather(_background(llm, r, user, tid, settings),
                                        _background(llm, r, user, tid, settings))
            return runs, await session.load_summary(r, user, C)
        finally:
            await r.aclose()

    runs, stored = asyncio.run(go())
    assert sorted(_falten(d)[0][0] for d in runs) == ["modell", "schon_gefaltet"]
    assert stored.gefaltet == 8 and stored.bis_turn_id == "t04"


def test_an_unusable_answer_folds_the_turns_in_as_excerpts(stores, caplog):
    caplog.set_level(logging.INFO, logger="novaberg.node.zusammenfassung")
    settings = Settings()

    async def go():
        r = _redis(stores)
        try:
            user = new_pair("sum4")[0]
            for i in range(1, 15):  # a block of 8 entries (turns 1-4) has left the window
                tid = await _commit(r, user, i, settings)
            await _background(ScriptedLLM({"zusammenfassung": _answers(1)}), r, user, tid, settings)
            before = await session.load_summary(r, user, C)
            for i in range(15, 19):  # the next block (turns 5-8)
                tid = await _commit(r, user, i, settings)
            bad = await _background(ScriptedLLM({"zusammenfassung": ["Gern fasse ich das zusammen: Bello."]}),
                                    r, user, tid, settings)
            after_bad = await session.load_summary(r, user, C)
            for i in range(19, 23):  # and the next (turns 9-12)
                tid = await _commit(r, user, i, settings)
            down = ScriptedLLM()
            down.fail.add("zusammenfassung")
            failed = await _background(down, r, user, tid, settings)
            return before, bad, after_bad, failed, await session.load_summary(r, user, C)
        finally:
            await r.aclose()

    before, bad, after_bad, failed, end = asyncio.run(go())
    outcome, inputs = _falten(bad)[0]
    assert outcome == "auszug" and inputs["antwort"] == "kein_json"
    assert "fallback auszug" in caplog.text and "kein_json" in caplog.text
    # each new entry is there with its speaker, first sentence only; over the bound the oldest part
    # (here the previous summary and the block's first turns) gives way, the newest stays
    assert len(after_bad.text) <= zusammenfassung.MAX_ZEICHEN and before.text not in after_bad.text
    assert after_bad.text.endswith("Nova: Antwort 8: Bello8 klingt nach einem gluecklichen Hund.")
    assert "Person B: Nachricht 8: Mein Hund Bello8 war heute im Park." in after_bad.text
    assert "Nova: Antwort 8:" in after_bad.text and "Stock" not in after_bad.text
    assert after_bad.gefaltet == before.gefaltet + 8 and after_bad.bis_turn_id == "t08"
    # an engine that is down takes the same fallback; the summary stays bounded, the newest kept
    assert _falten(failed)[0][0] == "auszug" and _falten(failed)[0][1]["antwort"] == "aufruf_gescheitert"
    assert "Nachricht 12:" in end.text and end.gefaltet == after_bad.gefaltet + 8
    # grown past its bound, the excerpt summary loses its oldest sentences first, never the newest
    neu = SessionTurn(rolle="user", sprecher="Person B", inhalt=_nachricht(99), turn_id="t99",
                      time=datetime.now(timezone.utc))
    lang = zusammenfassung.auszug(" ".join(f"Satz {k}." for k in range(200)), [neu])
    assert len(lang) <= zusammenfassung.MAX_ZEICHEN and lang.startswith("Satz ") and "Satz 0." not in lang
    assert lang.endswith("Person B: Nachricht 99: Mein Hund Bello99 war heute im Park.")


def test_turns_trimmed_before_they_were_summarised_are_reported(stores, caplog):
    caplog.set_level(logging.INFO, logger="novaberg.node.zusammenfassung")
    settings = Settings()

    async def go():
        r = _redis(stores)
        try:
            user = new_pair("sum5")[0]
            for i in range(1, 15):
                tid = await _commit(r, user, i, settings)
            # the cursor points at an entry the list no longer holds (trimmed while the background lagged)
            await session.fold_summary(r, user, C, nach_marke="", text="Fassung 0.", marke="weg", bis_turn_id="t00",
                                       neu=6)
            deps = await _background(ScriptedLLM({"zusammenfassung": _answers(1)}), r, user, tid, settings)
            return deps, await session.load_summary(r, user, C)
        finally:
            await r.aclose()

    deps, stored = asyncio.run(go())
    outcome, inputs = _falten(deps)[0]
    assert outcome == "modell" and inputs["stand"] == "luecke"
    assert "trimmed before they were summarised" in caplog.text
    assert stored.bis_turn_id == "t04" and stored.gefaltet == 6 + 8  # the block that left the window
