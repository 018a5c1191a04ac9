"""The chain contract over the human, character and background chains: every read has a writer
upstream, every written record and field is read downstream (pipeline/contract.py)."""
import pytest

from pipeline import contract
from pipeline.nodes.dispatcher import BACKGROUND_RECORDS
from pipeline.runner import BACKGROUND_CHAIN, CHARACTER_CHAIN, HUMAN_CHAIN, Loop

OFFEN: dict[str, str] = {
    # written and not yet read: each closes with the issue named (then leaves this list)
}
"""Gaps still open, each with the issue that closes it. The test fails on a gap not listed and on a
listed gap that is closed, so this list only shrinks."""


def _gaps():
    return {str(g) for g in contract.check(HUMAN_CHAIN, CHARACTER_CHAIN, BACKGROUND_CHAIN, BACKGROUND_RECORDS)}


def _key(g: str) -> str:
    return g.split(":")[0]


def test_every_read_is_written_and_every_write_is_read():
    gaps = _gaps()
    new = sorted(g for g in gaps if _key(g) not in OFFEN)
    assert not new, "gaps in the node contract:\n" + "\n".join(new)
    closed = sorted(k for k in OFFEN if k not in {_key(g) for g in gaps})
    assert not closed, "closed, remove from OFFEN:\n" + "\n".join(closed)


def test_the_log_only_allow_list_stays_a_handful():
    assert len(contract.LOG_ONLY) <= 5


def test_the_check_finds_an_unread_field_and_an_unwritten_read(monkeypatch):
    from pipeline.nodes import haltungsraum, responder

    # a record read before anyone writes it
    late = ("db_zugriff", "responder", "haltungsraum")
    assert "responder reads haltung: never written upstream" in {str(g) for g in contract.record_gaps(late)}
    # a record written and read by nobody
    assert "haltungsraum writes haltung: never read downstream" in {
        str(g) for g in contract.record_gaps(("haltungsraum",))}
    # a field no reader names: the responder no longer reading the initiative is caught
    contract._names_read.cache_clear()
    real = contract._names_read

    def without_initiative(name):
        names = real(name)
        return names - {"initiative"} if name == responder.__name__ else names

    monkeypatch.setattr(contract, "_names_read", without_initiative)
    assert "haltungsraum writes HaltungRecord.initiative: never read downstream" in {
        str(g) for g in contract.field_gaps([HUMAN_CHAIN, CHARACTER_CHAIN, BACKGROUND_CHAIN])}
    assert haltungsraum.WRITES == ("haltung",)


def test_optional_reads_are_only_optional_on_the_human_chain():
    from pipeline.nodes import ei_calc

    assert "pair" in ei_calc.OPTIONAL_READS
    # the character chain must write every optional read before its reader runs
    char = {(g.node, g.where) for g in contract.record_gaps(CHARACTER_CHAIN, given={"stimulus"})}
    assert ("ei_calc", "pair") not in char and ("enricher", "emotion") not in char
    assert "ei_calc reads pair: never written upstream" in {
        str(g) for g in contract.record_gaps(HUMAN_CHAIN, optional=False)}


def test_loops_are_checked_as_loops():
    loop = next(s for s in CHARACTER_CHAIN if isinstance(s, Loop) and s.name == "tribunal_schleife")
    # the judging nodes read the facts of the turn too: the reducer's block, the route, the plan
    upstream = ("db_zugriff", "reducer", "router", "planner", "responder", "thinker")
    assert [g for g in contract.record_gaps((*upstream, loop)) if g.kind == "ungeschrieben"
            and g.node in loop.names()] == []


def test_every_log_only_field_is_really_unread(monkeypatch):
    monkeypatch.setattr(contract, "LOG_ONLY", {})
    unread = {g.where for g in contract.field_gaps([HUMAN_CHAIN, CHARACTER_CHAIN, BACKGROUND_CHAIN])}
    assert unread == set(contract._LOG_ONLY_KEYS)  # an entry that someone reads leaves the list


def test_building_a_product_chain_checks_the_contract(monkeypatch):
    from pipeline import runner
    from pipeline.nodes import router

    runner.ChainRunner(CHARACTER_CHAIN, name="character")  # the real chains pass
    # a node that reads a record nothing upstream writes: the chain is refused when it is built
    monkeypatch.setattr(router, "READS", router.READS + ("verfasser",))
    with pytest.raises(runner.NodeContractError, match="router reads verfasser: never written upstream"):
        runner.ChainRunner(CHARACTER_CHAIN, name="character")
