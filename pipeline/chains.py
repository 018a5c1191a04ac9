"""The three chains, as lists of node objects (docs/CHAINS.md), and every node by its name.

The human's message is perceived and remembered first (its salience and the dispatcher's writes
travel in the background job the character chain's dispatcher commits); the character chain
answers; the background chain runs in the outbox worker after the reply left, never on its path.
Importing this module checks the chains: every node's declaration complete, every read written
upstream and every written record read downstream (`pipeline/contract.py`; the field-level check
runs in the test suite) — a broken chain fails here, not in a turn.
"""
from __future__ import annotations

from typing import Sequence

from pipeline import contract
from pipeline.node import Node
from pipeline.nodes import (agent_dispatch, aufgriff, corrector, db_zugriff, dispatcher, ei_calc, ei_calc_persist,
                            emotionale_gravitation, enricher, erinnerungsanker, evaluate, gv_node, haltungsraum,
                            leckschutz, perzeption, perzeption_assistant, planner, praegung, reducer, responder,
                            router, sachlage, salience, selbstbild, thinker, tribunal, verfasser, zielbildung,
                            zusammenfassung)
from pipeline.runner import Loop, NodeContractError, steps_names
from pipeline.services import Deps
from core.state import Stimulus, TurnState


def _agent_requested(state: TurnState) -> bool:
    return bool(state.plan and state.plan.agent_name)


def _correction_due(state: TurnState) -> bool:
    return bool(state.urteil and not state.urteil.bestanden)


PLANNER_LOOP = Loop((planner.NODE,), (agent_dispatch.NODE,), _agent_requested, max_rounds=4, name="planner_schleife")
TRIBUNAL_LOOP = Loop((tribunal.NODE, evaluate.NODE), (corrector.NODE,), _correction_due, max_rounds=2,
                     name="tribunal_schleife")

HUMAN_CHAIN: tuple = (perzeption.NODE, enricher.NODE, ei_calc.NODE)
"""ei_calc here is the user path (seed 001 §2, `ei_calc_rolle` "user"): the human's side of the
emotion record, which the character chain's ei_calc takes over and adds Nova's empathy update to."""
CHARACTER_CHAIN: tuple = (
    db_zugriff.NODE, ei_calc.NODE, enricher.NODE, emotionale_gravitation.NODE, reducer.NODE, sachlage.NODE,
    erinnerungsanker.NODE, router.NODE, PLANNER_LOOP, gv_node.NODE, haltungsraum.NODE, verfasser.NODE,
    responder.NODE, thinker.NODE, TRIBUNAL_LOOP, leckschutz.NODE, perzeption_assistant.NODE, ei_calc_persist.NODE,
    dispatcher.NODE,
)
BACKGROUND_CHAIN: tuple = (salience.NODE, zielbildung.NODE, praegung.NODE, selbstbild.NODE, aufgriff.NODE,
                           zusammenfassung.NODE)
MENSCH_CHAIN: tuple = (salience.NODE,)
"""The background of a human's turn kept on its own (Nova's chain failed; seed 001 §2: the human's
path ends in `salience → dispatcher`): his words scored, a KZG entry when they matter. The turn's
later success runs the whole chain and its KZG entry takes the same place (keyed by the turn)."""

NODES: dict[str, Node] = {}
"""Every node of the three chains by its name (the node deployment and `Settings.remote_nodes`
name them)."""
for _chain in (HUMAN_CHAIN, CHARACTER_CHAIN, BACKGROUND_CHAIN):
    for _step in _chain:
        for _node in (_step.nodes() if isinstance(_step, Loop) else (_step,)):
            NODES[_node.name] = _node


def check_chains(human: Sequence = HUMAN_CHAIN, character: Sequence = CHARACTER_CHAIN,
                 background: Sequence = BACKGROUND_CHAIN) -> None:
    """Raise `NodeDeclarationError` for a declaration whose functions are not bound, and
    `NodeContractError` for a record-level gap."""
    for chain in (human, character, background, MENSCH_CHAIN):
        for step in chain:
            for node in (step.nodes() if isinstance(step, Loop) else (step,)):
                node.check_complete()
    gaps = contract.record_check(human, character, background, dispatcher.BACKGROUND_RECORDS)
    if gaps:
        raise NodeContractError("the chains break the node contract: " + "; ".join(map(str, gaps)))


check_chains()

_TURN_START = tuple(NODES[n] for n in dict.fromkeys(steps_names((*HUMAN_CHAIN, *CHARACTER_CHAIN)))
                    if NODES[n].at_start is not None)


def vorab_starten(deps: Deps, stimulus: Stimulus, remote: Sequence[str] = ()) -> list[str]:
    """At a turn's start, every node of the two chains with an `at_start` (`@NODE.at_turn_start`)
    starts the reads it needs nothing of this turn for (`at_start_reads`; nothing the turn runs
    before the node writes them) and its model call where it declares one, so they run beside
    perzeption's model call instead of on the reply's path. A node in the node deployment
    (`remote`) starts nothing: its reads happen there. Returns the nodes that started reads."""
    started = [node for node in _TURN_START if node.name not in remote]
    for node in started:
        node.at_start(deps, stimulus)
    return [node.name for node in started]
