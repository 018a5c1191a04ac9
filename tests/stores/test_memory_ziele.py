"""Goals: pair order of both chains, activation threshold, zielsog_roh, the forgetting restart,
and every exit of the perception gravity."""
import asyncio

import numpy as np
import pytest

from core.beziehung import PaarZiel
from core.state import AktiviertesZiel
from memory import ziele
from memory.config import MemoryConfig
from memory.vectors import cosine
from memory.ziele import Aktivierung, aktivieren, wahrnehmung_verschieben, ziel_paar_bestimmen
from tests.conftest import at_cosine, new_pair, unit, with_pool


def test_both_chains_read_the_same_goal_pair():
    assert ziel_paar_bestimmen(("anna", "nova"), "human") == ("nova", "anna")
    assert ziel_paar_bestimmen(("nova", "anna"), "character") == ("nova", "anna")
    with pytest.raises(ValueError):
        ziel_paar_bestimmen(("a", "b"), "agent")


def _goal(i, cos, motivation, horizont="mittel", axis=1, inhalt=None, embedding=True):
    return PaarZiel(id=i, inhalt=inhalt or f"Ziel {i}", horizont=horizont, motivation=motivation,
                    motivation_basis=motivation, behalten=1.0,
                    embedding=at_cosine(cos, axis=axis).tolist() if embedding else None,
                    anker="2026-01-01T00:00:00+00:00", verstaerkt_am="2026-01-01T00:00:00+00:00")


def test_activation_threshold_and_ungated_pull():
    goals = [_goal(1, 0.8001, 0.5), _goal(2, 0.7999, 0.5, axis=2), _goal(3, 0.3, 1.0, axis=3),
             _goal(4, 0.0, 1.0, "lang", inhalt="ohne Vektor", embedding=False)]
    a = aktivieren(goals, unit(0), threshold=0.4)
    assert [g.id for g in a.aktivierte] == [1]  # 0.40005 ≥ 0.4 > 0.39995
    assert set(a.ziel_vektoren) == {1} and a.ohne_embedding == [4]
    assert abs(a.zielsog_roh - 0.40005) < 1e-4
    none = aktivieren(goals[2:3], unit(0), threshold=0.4)
    assert none.aktivierte == [] and abs(none.zielsog_roh - 0.3) < 1e-4  # ungated strength stays


def test_goals_in_the_store_and_the_forgetting_restart(pool):
    async def go(p):
        user, ch = new_pair("ziel")
        mid = await ziele.add_goal(p, ch, user, "Gitarre lernen", "mittel", 0.9, at_cosine(0.9))
        long_ = await ziele.add_goal(p, ch, user, "Haus bauen", "lang", 0.9, at_cosine(0.9, axis=2))
        before = {g.id: g for g in await ziele.load_goals(p, ch, user)}
        a = aktivieren(list(before.values()), unit(0), 0.4)
        assert {g.id for g in a.aktivierte} == {mid, long_}
        assert await ziele.verstaerken(p, a.aktivierte) == [mid]
        after = {g.id: g for g in await ziele.load_goals(p, ch, user)}
        assert after[mid].verstaerkt_am > before[mid].verstaerkt_am
        assert after[mid].anker == before[mid].anker
        assert after[long_].verstaerkt_am == before[long_].verstaerkt_am
        assert await ziele.load_goals(p, user, ch) == []  # the reversed pair reads nothing

    asyncio.run(with_pool(pool, go))


def test_every_gravity_exit():
    cfg = MemoryConfig()
    q = unit(0).tolist()
    act = aktivieren([_goal(1, 0.9, 0.9)], unit(0), 0.4)
    v, ex, _ = wahrnehmung_verschieben(q, act, "feuerwerk", cfg)
    assert ex == "verschoben"
    expected = np.asarray(q) * 0.7 + np.asarray(act.ziel_vektoren[1]) * act.aktivierte[0].aktivierungs_staerke * 0.3
    assert np.allclose(v, expected, atol=1e-6) and 0 < cosine(q, v) < 1
    assert wahrnehmung_verschieben(q, act, "feuerwerk", cfg, gedaechtnis_suche=False)[1] == "keine_gedaechtnis_suche"
    assert wahrnehmung_verschieben(None, act, "feuerwerk", cfg)[1] == "kein_anfrage_embedding"
    assert wahrnehmung_verschieben(q, act, "feuerwerk", cfg, intention_anweisung=True)[:2] == (q, "anweisung")
    assert wahrnehmung_verschieben(q, aktivieren([], unit(0), 0.4), "feuerwerk", cfg)[:2] == (q, "keine_ziele")
    no_vec = Aktivierung(act.aktivierte, {}, act.zielsog_roh, [])
    assert wahrnehmung_verschieben(q, no_vec, "feuerwerk", cfg)[1] == "kein_ziel_embedding"
    assert wahrnehmung_verschieben(q, act, "mondlandschaft", cfg)[1] == "cluster_unbekannt"
    short = Aktivierung(act.aktivierte, {1: [1.0] * 10}, act.zielsog_roh, [])
    assert wahrnehmung_verschieben(q, short, "feuerwerk", cfg)[1] == "dimension_ungleich"
    # a pull that points away from the question is rejected, not clipped
    away = Aktivierung([act.aktivierte[0].model_copy(update={"aktivierungs_staerke": 50.0})], {1: (-unit(0)).tolist()}, 50.0, [])
    v, ex, info = wahrnehmung_verschieben(q, away, "feuerwerk", cfg)
    assert ex == "verworfen_ausser_spanne" and v == q and info["cosinus"] <= 0
