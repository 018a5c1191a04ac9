"""bench/zeitfolge.py orders each recorded read with the product's own `paarweise` under a setting,
and counts the update set and LoCoMo as bench.wandel and bench.locomo_recall count them."""
import numpy as np

from bench.zeitfolge import auswerten, gereiht
from core.state import Erinnerung
from memory.config import MemoryConfig


def erinnerung(i: int, monat: int, quelle: str) -> Erinnerung:
    return Erinnerung(id=i, inhalt=f"m{i}", quelle=quelle, zeitpunkt=f"2025-{monat:02d}-01T00:00:00+00:00",
                      aktivierung=1.0 - i / 100)


def unit(*v: float) -> np.ndarray:
    x = np.asarray(v, dtype=np.float32)
    return x / np.linalg.norm(x)


EMB = {1: unit(1, 0, 0), 2: unit(0.8, 0.6, 0), 3: unit(0, 0, 1), 4: unit(0, 0.1, 1)}
VOR = [erinnerung(1, 1, "D1:1"), erinnerung(3, 2, "D1:3"), erinnerung(4, 3, "D2:1"), erinnerung(2, 9, "D3:1")]
KOSINUS = {(a.id, b.id): float(EMB[a.id] @ EMB[b.id]) for i, a in enumerate(VOR) for b in VOR[i + 1:]}
"""As the read's `_kosinus` records them: between each memory and those after it."""


def test_a_setting_orders_a_present_question_and_leaves_a_past_one():
    cfg = MemoryConfig(lesepfad_thema_kosinus=0.7)
    jetzt = {"frage": "Wo wohnt Jonas?", "vor": VOR, "kosinus": KOSINUS}
    damals = {"frage": "Wo hat Jonas damals gewohnt?", "vor": VOR, "kosinus": KOSINUS}
    # 2 is newer than 1 and alike (0.8): it passes 1; 4 passes 3 (0.995)
    assert [e.id for e in gereiht(jetzt, cfg)] == [2, 1, 4, 3]
    assert [e.id for e in gereiht(damals, cfg)] == [1, 3, 4, 2]
    assert [e.id for e in gereiht(jetzt, None)] == [1, 3, 4, 2]


def test_the_figures_count_current_above_outdated_and_the_evidence_in_the_top_five_and_ten():
    wandel = [{"form": form, "frage": "Wo wohnt Jonas?", "alt": 1, "neu": 2, "vor": VOR, "kosinus": KOSINUS}
              for form in ("umgeschrieben", "roh")]
    locomo = [{"frage": "What is Jonas doing?", "evidence": ["D1:1", "X"], "vor": VOR, "kosinus": KOSINUS}]
    aus, an = auswerten(wandel, locomo, None), auswerten(wandel, locomo, MemoryConfig(lesepfad_thema_kosinus=0.7))
    assert (aus["current_above_outdated"], aus["as_asked"]) == (0.0, 0.0)
    assert (an["current_above_outdated"], an["as_asked"]) == (1.0, 1.0)
    assert aus["locomo_recall@5"] == an["locomo_recall@5"] == 0.5
