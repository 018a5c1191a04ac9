"""The knowledge-update development set (bench/data/wandel.json) is what bench/wandel.py needs: at
least 60 valid scenarios, German and English about half each, every category in both languages."""
from collections import Counter
from datetime import timedelta

import pytest

from bench import wandel
from memory.importer import load_conversation

SZENARIEN = wandel.laden()
MONATE = timedelta(days=60)
"""An update comes months after the fact it replaces."""


def test_the_set_holds_at_least_60_scenarios_in_both_languages_and_every_category():
    assert len(SZENARIEN) >= 60
    assert len({s["id"] for s in SZENARIEN}) == len(SZENARIEN)
    sprachen = Counter(s["sprache"] for s in SZENARIEN)
    assert set(sprachen) == set(wandel.SPRACHEN)
    assert min(sprachen.values()) >= 0.4 * len(SZENARIEN)  # roughly half each
    for sprache in wandel.SPRACHEN:
        assert {s["kategorie"] for s in SZENARIEN if s["sprache"] == sprache} == set(wandel.KATEGORIEN)


@pytest.mark.parametrize("sz", SZENARIEN, ids=[s["id"] for s in SZENARIEN])
def test_a_scenario_has_an_older_fact_an_update_months_later_conversation_around_them_and_a_question(sz):
    assert sz["kategorie"] in wandel.KATEGORIEN and sz["sprache"] in wandel.SPRACHEN
    daten = [wandel.datum(s["datum"]) for s in sz["sitzungen"]]
    assert daten == sorted(daten) and len(set(daten)) == len(daten)
    (sa, ta), (sn, tn) = wandel.fundstelle(sz, sz["alt"]), wandel.fundstelle(sz, sz["neu"])
    assert ta % 2 == 0 and tn % 2 == 0  # both said by the person (a session's even turns)
    assert daten[sn] - daten[sa] >= MONATE
    person = [t for s in sz["sitzungen"] for t in s["turns"][::2]]
    assert len(person) >= 4  # ordinary conversation beside the two facts
    assert all(isinstance(t, str) and t.strip() for s in sz["sitzungen"] for t in s["turns"])
    assert sz["frage"].strip().endswith("?") and sz["alt"] not in sz["frage"] and sz["neu"] not in sz["frage"]


def test_a_scenario_reads_as_the_importers_conversation_with_its_facts_dated_by_their_sessions():
    sz = SZENARIEN[0]
    _, turns = load_conversation(wandel.als_locomo(sz))
    f = wandel.fakten(sz)
    by_id = {t.source_id: t for t in turns}
    assert sz["alt"] in by_id[f["alt"]].text and sz["neu"] in by_id[f["neu"]].text
    assert by_id[f["alt"]].speaker == sz["person"] and by_id[f["neu"]].when == f["seit"]
    assert len(turns) == sum(len(s["turns"]) for s in sz["sitzungen"])


def test_the_background_is_the_other_scenarios_conversation_of_the_language_without_their_facts():
    sz = SZENARIEN[0]
    extra = wandel.hintergrund(sz, SZENARIEN)
    _, turns = load_conversation(wandel.als_locomo(sz, hintergrund=extra))
    texte = [t.text for t in turns]
    assert len(texte) > 5 * sum(len(s["turns"]) for s in sz["sitzungen"])
    assert len({t.source_id for t in turns}) == len(turns)
    assert sum(sz["alt"] in t for t in texte) == 1 and sum(sz["neu"] in t for t in texte) == 1
    andere = [o for o in SZENARIEN if o["id"] != sz["id"]]
    assert not any(o["alt"] in t or o["neu"] in t for o in andere for t in texte)
    assert {o["sprache"] for o in andere if any(s["turns"][-1] in texte for s in o["sitzungen"])} <= {sz["sprache"]}
