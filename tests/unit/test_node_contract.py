"""The chain contract over the human, character and background chains: every read has a writer
upstream, every written record and field is read downstream (pipeline/contract.py)."""
import pytest

from pipeline import contract
from pipeline.nodes.dispatcher import BACKGROUND_RECORDS
from pipeline.chains import BACKGROUND_CHAIN, CHARACTER_CHAIN, HUMAN_CHAIN, NODES, check_chains
from pipeline.node import NodeDeclarationError
from pipeline.runner import Loop, NodeContractError

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
    from pipeline.nodes import haltungsraum, responder, verfasser

    # a record read before anyone writes it
    late = tuple(NODES[n] for n in ("db_zugriff", "responder", "haltungsraum"))
    assert "responder reads haltung: never written upstream" in {str(g) for g in contract.record_gaps(late)}
    # a record written and read by nobody
    assert "haltungsraum writes haltung: never read downstream" in {
        str(g) for g in contract.record_gaps((haltungsraum.NODE,))}
    # a field no reader names: the responder and the Verfasser no longer reading the initiative is caught
    contract._names_read.cache_clear()
    real = contract._names_read

    def without_initiative(name):
        names = real(name)
        return names - {"initiative"} if name in (responder.__name__, verfasser.__name__) else names

    monkeypatch.setattr(contract, "_names_read", without_initiative)
    assert "haltungsraum writes HaltungRecord.initiative: never read downstream" in {
        str(g) for g in contract.field_gaps([HUMAN_CHAIN, CHARACTER_CHAIN, BACKGROUND_CHAIN])}
    assert haltungsraum.NODE.writes == ("haltung",)


def test_optional_reads_are_only_optional_on_the_human_chain():
    from pipeline.nodes import ei_calc

    assert "pair" in ei_calc.NODE.optional_reads
    # the character chain must write every optional read before its reader runs
    char = {(g.node, g.where) for g in contract.record_gaps(CHARACTER_CHAIN, given={"stimulus"})}
    assert ("ei_calc", "pair") not in char and ("enricher", "emotion") not in char
    assert "ei_calc reads pair: never written upstream" in {
        str(g) for g in contract.record_gaps(HUMAN_CHAIN, optional=False)}


def test_loops_are_checked_as_loops():
    loop = next(s for s in CHARACTER_CHAIN if isinstance(s, Loop) and s.name == "tribunal_schleife")
    # the judging nodes read the facts of the turn too: the reducer's block, the route, the plan;
    # the corrector the span its rewrite keeps (haltungsraum)
    upstream = tuple(NODES[n] for n in ("db_zugriff", "reducer", "router", "planner", "haltungsraum", "responder",
                                        "thinker"))
    assert [g for g in contract.record_gaps((*upstream, loop)) if g.kind == "ungeschrieben"
            and g.node in loop.names()] == []


def test_every_log_only_field_is_really_unread(monkeypatch):
    monkeypatch.setattr(contract, "LOG_ONLY", {})
    unread = {g.where for g in contract.field_gaps([HUMAN_CHAIN, CHARACTER_CHAIN, BACKGROUND_CHAIN])}
    assert unread == set(contract._LOG_ONLY_KEYS)  # an entry that someone reads leaves the list


def test_the_product_chains_are_checked_when_they_are_built():
    import dataclasses

    from pipeline.nodes import router

    check_chains()  # the real chains pass (and were checked when pipeline.chains was imported)
    # a node that reads a record nothing upstream writes: the chain is refused
    greedy = dataclasses.replace(router.NODE, reads=router.NODE.reads + ("verfasser",), run=router.run,
                                 early=router.voraus, at_start=router.vorab)
    character = tuple(greedy if s is router.NODE else s for s in CHARACTER_CHAIN)
    with pytest.raises(NodeContractError, match="router reads verfasser: never written upstream"):
        check_chains(character=character)
    # a node whose declaration promises an early start it does not bind
    unbound = dataclasses.replace(router.NODE, early=None)
    with pytest.raises(NodeDeclarationError, match="router: early_without without an early start"):
        check_chains(character=tuple(unbound if s is router.NODE else s for s in CHARACTER_CHAIN))


def test_every_chain_a_runner_takes_is_built_of_node_objects():
    """The worker runs the background's human part (`MENSCH_CHAIN`) for a turn whose character
    chain failed; a chain of names is refused when the runner is built, so each chain is built here."""
    from pipeline.chains import MENSCH_CHAIN
    from pipeline.runner import ChainRunner

    for chain in (HUMAN_CHAIN, CHARACTER_CHAIN, BACKGROUND_CHAIN, MENSCH_CHAIN):
        ChainRunner(chain, name="check")
    with pytest.raises(TypeError):
        ChainRunner(("salience",), name="names")
