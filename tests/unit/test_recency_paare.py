"""Recency without a mark, as pairs (memory/lesepfad.paarweise): a newer memory passes at most one
older memory of its subject, the one most like it, and an older one is passed at most once — so a
conversation's run of related turns does not carry its newest to the top past all of them."""
from core.state import Erinnerung
from memory.config import MemoryConfig
from memory.lesepfad import paarweise

CFG = MemoryConfig(lesepfad_thema_kosinus=0.45)


def erinnerung(i: int, monat: int, **extra) -> Erinnerung:
    return Erinnerung(id=i, inhalt=f"Erinnerung {i}", zeitpunkt=f"2025-{monat:02d}-01T00:00:00+00:00",
                      aktivierung=1.0 - i / 100, **extra)


def ids(erinnerungen: list[Erinnerung]) -> list[int]:
    return [e.id for e in erinnerungen]


def test_the_newer_memory_of_a_subject_moves_right_before_the_older_one():
    gelesen = [erinnerung(1, 1), erinnerung(2, 3), erinnerung(3, 9)]
    assert ids(paarweise(gelesen, {(1, 3): 0.6}, CFG)) == [3, 1, 2]


def test_of_a_run_of_related_newer_memories_only_the_most_alike_passes_the_older():
    # 1 is the old fact; 2, 3 and 4 are newer turns about the same subject, 3 the most like it
    gelesen = [erinnerung(1, 1), erinnerung(2, 4), erinnerung(3, 6), erinnerung(4, 8)]
    kosinus = {(1, 2): 0.55, (1, 3): 0.8, (1, 4): 0.6, (2, 3): 0.5, (2, 4): 0.7, (3, 4): 0.5}
    # (1, 3) first: 3 passes 1; then (2, 4) — neither taken yet — 4 passes 2; nothing else moves
    assert ids(paarweise(gelesen, kosinus, CFG)) == [3, 1, 4, 2]


def test_two_subjects_each_get_their_current_fact_first():
    gelesen = [erinnerung(1, 1), erinnerung(2, 2), erinnerung(3, 5), erinnerung(4, 7)]
    kosinus = {(1, 4): 0.7, (2, 3): 0.65, (1, 2): 0.1, (1, 3): 0.1, (2, 4): 0.1, (3, 4): 0.1}
    assert ids(paarweise(gelesen, kosinus, CFG)) == [4, 1, 3, 2]


def test_below_the_subject_cosine_nothing_moves():
    gelesen = [erinnerung(1, 1), erinnerung(2, 9)]
    assert ids(paarweise(gelesen, {(1, 2): 0.44}, CFG)) == [1, 2]


def test_a_superseded_or_undated_memory_is_no_party_to_recency():
    alt = erinnerung(1, 1, gueltig_bis="2025-06-01T00:00:00+00:00")
    ohne_datum = Erinnerung(id=3, inhalt="undatiert", aktivierung=0.5)
    gelesen = [alt, erinnerung(2, 9), ohne_datum]
    assert ids(paarweise(gelesen, {(1, 2): 0.9, (2, 3): 0.9}, CFG)) == [1, 2, 3]


def test_an_older_memory_never_passes_a_newer_one():
    gelesen = [erinnerung(2, 9), erinnerung(1, 1)]
    assert ids(paarweise(gelesen, {(2, 1): 0.9}, CFG)) == [2, 1]
