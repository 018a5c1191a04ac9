"""A turn of both chains against a reasoning model (seed 000 §3): every node's call passes the real
LLM client and the real LLM deployment into the scripted engine answering as Qwen3 does — a long
thought before the Thinker's decision, and a stray thought block (with a JSON object in it) before
every other answer. Only the Thinker's reasoning pass asks with thinking on; it decides without the
follow-up; and no parser, no stored record and no draft the person is shown carries the thought."""
import asyncio
import json
import uuid

from redis.asyncio import Redis

from core.settings import Settings
from core.state import Stimulus, TurnState
from pipeline.chains import CHARACTER_CHAIN, HUMAN_CHAIN
from pipeline.runner import ChainRunner
from tests.conftest import unit, with_pool
from tests.scripted_engine import ScriptedEngine
from tests.scripted_llm import PoolStore, deps_for, engine_client
from tests.unit.test_reasoning_model import SPUR, THOUGHT

ENTWURF = "Dein Termin ist am Montag um 14 Uhr."
"""A draft with the quick check's indicators: the Thinker reasons."""
STRAY = f'{SPUR} {{"urteil": "mangel", "gruende": ["{SPUR}"], "intent": "{SPUR}"}}'
"""The block a reasoning model may still write with thinking off: a JSON object no parser may take."""


class _Embedder:
    async def embed(self, trace, text):
        return unit(sum(map(ord, text)) % 50).tolist()


async def _turn(p, r):
    user = f"denkt-{uuid.uuid4().hex[:6]}"
    engine = ScriptedEngine.with_script({"responder": [ENTWURF], "thinker": ["ERGEBNIS: OK"]},
                                        reasoning=THOUGHT, stray=STRAY)
    # the scripted engine stands for a model that may answer in its reasoning alone (Qwen3-8B)
    settings = Settings(thinker_reasoning_models=["scripted-engine"], llm_think_switch="template")
    client = engine_client(engine, settings)
    deps = deps_for(client, store=PoolStore(p), redis=r, embedder=_Embedder(), settings=settings,
                    turn=(user, "nova", "t1"))
    deps.trace.events = asyncio.Queue()  # the responder streams its drafts to the person
    state = TurnState(stimulus=Stimulus(user_id=user, character_id="nova", turn_id="t1",
                                        user_prompt="Wann ist mein Zahnarzttermin?"))
    await ChainRunner(HUMAN_CHAIN, name="human").run(state, deps)
    await ChainRunner(CHARACTER_CHAIN, name="character").run(state, deps)
    drafts = []
    while not deps.trace.events.empty():
        e = deps.trace.events.get_nowait()
        if e["event"] == "draft":
            drafts.append(e["text"])
    return state, deps, drafts, client.handle.deployment.record(False)


def test_a_reasoning_model_thinks_only_in_the_thinker_and_no_one_reads_its_thought(stores, pool):
    async def go(p):
        r = Redis.from_url(stores.redis_url)
        try:
            return await _turn(p, r)
        finally:
            await r.aclose()

    state, deps, drafts, recorded = asyncio.run(with_pool(pool, go))
    calls = [(rec["request"]["caller"], rec["request"]["think"]) for rec in recorded]
    assert ("thinker", True) in calls and ("responder", False) in calls and len(calls) > 8, calls
    # think=True only in the Thinker's reasoning pass; no follow-up was needed
    assert [c for c in calls if c[1]] == [("thinker", True)] and all(c != "thinker_nachfass" for c, _ in calls)
    decisions = {d.entscheidung: d for d in deps.trace.decisions()}
    assert decisions["thinker.ergebnis"].outcome == "ok" and decisions["thinker.ergebnis"].inputs["nachfass"] == 0
    # every structured node's parser read its answer, not the stray object in the thought
    answers = {k: d.outcome for k, d in decisions.items() if k.endswith(".antwort")}
    assert answers and all(o == "ok" for o in answers.values()), answers
    # nothing of the thought in the drafts shown, the turn's records or the pipeline log
    assert "".join(drafts).strip() == ENTWURF and state.draft.reply == ENTWURF
    # the responder's reasoning channel keeps the thought apart (`draft.reasoning`), never in a text
    assert SPUR in state.draft.reasoning
    dump = state.model_copy(update={"draft": state.draft.model_copy(update={"reasoning": None})}).model_dump_json()
    assert SPUR not in dump, dump[max(0, dump.find(SPUR) - 300):dump.find(SPUR) + 100]
    assert SPUR not in json.dumps([row.model_dump(mode="json") for row in deps.trace.rows])
