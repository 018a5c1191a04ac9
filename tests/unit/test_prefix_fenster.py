"""Prompts an engine can cache (issue #16): the history windows move in blocks, the responder's
history grows only at its end, and store calls made in the same moment travel as one request."""
import asyncio
import logging
from datetime import datetime, timezone

import pytest

from memory import session
from pipeline.nodes import responder
from pipeline.services import StoreClient
from core.settings import Settings
from core.state import MemoryRecord, PairRecord, SessionTurn, Stimulus, TurnState, VerfasserRecord
from pipeline.node_config import budget as node_budget
from tests.scripted_llm import ScriptedLLM, deps_for

B = session.FENSTER_BLOCK


def test_a_window_starts_on_a_block_and_shows_at_least_the_newest_n():
    for n in (6, 20):
        starts = [session.fenster_start(g, n) for g in range(0, 80)]
        assert all(s % B == 0 and g - s >= min(g, n) and g - s < n + B for g, s in zip(range(80), starts))
        assert starts == sorted(starts)  # it never moves back
        # it moves by a whole block at once: as the conversation grows by two entries a turn, the
        # start stays put for B // 2 turns at a time
        assert all(b - a in (0, B) for a, b in zip(starts, starts[1:]))
        assert len(set(starts)) == (80 - 1 - n) // B + 1
    # the session window's ceiling (seed 004 §4.1: SESSION_MAX_TURNS = 20, trimming against echo)
    starts = [session.fenster_start(g, 20, hoechstens=True) for g in range(0, 80)]
    assert all(s % B == 0 and g - s <= 20 and (g - s >= 20 - B + 1 or s == 0) for g, s in zip(range(80), starts))
    assert starts == sorted(starts) and all(b - a in (0, B) for a, b in zip(starts, starts[1:]))
    turns = list(range(30))
    assert session.fenster(turns, 6) == turns[24:] and session.fenster(turns[:13], 6) == turns[:13]
    assert session.fenster(turns[:14], 6) == turns[8:14] and session.fenster([], 6) == []


def _turn(i: int) -> SessionTurn:
    rolle, sprecher = ("user", "Person B") if i % 2 == 0 else ("assistant", "Nova")
    return SessionTurn(rolle=rolle, sprecher=sprecher, inhalt=f"Beitrag {i}", turn_id=f"t{i // 2}",
                       time=datetime(2026, 12, 1, tzinfo=timezone.utc), emotion="freude", arousal=0.5)


def _prompt(n_entries: int, text: str) -> str:
    state = TurnState(stimulus=Stimulus(user_id="u", character_id="nova", turn_id="t", user_prompt=text,
                                        received_at=datetime(2026, 12, 1, 12, tzinfo=timezone.utc)),
                      pair=PairRecord(character_name="Nova"),
                      memory=MemoryRecord(session_turns=[_turn(i) for i in range(n_entries)]))
    messages, _ = responder.build_messages(state, deps_for(ScriptedLLM()), "m")
    return "".join(f"<{m['role']}>{m['content']}" for m in messages)


def test_the_responders_prompt_of_the_next_turn_begins_with_this_ones_history():
    now, nxt = _prompt(6, "Wie war dein Tag?"), _prompt(8, "Und morgen?")
    end_of_history = now.index("----- 6 Turns, Turn 6 ist der neueste -----")
    # the system message and every header of the history are the same bytes a turn later
    assert nxt[:end_of_history] == now[:end_of_history]
    assert "----- Turn 3 (freude, a=0.5) -----\nPerson B: Beitrag 2" in nxt
    assert "----- 8 Turns, Turn 8 ist der neueste -----" in nxt and " von " not in nxt.split("[GESPRAECHSVERLAUF]")[1].split("[SZENE]")[0]


def _long_turn(i: int) -> SessionTurn:
    t = _turn(i)
    return t.model_copy(update={"inhalt": f"Beitrag {i}: " + "Bello war heute im Park und hat gebellt. " * 4})


def _long_prompt(n_entries: int, inhalt_chars: int, ctx: int = 4096) -> tuple[str, dict]:
    """The responder's prompt over a history too long for the context, with this turn's blocks
    (its content notes) `inhalt_chars` long."""
    state = TurnState(stimulus=Stimulus(user_id="u", character_id="nova", turn_id="t", user_prompt="Und dann?",
                                        received_at=datetime(2026, 12, 1, 12, tzinfo=timezone.utc)),
                      pair=PairRecord(character_name="Nova"),
                      memory=MemoryRecord(session_turns=[_long_turn(i) for i in range(n_entries)]),
                      verfasser=VerfasserRecord(inhalt="Nova weiss noch etwas. " * (inhalt_chars // 23)))
    messages, info = responder.build_messages(state, deps_for(ScriptedLLM(), settings=Settings(llm_ctx=ctx)), "m")
    return "".join(f"<{m['role']}>{m['content']}" for m in messages), info


def test_the_cut_history_stays_a_prefix_when_the_turns_blocks_change_length(caplog):
    # turn by turn the history grows by two entries and the blocks after it are short, long, short
    turns = [_long_prompt(12, 200), _long_prompt(14, 1600), _long_prompt(16, 200)]
    cuts = [info["verlauf_gekuerzt"] for _, info in turns]
    assert all(cuts) and cuts == sorted(cuts), "the cut is at work and never moves back"
    assert cuts[0] == cuts[1], "the turn's longer blocks do not move the cut"
    for (now, a), (nxt, b) in zip(turns, turns[1:]):
        if a["verlauf_gekuerzt"] == b["verlauf_gekuerzt"]:
            end = now.rindex("\n----- ", 0, now.index(" ist der neueste -----"))  # this history's closing line
            assert nxt[:end] == now[:end], "the next prompt begins with this one's whole history"
    assert [info["verlauf_ueber_reserve"] for _, info in turns] == [0, 0, 0]
    assert "verlauf_ueber_reserve" not in caplog.text
    budget = (4096 - node_budget("responder", Settings())) * responder.CHARS_PER_TOKEN
    assert all(len(p) <= budget for p, _ in turns), "each prompt fits the context"


def test_blocks_beyond_their_reserve_cut_the_history_further_logged(caplog):
    with caplog.at_level(logging.WARNING, logger="novaberg.node.responder"):
        prompt, info = _long_prompt(16, 4000)
    assert info["verlauf_ueber_reserve"] > 0 and info["verlauf_ueber_reserve"] % responder.TRIM_BLOCK == 0
    assert "fallback verlauf_ueber_reserve" in caplog.text
    assert len(prompt) <= (4096 - node_budget("responder", Settings())) * responder.CHARS_PER_TOKEN


class _Methode:
    def __init__(self, fn):
        self.fn = fn

    def remote(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


class _Handle:
    """A store deployment's handle: records the requests, answers like `StoreDeployment`."""

    def __init__(self, fail_batch: bool = False):
        self.requests: list[tuple] = []
        self.fail_batch = fail_batch
        self.call = _Methode(self._call)
        self.batch = _Methode(self._batch)

    @staticmethod
    async def _op(op, *args):
        if op == "kaputt":
            raise KeyError(op)
        await asyncio.sleep(0)
        return (op, args)

    async def _call(self, op, *args):
        self.requests.append(("call", op))
        return await self._op(op, *args)

    async def _batch(self, calls):
        self.requests.append(("batch", [c[0] for c in calls]))
        if self.fail_batch:
            raise ConnectionError("replica gone")
        out = []
        for op, a, k in calls:
            try:
                out.append((None, await self._op(op, *a)))
            except Exception as e:
                out.append((e, None))
        return out


def test_store_calls_made_in_the_same_moment_travel_as_one_request():
    async def go():
        h = _Handle()
        c = StoreClient(h)
        together = await asyncio.gather(c._run("a", (1,), {}), c._run("b", (2,), {}), c._run("c", (3,), {}))
        alone = await c._run("d", (4,), {})
        with pytest.raises(KeyError):  # a failing operation fails its own caller only
            await asyncio.gather(c._run("e", (), {}), c._run("kaputt", (), {}))
        mixed = await asyncio.gather(c._run("f", (), {}), c._run("kaputt", (), {}), return_exceptions=True)
        return h.requests, together, alone, mixed

    requests, together, alone, mixed = asyncio.run(go())
    assert together == [("a", (1,)), ("b", (2,)), ("c", (3,))] and alone == ("d", (4,))
    assert requests[:2] == [("batch", ["a", "b", "c"]), ("call", "d")]
    assert requests[2:] == [("batch", ["e", "kaputt"]), ("batch", ["f", "kaputt"])]
    assert mixed[0] == ("f", ()) and isinstance(mixed[1], KeyError)


def test_a_failed_request_fails_every_call_it_carried():
    async def go():
        c = StoreClient(_Handle(fail_batch=True))
        return await asyncio.gather(c._run("a", (), {}), c._run("b", (), {}), return_exceptions=True)

    out = asyncio.run(go())
    assert all(isinstance(e, ConnectionError) for e in out)
