"""Structured outputs: every structured node's answer model becomes a schema the engine is held
to (all fields present, vocabularies as enums, strings and lists bounded), each backend passes it
on in its engine's form, the Thinker's protocol as a grammar and a regex, and the setting that
turns it off."""
import importlib
import json
import pkgutil
import re

import pytest

import pipeline.nodes
from core.settings import Settings
from core.wire import ChatRequest
from pipeline import vocab
from pipeline.llm_json import STRING_CAP, engine_schema
from pipeline.thinker import protokoll
from serve.llm import constraints
from serve.llm_backends import LlamaCppBackend, OpenAICompatBackend


def structured_nodes() -> dict[str, type]:
    """Every node that asks for JSON (it has an answer model)."""
    out = {}
    for m in pkgutil.iter_modules(pipeline.nodes.__path__):
        mod = importlib.import_module(f"pipeline.nodes.{m.name}")
        if hasattr(mod, "_Antwort") and "ask_json" in vars(mod):
            out[m.name] = mod._Antwort
    return out


def test_every_structured_node_is_found():
    assert set(structured_nodes()) == {"aufgriff", "erinnerungsanker", "gv_node", "perzeption", "perzeption_assistant",
                                       "planner", "praegung", "router", "sachlage", "salience", "selbstbild",
                                       "tribunal", "zielbildung", "zusammenfassung"}


def _schemas(s, kind):
    """Every sub-schema of the given type."""
    if isinstance(s, dict):
        if s.get("type") == kind:
            yield s
        for v in s.values():
            yield from _schemas(v, kind)
    elif isinstance(s, list):
        for v in s:
            yield from _schemas(v, kind)


@pytest.mark.parametrize("node", sorted(structured_nodes()))
def test_engine_schema_leaves_the_model_nothing_to_skip_and_compiles_to_a_grammar(node):
    from llama_cpp import LlamaGrammar

    schema = engine_schema(structured_nodes()[node])
    for obj in _schemas(schema, "object"):
        if "properties" in obj:
            assert obj["required"] == list(obj["properties"]) and obj["additionalProperties"] is False
    for s in _schemas(schema, "string"):
        assert {"maxLength", "enum", "pattern"} & set(s), (node, s)
    for s in _schemas(schema, "array"):
        assert "maxItems" in s, (node, s)
    text = json.dumps(schema)
    assert '"default"' not in text
    LlamaGrammar.from_json_schema(text, verbose=False)


def test_vocabularies_become_enums_and_validation_stays_lenient():
    nodes = structured_nodes()
    p = engine_schema(nodes["perzeption"])["properties"]
    assert p["emotion"]["enum"] == list(vocab.EMOTIONEN)
    assert p["user_intentionen"]["items"]["enum"] == list(vocab.USER_INTENTIONEN)
    assert p["tone"]["maxLength"] == STRING_CAP
    assert engine_schema(nodes["tribunal"])["properties"]["urteil"]["enum"] == ["ok", "mangel"]
    assert engine_schema(nodes["gv_node"])["properties"]["cluster"]["enum"] == list(vocab.CLUSTER)
    # an engine that ignores the schema may still answer outside: the node maps it, by name
    assert nodes["perzeption"].model_validate({"emotion": "wut"}).emotion == "wut"


def test_the_thinker_protocol_as_grammar_and_regex():
    from llama_cpp import LlamaGrammar

    LlamaGrammar.from_string(protokoll.GBNF, verbose=False)
    good = ["TOOL: memory_search(Bello)", "ERGEBNIS: OK", "<think>pruefen</think>\nERGEBNIS: OK",
            "ERGEBNIS: KORREKTUR\nPROBLEME: falscher Tag\nKORRIGIERTE ANTWORT: Heute ist Montag."]
    for text in good:
        assert re.fullmatch(protokoll.REGEX, text), text
        assert protokoll.lesen(text).art != "unlesbar"
    for text in ["TOOL: rm(-rf)", "Ich denke, es ist alles gut.", "ERGEBNIS: vielleicht"]:
        assert not re.fullmatch(protokoll.REGEX, text), text


def _request(**extra) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": "x"}], temperature=0.2, max_tokens=20,
                       caller="tribunal", **extra)


def test_llamacpp_gets_a_grammar_for_a_schema_or_the_protocol():
    b = LlamaCppBackend(Settings())
    schema = engine_schema(structured_nodes()["tribunal"])
    kw = b._kwargs(_request(response_schema=schema))
    assert kw["grammar"] is b._kwargs(_request(response_schema=schema))["grammar"]  # compiled once
    assert "grammar" in b._kwargs(_request(protocol=protokoll.PROTOKOLL))
    assert "grammar" not in b._kwargs(_request())


def test_openai_backend_sends_response_format_json_schema():
    b = OpenAICompatBackend(Settings())
    schema = engine_schema(structured_nodes()["tribunal"])
    body = b._body(_request(response_schema=schema), False)
    assert body["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "tribunal_antwort", "schema": schema}}
    assert "response_format" not in b._body(_request(protocol=protokoll.PROTOKOLL), False)


def test_structured_outputs_can_be_turned_off():
    req = _request(response_schema={"type": "object"}, protocol=protokoll.PROTOKOLL)
    assert constraints(Settings(), req) is req
    off = constraints(Settings(llm_structured_outputs=False), req)
    assert off.response_schema is None and off.protocol is None and off.messages == req.messages
    assert req.response_schema == {"type": "object"} and req.protocol.gbnf == protokoll.GBNF  # left as it was


def test_ask_json_hands_the_schema_to_the_engine():
    import asyncio

    from pipeline.llm_json import ask_json
    from tests.scripted_llm import ScriptedLLM, deps_for

    llm = ScriptedLLM({"tribunal": ['{"urteil": "ok", "gruende": []}']})
    deps = deps_for(llm)
    answer, outcome = asyncio.run(ask_json(deps, "tribunal", structured_nodes()["tribunal"], {
        "character_name": "Nova", "figur": "Nova.", "nachricht": "Hi", "direktiven": "keine", "hinweise": "keine",
        "fakten": "[FAKTEN]", "antwort": "Hallo"}))
    assert outcome == "ok" and answer.urteil == "ok"
    assert llm.calls[0]["response_schema"] == engine_schema(structured_nodes()["tribunal"])


@pytest.mark.parametrize("text", ['{"in_minuten": NaN}', '{"in_minuten": Infinity}', '{"x": -Infinity}',
                                  '{"in_minuten": 1e999}'])
def test_numbers_that_are_not_finite_are_never_used(text):
    from pipeline.llm_json import first_json_object

    assert first_json_object(text) is None
    assert first_json_object('{"in_minuten": 1.5e3}') == {"in_minuten": 1500.0}


def _laengste(s: dict, defs: dict):
    """The longest answer a schema allows, filled with German words and long numbers."""
    if "$ref" in s:
        return _laengste(defs[s["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in s:
        return max((_laengste(x, defs) for x in s["anyOf"]), key=lambda v: len(json.dumps(v)))
    if "enum" in s:
        return max(s["enum"], key=lambda e: len(json.dumps(e)))
    typ = s.get("type")
    if typ == "object":
        return {k: _laengste(v, defs) for k, v in s.get("properties", {}).items()}
    if typ == "array":
        return [_laengste(s.get("items", {}), defs) for _ in range(s.get("maxItems", 3))]
    if typ == "string":
        return ("Er erzaehlt von seinem Hund Bello, der gern im Regen spazieren geht und " * 20)[: s["maxLength"]]
    if typ in ("number", "integer"):
        return 1234567890123456.1234567890123456 if typ == "number" else 1234567890123456
    return True


def test_every_structured_nodes_budget_holds_its_longest_answer():
    """A budget below the longest valid answer lets the engine cut a valid answer inside the JSON.
    The estimate holds against the embedded model's own tokenizer."""
    from llama_cpp import Llama

    from pipeline.llm_json import antwort_tokens
    from pipeline.node_config import budget
    from serve.llm_backends import smollm2_gguf

    tok = Llama(model_path=str(smollm2_gguf()), vocab_only=True, verbose=False)
    settings = Settings()
    for node, model in structured_nodes().items():
        schema = engine_schema(model)
        text = json.dumps(_laengste(schema, schema.get("$defs", {})), ensure_ascii=False)
        real = len(tok.tokenize(text.encode(), add_bos=False))
        assert real <= antwort_tokens(schema) <= budget(node, settings), (node, real, antwort_tokens(schema))
    assert budget("planner", settings) > 160 and budget("tribunal", settings) == 160


def test_strings_in_the_grammar_hold_no_raw_control_character_and_no_unicode_escape():
    """llama-cpp-python's own string rule lets a raw newline into a string (invalid JSON: the
    answer was lost as `kein_json`) and counts a six-character `\\uXXXX` as one against maxLength;
    the grammar the engine gets allows neither, and still compiles for every structured node."""
    import json

    from llama_cpp import LlamaGrammar
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    from serve.llm_backends import JSON_CHAR, json_grammar

    with_strings = 0
    for node, model in structured_nodes().items():
        text = json.dumps(engine_schema(model), sort_keys=True)
        ours = [line for line in json_grammar(text).splitlines() if line.startswith("char ::=")]
        theirs = [line for line in json_schema_to_gbnf(text).splitlines() if line.startswith("char ::=")]
        assert ours == ([JSON_CHAR] if theirs else []) and (not theirs or theirs != ours), node
        with_strings += bool(ours)
        LlamaGrammar.from_string(json_grammar(text), verbose=False)
    assert with_strings >= 10
    assert "\\x00-\\x1F" in JSON_CHAR and '"u"' not in JSON_CHAR


def test_an_answer_with_a_raw_newline_in_a_string_is_read():
    """An engine without a grammar may still write one: the answer is read, not lost."""
    from pipeline.llm_json import first_json_object

    assert first_json_object('Antwort: {"kern": "Bello\nist weg", "n": 1}') == {"kern": "Bello\nist weg", "n": 1}


def test_a_free_object_is_bounded_in_keys_entries_and_values():
    """The planner's `parameter` is a dict: llama-cpp-python's grammar would let its keys, its
    entries and its values run without end (an answer cut inside them is lost); held here to
    ARRAY_CAP entries, keys of SCHLUESSEL_CAP characters, flat bounded texts — and the budget counts
    them."""
    from llama_cpp import LlamaGrammar

    from pipeline.llm_json import ARRAY_CAP, FREI_WERT, SCHLUESSEL_CAP, antwort_tokens, liste
    from pipeline.node_config import NODE_CONFIG
    from pipeline.nodes.planner import _Antwort
    from serve.llm_backends import json_grammar

    schema = engine_schema(_Antwort)
    auftrag = schema["$defs"]["_Auftrag"]["properties"]
    assert auftrag["parameter"]["additionalProperties"] == FREI_WERT and auftrag["parameter"]["maxProperties"] == ARRAY_CAP
    assert auftrag["agent"]["maxLength"] == auftrag["aktion"]["maxLength"] == 16
    g = json_grammar(json.dumps(schema, sort_keys=True))
    key = [line for line in g.splitlines() if line.startswith("string ::=")][0]
    assert key.count("char") == SCHLUESSEL_CAP and "*" not in key
    kvs = [line for line in g.splitlines() if "-additional-kvs ::=" in line][0]
    assert kvs.count("-additional-kv") == 1 + ARRAY_CAP and ")*" not in kvs
    LlamaGrammar.from_string(g, verbose=False)
    assert antwort_tokens(schema) <= NODE_CONFIG["planner"].max_tokens
    assert liste("Lena, Tom") == ["Lena", "Tom"] and liste(["Lena"]) == ["Lena"] and liste(None) == []


@pytest.mark.parametrize("cut, expected", [
    ('{"cluster": "nebelwald", "gv_detail": "} 50000 10 5 16, 2014 19", "vehikel": "} 2018 21, 2026',
     {"cluster": "nebelwald", "gv_detail": "} 50000 10 5 16, 2014 19", "vehikel": "} 2018 21, 2026"}),
    ('{"a": 1, "b"', {"a": 1}),
    ('{"a": 1, "b":  ', {"a": 1}),
    ('{"a": [1, 2', {"a": [1, 2]}),
    ('{"a": {"x": "y"}, "b": tr', {"a": {"x": "y"}}),
    ('{"a": "x\\u00', {"a": "x"}),
    ('{"a": "x\\\\', {"a": "x\\"}),
    ('{"auftraege": [{"agent": "notizen", "parameter": {"name": "a", "fr',
     {"auftraege": [{"agent": "notizen", "parameter": {"name": "a"}}]}),
    ("kein JSON", None),
    ('{"selbst": ', None),
    ('{"a": NaN, "b": "x', None),
])
def test_an_answer_cut_off_by_the_budget_is_closed_where_it_ended(cut, expected):
    from pipeline.llm_json import json_schliessen

    assert json_schliessen(cut) == expected


def test_a_cut_off_answer_that_then_fits_is_used_and_named(caplog):
    """Seen in bench.structured: gv_node's answer ran out of tokens inside a string of digits
    (SmolLM2 spends a token per digit). Closed, it validates: the node gets it, the decision says
    `geschlossen` and the log names the fallback."""
    import asyncio
    import logging

    from pipeline.llm_json import ask_json
    from tests.scripted_llm import ScriptedLLM, deps_for

    llm = ScriptedLLM({"tribunal": ['{"urteil": "mangel", "gruende": ["Der Termin ist am Dienst']})
    deps = deps_for(llm)
    with caplog.at_level(logging.WARNING, logger="novaberg.llm_json"):
        answer, outcome = asyncio.run(ask_json(deps, "tribunal", structured_nodes()["tribunal"], {
            "character_name": "Nova", "figur": "Nova.", "nachricht": "Hi", "direktiven": "keine",
            "hinweise": "keine", "fakten": "[FAKTEN]", "antwort": "Hallo"}))
    assert outcome == "geschlossen" and answer.urteil == "mangel" and answer.gruende == ["Der Termin ist am Dienst"]
    assert "abgeschnitten_geschlossen" in caplog.text
    entry = [d for d in deps.trace.decisions("tribunal.antwort")][0]
    assert entry.outcome == "geschlossen"
