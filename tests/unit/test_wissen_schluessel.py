"""A lorebook entry's activation (memory/wissen_schluessel.py) with keys written the way cards in
the wild write them: capitalised or plural in the text and singular in the key, a key inside a
longer word, whole words and case where the entry asks for them, regex keys in V3's `/…/flags`
form, selective entries and their four logics, the scan depth, the budget."""
import logging

import pytest

from memory import wissen_schluessel as ws
from memory.wissen_schluessel import Eintrag, durch_schluessel, im_budget, trifft


@pytest.mark.parametrize("key, text, expected", [
    ("elf", "I hid behind the shelf.", True),       # a key inside a longer word: a substring
    ("dragon", "Are there Dragons up there?", True),  # plural and capitalised in the text
    ("Elven", "the elven woods", True),
    ("elf", "the elves argued", False),             # not a substring of "elves"
    ("full moon", "Look at the FULL MOON!", True),
    ("  ", "anything", False),
])
def test_keys_match_as_substrings_in_any_case(key, text, expected):
    assert trifft(key, text) is expected


def test_whole_words_and_case_where_the_entry_says_so():
    assert not trifft("dragon", "Are there Dragons?", ganze_woerter=True)
    assert trifft("dragon", "the dragon's lair", ganze_woerter=True)
    assert trifft("Dragon", "Dragon-Lord", ganze_woerter=True)
    assert trifft("Rusty Flagon", "the rusty flagoninn", ganze_woerter=True)  # a key with a space stays a substring
    assert trifft("ASH", "ASH soldiers", gross_klein=True) and not trifft("ASH", "the ash", gross_klein=True)
    assert not trifft("ASH", "Ashcroft", gross_klein=True, ganze_woerter=True)


def test_regex_keys_in_slash_form():
    assert trifft(r"/\borc(s|ish)?\b/i", "ORCS at the gate")
    assert not trifft(r"/\borc(s|ish)?\b/i", "some force out of the orchard")
    assert not trifft("/yakuza|oyabun/", "The Yakuza did it.")  # no `i` flag: case-sensitive
    assert trifft("/yakuza|oyabun/", "the yakuza did it")
    assert trifft("/[/x", "a /[/x b")  # not a valid pattern: matched as plain text
    assert ws.ist_regex("/a+/i") and not ws.ist_regex("a+")


def test_a_runaway_pattern_matches_nothing_and_says_so(caplog):
    with caplog.at_level(logging.WARNING, logger="novaberg.memory"):
        assert not trifft("/(a|aa)+$/", "a" * 40 + "b")
    assert "lorebook.regex_zeitlimit" in caplog.text


@pytest.mark.parametrize("logik, text, expected", [
    ("and_any", "The queen sits on the throne.", True),
    ("and_any", "The queen is tired.", False),
    ("not_all", "The queen, the throne.", True),             # the crown is missing
    ("not_all", "The queen, the throne, the crown.", False),
    ("not_any", "The queen is tired.", True),
    ("not_any", "The queen and her crown.", False),
    ("and_all", "The queen, the throne, the crown.", True),
    ("and_all", "The queen on her throne.", False),
])
def test_selective_entries_and_their_logic(logik, text, expected):
    e = Eintrag(id=1, inhalt="x", schluessel=["queen", "Maren"], sekundaer=["throne", "crown"], selektiv=True,
                logik=logik)
    assert durch_schluessel(e, [text], 2) is expected


def test_secondary_keys_count_only_when_selective():
    e = Eintrag(id=1, inhalt="x", schluessel=["queen"], sekundaer=["throne"], selektiv=False)
    assert durch_schluessel(e, ["The queen is tired."], 2)


def test_scan_depth_reads_the_newest_messages_and_the_entry_own_depth_first():
    e = Eintrag(id=1, inhalt="x", schluessel=["dragon"])
    newest_first = ["And dinner?", "Sure.", "Are there dragons?"]
    assert not durch_schluessel(e, newest_first, 2)
    assert durch_schluessel(e, newest_first, 3)
    assert durch_schluessel(Eintrag(id=1, inhalt="x", schluessel=["dragon"], scan_tiefe=4), newest_first, 2)
    assert not durch_schluessel(e, newest_first, 0)  # depth 0 scans nothing


def test_budget_takes_highest_order_first_and_stops_at_the_first_that_does_not_fit():
    a, b, c = (Eintrag(id=1, inhalt="a" * 40, reihenfolge=100), Eintrag(id=2, inhalt="b" * 400, reihenfolge=50),
               Eintrag(id=3, inhalt="c" * 8, reihenfolge=10))
    kept, left = im_budget([c, b, a], 30)
    assert [e.id for e in kept] == [1] and [e.id for e in left] == [3, 2]  # the small one goes with the big one
    kept, _ = im_budget([a, b, c], 1000)
    assert [e.id for e in kept] == [3, 2, 1]  # placed lowest order first


def _katastrophal(n: int) -> list[Eintrag]:
    """n entries, each with its own catastrophic pattern (nested quantifiers on a long `aaa…b`)."""
    return [Eintrag(id=i, inhalt=f"e{i}", schluessel=[f"/(a+)+$x{{0,{i}}}/"]) for i in range(n)]


class _Uhr:
    """A fake clock: every reading is `schritt` later than the one before."""

    def __init__(self, schritt: float):
        self.t, self.schritt = 0.0, schritt

    def __call__(self) -> float:
        self.t += self.schritt
        return self.t


def test_all_regex_keys_of_a_turn_share_one_budget_and_plain_keys_still_match(caplog):
    text = ["a" * 30 + "b dragon"]
    budget = ws.RegexBudget(0.2, uhr=_Uhr(0.025))  # each search costs 0.025 s on this clock
    plain = Eintrag(id=999, inhalt="Drachen", schluessel=["dragon"])
    with caplog.at_level(logging.WARNING, logger="novaberg.memory"):
        hits = [e.id for e in [*_katastrophal(200), plain] if durch_schluessel(e, text, 2, budget)]
    assert hits == [999]  # the plain key still matched after the budget was spent
    assert budget.ausgewertet == 8 and budget.uebersprungen == 192  # 0.2 s / 0.025 s, not 200 × 50 ms
    assert budget.verbraucht == pytest.approx(0.2)


def test_runaway_patterns_stop_at_the_turn_budget_on_the_real_clock():
    """200 patterns that each run past their own limit: at most budget / per-key limit of them are
    searched (each search takes at least what it was given), the rest skipped."""
    budget = ws.RegexBudget(0.2)
    text = ["a" * 5000 + "b"]
    assert not any(durch_schluessel(e, text, 2, budget) for e in _katastrophal(200))
    assert budget.ausgewertet <= 0.2 / ws.REGEX_TIMEOUT_S + 1
    assert budget.ausgewertet + budget.uebersprungen == 200 and budget.uebersprungen >= 195


def test_a_fast_pattern_costs_the_budget_only_its_time():
    budget = ws.RegexBudget(0.2)
    e = Eintrag(id=1, inhalt="x", schluessel=[r"/\borcs?\b/i"])
    assert all(durch_schluessel(e, ["ORCS at the gate"], 2, budget) for _ in range(500))
    assert budget.ausgewertet == 500 and budget.uebersprungen == 0
