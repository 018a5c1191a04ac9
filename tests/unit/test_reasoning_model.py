"""A reasoning model behind every path (seed 000 §3: the Thinker runs a real reasoning chain, about a
minute, with `think=True`; every other node runs `think=False`). The Thinker's reasoning pass gets a
budget that holds the model's thinking and its answer, so a long thought reaches its decision
without the follow-up (Nachfass); the `think` switch reaches the model as it knows it (the chat
template's `enable_thinking`, or Qwen3's `/think` and `/no_think` tag); and no reasoning reaches a
parser or the person: inline `<think>` blocks (closed, cut by the budget, or opened by the chat
template) and `reasoning_content`, whole and streamed, on the backends and in the LLM deployment
whatever its engine."""
from __future__ import annotations

import asyncio
import logging

import pytest

from core.settings import Settings
from core.state import DraftRecord, PairRecord, RouteRecord, Stimulus, TurnState
from core.wire import ChatRequest
from pipeline.node_config import REASONING_PASS, budget, check_budgets, reasoning_budget
from pipeline.nodes import thinker
from pipeline.runner import run_node
from pipeline.thinker.budget import PROMPT_CHARS_PER_TOKEN
from pipeline.trace import TurnTrace
from serve.llm import LLMDeployment
from serve.llm_backends import (LlamaCppBackend, OpenAICompatBackend, StreamReasoningApart, chunk,
                                split_reasoning, think_fields)
from tests.scripted_engine import ScriptedEngine
from tests.scripted_llm import ScriptedLLM, deps_for, engine_client

SPUR = "DENKSPUR"
"""A word only the model's thinking carries: wherever it turns up, reasoning leaked."""
THOUGHT = (f"{SPUR} Die Antwort nennt Montag um 14 Uhr.\nTOOL: web_search({SPUR})\n"
           f'{{"urteil": "mangel", "gruende": ["{SPUR}"]}}\nERGEBNIS: KORREKTUR\n'
           + "Ich wäge ab, was der Kalender sagt. " * 130)
"""A reasoning model's thought on a check: longer than the old budget of 400 tokens (some 900
words), with a protocol line, a tool call and a JSON object in it that no parser may read."""
ANTWORT_BUDGET = 400
"""The Thinker's answer budget (`pipeline/node_config.py`)."""


def _state(reply="Dein Termin ist am Montag um 14 Uhr.", text="Wann ist mein Termin?") -> TurnState:
    return TurnState(stimulus=Stimulus(user_id="u", character_id="nova", turn_id="t1", user_prompt=text),
                     pair=PairRecord(character_name="Nova"), route=RouteRecord(needs_web=False),
                     draft=DraftRecord(reply=reply, model="scripted"))


def _decisions(deps) -> dict:
    return {r.entscheidung: r for r in deps.trace.decisions()}


# --- (a) the reasoning pass's budget -------------------------------------------------------------
QWEN = {"llm_backend": "vllm", "llm_model": "Qwen/Qwen3-8B"}
"""A deployment of a reasoning model (the vLLM default)."""


def test_a_long_thought_reaches_its_decision_without_the_follow_up():
    assert len(THOUGHT.split()) > ANTWORT_BUDGET
    llm = ScriptedLLM({"thinker": ["ERGEBNIS: OK"]}, model="Qwen/Qwen3-8B", reasoning=THOUGHT)
    deps = deps_for(llm, settings=Settings(**QWEN))
    p = asyncio.run(run_node(thinker.NODE, _state(), deps))["pruefung"]
    assert p.status == "ok" and p.reply is None
    assert [(c["node"], c["think"]) for c in llm.calls] == [("thinker", True)]  # no thinker_nachfass
    assert llm.calls[0]["max_tokens"] == ANTWORT_BUDGET + Settings().thinker_reasoning_tokens == 2448
    ergebnis = _decisions(deps)["thinker.ergebnis"]
    assert ergebnis.outcome == "ok" and ergebnis.inputs["nachfass"] == 0 and ergebnis.inputs["iterationen"] == 1


def test_the_answer_budget_alone_cuts_the_thought_and_the_follow_up_repairs():
    # the old budget, as a model that does not reason is given it: the thought is cut, the content
    # stays empty, and the follow-up (think=False) brings the decision — the repair, not the path
    llm = ScriptedLLM({"thinker": ["ERGEBNIS: OK"], "thinker_nachfass": ["ERGEBNIS: OK"]}, model="Qwen/Qwen3-8B",
                      reasoning=THOUGHT)
    deps = deps_for(llm, settings=Settings(**QWEN, thinker_reasoning_tokens=0))
    p = asyncio.run(run_node(thinker.NODE, _state(), deps))["pruefung"]
    assert p.status == "ok"
    assert [(c["node"], c["think"], c["max_tokens"]) for c in llm.calls] == [
        ("thinker", True, ANTWORT_BUDGET), ("thinker_nachfass", False, None)]
    assert SPUR in llm.calls[1]["messages"][1]["content"]  # the cut thought is the follow-up's material
    assert _decisions(deps)["thinker.ergebnis"].inputs["nachfass"] == 1


def test_the_pass_leaves_the_context_room_for_its_prompt(caplog):
    llm = ScriptedLLM({"thinker": ["ERGEBNIS: OK"]}, model="Qwen/Qwen3-8B", reasoning="kurz")
    settings = Settings(**QWEN, llm_ctx=2048)
    with caplog.at_level(logging.INFO, logger="novaberg.thinker.budget"):
        asyncio.run(run_node(thinker.NODE, _state(), deps_for(llm, settings=settings)))
    (call,) = llm.calls
    prompt = sum(len(m["content"]) for m in call["messages"]) / PROMPT_CHARS_PER_TOKEN
    assert ANTWORT_BUDGET <= call["max_tokens"] < 2448 and call["max_tokens"] + prompt <= 2048 + 1
    assert "fallback denkbudget_gekuerzt" in caplog.text


def test_the_start_refuses_a_reasoning_pass_the_cap_cannot_give():
    check_budgets(Settings(**QWEN))  # the defaults fit: 400 + 2048 under 4096
    with pytest.raises(ValueError, match=r"'thinker \(reasoning pass\)': 2448"):
        check_budgets(Settings(**QWEN, llm_max_tokens=1024))
    check_budgets(Settings(**QWEN, llm_max_tokens=1024, thinker_reasoning_tokens=600))
    s = Settings(node_max_tokens={"*": 24})
    assert budget("thinker", s) == 24 and REASONING_PASS in str(pytest.raises(
        ValueError, check_budgets, Settings(**QWEN, node_max_tokens={"*": 24}, llm_max_tokens=1000)).value)


def test_a_model_that_does_not_reason_gets_the_answer_budget_alone():
    # SmolLM2 under llama.cpp knows no switch: thinking tokens would only let it ramble on
    llm = ScriptedLLM({"thinker": ["ERGEBNIS: OK"]}, model="smollm2-135m-instruct")
    asyncio.run(run_node(thinker.NODE, _state(), deps_for(llm, settings=Settings())))
    assert [c["max_tokens"] for c in llm.calls] == [ANTWORT_BUDGET]
    assert reasoning_budget(Settings()) == ANTWORT_BUDGET < reasoning_budget(Settings(**QWEN)) == 2448
    assert reasoning_budget(Settings(llm_model="Qwen/Qwen3-8B-GGUF:Q4_K_M")) == 2448  # the tag switch under llama.cpp


# --- (b) thinking off for every other call, as the model knows the switch --------------------------
def _req(think: bool) -> ChatRequest:
    return ChatRequest(messages=[{"role": "system", "content": "Regeln"}, {"role": "user", "content": "Hallo"}],
                       think=think, caller="thinker" if think else "router")


def test_the_switch_reaches_the_model_as_it_knows_it():
    vllm, openai = Settings(llm_backend="vllm").llm, Settings(llm_backend="openai").llm
    for settings in (vllm, openai):  # the chat template's argument, the messages as they are
        for think in (True, False):
            messages, fields = think_fields(_req(think), settings)
            assert fields == {"chat_template_kwargs": {"enable_thinking": think}} and messages == _req(think).messages
    tag = Settings(llm_backend="openai", llm_think_switch="tag").llm
    body = OpenAICompatBackend(tag)._body(_req(False), False)
    assert "chat_template_kwargs" not in body and body["messages"][-1]["content"] == "Hallo /no_think"
    assert OpenAICompatBackend(tag)._body(_req(True), True)["messages"][-1]["content"] == "Hallo /think"
    none = OpenAICompatBackend(Settings(llm_backend="openai", llm_think_switch="none").llm)._body(_req(False), False)
    assert "chat_template_kwargs" not in none and none["messages"] == _req(False).messages


def test_llama_cpp_tells_a_qwen3_model_by_its_tag_and_leaves_others_alone():
    qwen = LlamaCppBackend(Settings(llm_model="Qwen/Qwen3-8B-GGUF:Q4_K_M").llm)
    req = _req(False)
    kw = qwen._kwargs(req)
    assert kw["messages"][-1]["content"] == "Hallo /no_think" and "chat_template_kwargs" not in kw
    assert req.messages[-1]["content"] == "Hallo"  # the request itself is not changed
    assert qwen._kwargs(_req(True))["messages"][-1]["content"] == "Hallo /think"
    smol = LlamaCppBackend(Settings().llm)  # SmolLM2 knows no switch: its prompt stays as it is
    assert smol._kwargs(req)["messages"] == req.messages


# --- (c) no reasoning reaches a parser or the person -----------------------------------------------
def test_inline_reasoning_is_split_closed_cut_or_opened_by_the_template():
    assert split_reasoning("<think>\n\n</think>\n\nERGEBNIS: OK") == ("ERGEBNIS: OK", "")
    # cut by the budget: the thought never closed, nothing of it is content
    assert split_reasoning(f"<think>\n{SPUR} TOOL: web_search(x)") == ("", f"{SPUR} TOOL: web_search(x)")
    # the template opened the block in the prompt: the answer starts inside it
    assert split_reasoning(f"{SPUR} ich pruefe\n</think>\n\nERGEBNIS: OK") == ("ERGEBNIS: OK", f"{SPUR} ich pruefe")
    assert split_reasoning("a < b, kein Denken") == ("a < b, kein Denken", None)


class _FakeLlama:
    """llama-cpp-python's completion as a Qwen3 model answers when its budget ends inside the thought."""

    n_tokens = 12

    def create_chat_completion(self, stream=False, **kw):
        text = f"<think>\n{SPUR} ich pruefe den Kalender"
        if stream:
            return iter([{"choices": [{"delta": {"content": text[i:i + 4]}}]} for i in range(0, len(text), 4)]
                        + [{"choices": [{"delta": {}, "finish_reason": "length"}]}])
        return {"choices": [{"message": {"content": text}, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 7}}


def test_llama_cpp_keeps_a_cut_thought_out_of_the_content_whole_and_streamed():
    b = LlamaCppBackend(Settings().llm)
    b._llm = _FakeLlama()

    async def go():
        whole = await b.chat(_req(True))
        pieces = [c async for c in b.chat_stream(_req(True))]
        return whole, pieces

    whole, pieces = asyncio.run(go())
    assert whole.content == "" and whole.reasoning.startswith(SPUR) and whole.finish_reason == "length"
    assert "".join(c.content or "" for c in pieces) == ""
    assert SPUR in "".join(c.reasoning or "" for c in pieces)


def _deployment(**engine):
    return LLMDeployment.func_or_class(Settings().llm, None, ScriptedEngine.with_script(
        {"responder": ["Schoen, dass du da bist."]}, **engine))


@pytest.mark.parametrize("apart", [False, True], ids=["inline", "reasoning_content"])
def test_the_deployment_hands_on_no_reasoning_in_the_content_whatever_the_engine(apart):
    d = _deployment(reasoning=THOUGHT, reasoning_apart=apart, stray=f"{SPUR} verirrt")
    for think in (True, False):
        req = ChatRequest(messages=[{"role": "user", "content": "Hallo"}], caller="responder", think=think,
                          max_tokens=4000)

        async def go():
            return await d.chat(req), [c async for c in d.chat_stream(req)]

        whole, pieces = asyncio.run(go())
        streamed = "".join(c.content or "" for c in pieces)
        assert whole.content == streamed.strip() == "Schoen, dass du da bist.", (think, whole.content, streamed)
        assert SPUR in whole.reasoning and SPUR in "".join(c.reasoning or "" for c in pieces)
        assert pieces[-1].usage is not None and pieces[-1].finish_reason == "stop"


def test_the_stream_splitter_passes_plain_pieces_untouched():
    apart = StreamReasoningApart()
    c = chunk("m", "c1", {"content": "Hallo, wie geht es dir?"})
    assert apart.feed(c) == [c]
    out = apart.feed(chunk("m", "c1", {"content": "<thi"})) + apart.feed(chunk("m", "c1", {"content": "nk>x</think>ja"}))
    out += apart.feed(chunk("m", "c1", {}, "stop", {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}))
    assert "".join(p.content or "" for p in out) == "ja" and "".join(p.reasoning or "" for p in out) == "x"
    assert out[-1].usage.total_tokens == 3


def test_the_person_reads_no_reasoning_in_the_drafts_of_the_stream():
    engine = ScriptedEngine.with_script({"responder": ["Schoen, dass du da bist."]}, reasoning=THOUGHT,
                                        stray=f"{SPUR} verirrt")
    client = engine_client(engine)
    trace = TurnTrace("u", "nova", "t1", events=asyncio.Queue())

    async def go():
        return await client.chat(trace, "responder", [{"role": "user", "content": "Hallo"}], stream_tokens=True)

    result = asyncio.run(go())
    drafts = []
    while not trace.events.empty():
        e = trace.events.get_nowait()
        if e["event"] == "draft":
            drafts.append(e["text"])
    assert "".join(drafts).strip() == result.content.strip() == "Schoen, dass du da bist."
    assert SPUR in result.reasoning
    [rec] = client.handle.deployment.record(False)
    assert rec["request"]["think"] is False


def test_only_the_thinkers_reasoning_pass_asks_with_thinking_on():
    """Every model call in the code leaves `think` at its default (False) or sets it False, except
    the Thinker's reasoning pass; `llm_json.ask` and the LLM client hand on their caller's, and no
    other caller sets it."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    thinking = []
    for package in ("pipeline", "actors", "serve", "memory", "cluster"):
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for fn in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
                for call in [n for n in ast.walk(fn) if isinstance(n, ast.Call)]:
                    for kw in call.keywords:
                        if kw.arg == "think" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                            thinking.append((str(path.relative_to(root)), fn.name, ast.unparse(kw.value)))
    assert sorted(set(thinking)) == [("pipeline/llm_json.py", "ask", "think"),
                                     ("pipeline/nodes/thinker.py", "_react", "True"),
                                     ("pipeline/services.py", "chat", "think")], thinking
