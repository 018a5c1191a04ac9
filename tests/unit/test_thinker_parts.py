"""The Thinker's building blocks: quick check, both cache stages with their bound, the search
budget with the sachlage path, the normaliser choice, the protocol."""
from pipeline.thinker.budget import SearchBudget
from pipeline.thinker.cache import ToolCache
from pipeline.thinker.normaliser import SPLIT_STEMS, ThinkSplitNormalizer, ThinkingNormalizer, normaliser_for
from pipeline.thinker.protokoll import lesen
from pipeline.thinker.schnellcheck import schnellcheck


def test_quick_check_skip_match_and_force():
    c = schnellcheck("Schoen, dass du da bist!", "Hallo", False)
    assert (c.outcome, c.in_antwort, c.in_reiz, c.reasoning) == ("kein_treffer", [], [], False)
    c = schnellcheck("Der Termin ist am Dienstag um 14 Uhr.", "Wann?", False)
    assert c.outcome == "treffer" and {"am", "dienstag", "um", "uhr"} <= set(c.in_antwort) and c.in_reiz == []
    assert schnellcheck("Schoen.", "Es sind 3 Millionen.", False).in_reiz == ["million"]
    assert "2026" in schnellcheck("Im Jahr 2026.", "", False).in_antwort
    c = schnellcheck("Schoen!", "Hallo", True)
    assert c.outcome == "erzwungen" and c.reasoning and c.zahl == 0


def test_cache_stages_and_bound():
    c = ToolCache(bound=3)
    assert not c.seen_args("timeline_check", {"datum": "2026-12-01"})
    c.remember_args("timeline_check", {"datum": "2026-12-01"}, "Termine: -")
    assert c.seen_args("timeline_check", {"datum": "2026-12-01"}) and c.hits_stage1 == 1
    assert ToolCache.key("t", {"b": 1, "a": 2}) == ToolCache.key("t", {"a": 2, "b": 1})
    assert not c.seen_result([3, 1, 2]) and c.seen_result([1, 2, 3]) and c.hits_stage2 == 1
    for i in range(4):
        c.remember_args("web_fetch", {"url": f"u{i}"}, "x")
    assert not c.seen_args("timeline_check", {"datum": "2026-12-01"})  # FIFO: the oldest went


def test_budget_counts_failures_and_serves_sachlage_first():
    b = SearchBudget(limit=1, sachlage_treffer=[{"titel": "T", "url": "u", "snippet": "s"}])
    assert b.available() and b.take("q") == [{"titel": "T", "url": "u", "snippet": "s"}]
    assert not b.available()
    b = SearchBudget(limit=1)
    assert b.take("q") is None and not b.available()  # an empty or failed provider search counts too


def test_normaliser_follows_the_answering_model():
    assert isinstance(normaliser_for("gemma4-gpu"), ThinkSplitNormalizer)
    assert isinstance(normaliser_for("Qwen3.8-32B"), ThinkSplitNormalizer)
    # seed 000 §3.4's witnesses on both sides: the model that answers, and the two the stem `qwen3` would take in
    assert isinstance(normaliser_for("qwen3.8:27b"), ThinkSplitNormalizer)
    for no_split in ("qwen36-cpu", "qwen3-32b-cpu"):
        assert type(normaliser_for(no_split)) is ThinkingNormalizer, no_split
    # the defaults of the settings are the module's stems, and the vLLM default model is among them
    from core.settings import Settings
    assert tuple(Settings().thinker_reasoning_models) == SPLIT_STEMS
    assert isinstance(normaliser_for(Settings().vllm_model_source), ThinkSplitNormalizer)
    n = normaliser_for("smollm2-135m-instruct")
    assert type(n) is ThinkingNormalizer and not n.needs_follow_up("", "lots of thinking")
    s = ThinkSplitNormalizer()
    assert s.needs_follow_up("", "ich ueberlege") and not s.needs_follow_up("ERGEBNIS: OK", "x")
    assert not s.needs_follow_up("", "")


def test_protocol():
    assert lesen("Ich pruefe.\nTOOL: timeline_check(2026-12-01)").tool == "timeline_check"
    assert lesen('TOOL: web_search("Bundeskanzler 2026")').argument == "Bundeskanzler 2026"
    assert lesen("TOOL: rm_rf(/)").art == "unlesbar"
    assert lesen("ERGEBNIS: OK").art == "ok"
    k = lesen("ERGEBNIS: KORREKTUR\nPROBLEME: falsches Datum\nKORRIGIERTE ANTWORT: Am Donnerstag.")
    assert (k.art, k.probleme, k.antwort) == ("korrektur", "falsches Datum", "Am Donnerstag.")
    assert lesen("ERGEBNIS: KORREKTUR\nPROBLEME: x").art == "korrektur_ohne_text"
    assert lesen("Vielleicht.").art == "unlesbar"
