"""dispatcher: commit the turn. Both session turns (each with its speaker and perception), the
stored result (what a repeated turn_id returns), Nova's state after the turn and two outbox jobs
— the durable Postgres record with the pipeline_log rows, and the background work (salience,
praegung, aufgriff and their pending writes) — go to Redis in one atomic step. Nothing here waits
for the background."""
from __future__ import annotations

import logging
import time
from datetime import datetime, timezone

from core.state import DispatchRecord, NovaZustandRecord, SessionTurn, Stimulus, TurnState, current_reply
from core.wire import (BackgroundJob, BackgroundState, HumanCommit, KeptTurn, NodeLogRow, PushedMessage,
                       SelfTriggerJob, SwitchLogRow, TurnCommit, TurnJob, TurnRecordJob, TurnResult)
from memory import session
from pipeline.node import Node
from pipeline.services import Deps

NAME = "dispatcher"
NODE = Node(
    name=NAME,
    reads=("stimulus", "pair", "memory", "draft", "pruefung", "urteil", "perzeption", "emotion", "route",
           "nova_perzeption", "plan", "nova_zustand"),
    writes=("dispatch",),
    store_reads=("session",),
    store_writes=("session", "zustand"),
    waits_for_all=True,  # the commit: it runs after every node of the chain, so a failed node commits nothing
    self_logged=True,  # its pipeline_log row must be in the job it commits
)
# records the background chain needs, copied into its job
BACKGROUND_RECORDS = tuple(BackgroundState.model_fields)
MENSCH_LOG_SEQ_OFFSET = 20_000
"""The rows of an attempt whose character chain failed follow the later attempt's own rows."""

log = logging.getLogger("novaberg.node.dispatcher")


def nachricht_felder(s: Stimulus) -> dict:
    """What the turn's record keeps of its message beyond the text: the name his client sent and
    an operator's date, each only when given — the history rebuilt from Postgres gives them back."""
    felder = {}
    if s.person_name:
        felder["name"] = s.person_name
    if s.datiert:
        felder["zeitpunkt"] = s.received_at.isoformat()
    return felder


def turn_result(state: TurnState, deps: Deps) -> TurnResult:
    """The turn's result as the client receives it; the keys set are the ones stored."""
    s, d, p, e, r = state.stimulus, state.draft, state.perzeption, state.emotion, state.route
    return TurnResult(**{
        "turn_id": s.turn_id, "user_id": s.user_id, "character_id": s.character_id,
        "character_name": state.pair.character_name, "reply": current_reply(state), "herkunft": s.herkunft,
        "eigener_gedanke": s.eigener_gedanke, "model": d.model,
        "usage": {"prompt_tokens": deps.trace.prompt_tokens, "completion_tokens": deps.trace.completion_tokens,
                  "llm_calls": deps.trace.llm_calls},
        # the fields of the seeds' chat endpoint
        "emotion": p.emotion if p else None, "arousal": p.arousal if p else None,
        "emotions_vektor": e.emotions_vektor if e else None,
        "emotions_verlauf": [h.emotion for h in e.emotions_verlauf] if e else None,
        "sprach_stil": e.sprach_stil if e else None, "beziehungs_dynamik": p.beziehungs_dynamik if p else None,
        "intent": r.intent if r else (p.intent if p else None), "tone": p.tone if p else None,
        "gespraechs_modus": p.gespraechs_modus if p else None,
        "user_intentionen": p.user_intentionen if p else None,
        "momentum": r.momentum if r else None, "needs_web": r.needs_web if r else None,
        # the Thinker's last resort: a second message follows as its own turn (seed 000 §3.5)
        "nachricht_folgt": bool(state.pruefung and state.pruefung.self_trigger),
        # how the Thinker checked the reply, for clients and operators
        "pruefung": ({"status": state.pruefung.status, "iterationen": state.pruefung.iterationen,
                      "werkzeuge": state.pruefung.werkzeuge} if state.pruefung else None),
        "ursprung_turn_id": s.ursprung_turn_id,
        **nachricht_felder(s),
        "created_at": datetime.now(timezone.utc).isoformat(),
        "timings": deps.trace.timings(),
    })


def pushed_message(result: TurnResult) -> PushedMessage | None:
    """A message nobody asked for — the Thinker's retry (seed 000 §3.5), a planned impulse, a
    `continue` — goes to the pair's push stream with the commit; a reply to the human does not."""
    if result.herkunft == "user":
        return None
    return PushedMessage(**result.model_dump(include=set(PushedMessage.model_fields)))


def stimulus_entry(state: TurnState) -> SessionTurn:
    """The session entry of the turn's stimulus: the human's message with its perception; Nova's
    own thought marked by its speaker. The turn's record carries it (also a Thinker retry's, whose
    stimulus the session holds already)."""
    s, p = state.stimulus, state.perzeption
    user_turn = {"rolle": "user", "sprecher": session.PERSON_B, "inhalt": s.text, "turn_id": s.turn_id,
                 "herkunft": s.herkunft, "time": s.received_at.isoformat(),
                 "emotion": p.emotion if p else None, "arousal": p.arousal if p else None,
                 "tone": p.tone if p else None, "dynamik": p.beziehungs_dynamik if p else None,
                 "modus": p.gespraechs_modus if p else None, "intentionen": p.user_intentionen if p else None,
                 "vektor": state.emotion.emotions_vektor if state.emotion else None,
                 "ziele": [z.model_dump() for z in state.memory.aktivierte_ziele] if state.memory else None,
                 "stil": state.emotion.sprach_stil if state.emotion else None}
    if s.person_name:  # the name his client sent: a regenerate or edit of the message keeps it
        user_turn["name"] = s.person_name
    if s.datiert:  # an operator's date: a regenerate or edit keeps it too
        user_turn["datiert"] = True
    if s.eigener_gedanke is not None:
        # an impulse turn is marked by its speaker, not filtered out (seed 001 §3.1)
        name = state.pair.character_name if state.pair else s.character_id
        user_turn.update(rolle="assistant", sprecher=session.sprecher(name, True))
    return SessionTurn(**user_turn)


def human_entry(state: TurnState) -> SessionTurn | None:
    """The session entry the turn adds for its stimulus; None for a Thinker retry (the retry answers
    the same stimulus again: it is in the session already, only Nova speaks)."""
    return None if state.stimulus.thinker_unsicher_retry else stimulus_entry(state)


def turn_job(state: TurnState, reply: str, result: TurnResult | KeptTurn, rows: list[NodeLogRow | SwitchLogRow], *,
             zustand: NovaZustandRecord | None = None) -> TurnJob:
    """The job that writes the turn's record and its pipeline_log rows to Postgres."""
    s = state.stimulus
    return TurnJob(turn=TurnRecordJob(
        user_id=s.user_id, character_id=s.character_id, turn_id=s.turn_id, mensch=stimulus_entry(state), reply=reply,
        user_embedding=state.memory.query_embedding if state.memory else None, result=result,
        created_at=result.created_at, nova_zustand=zustand), log=rows)


def background_job(state: TurnState, teil: str = "ganz") -> BackgroundJob:
    """The background chain's job: the records it starts from (`BACKGROUND_RECORDS`)."""
    return BackgroundJob(teil=teil, turn_id=state.stimulus.turn_id,
                         state=BackgroundState(**{r: getattr(state, r) for r in BACKGROUND_RECORDS}))


async def keep_human(state: TurnState, deps: Deps, failed_node: str) -> bool:
    """The human chain's own commit (seed 001 §2: `… → salience → dispatcher` ends the human's
    path), for a turn whose character chain failed: his session entry, the turn's record without a
    reply, and salience over his words (`hintergrund` job, part `mensch`), once. A repeat of the
    turn_id then answers and adds Nova's reply alone. True: his message is kept (now or before)."""
    s = state.stimulus
    if s.herkunft != "user" or s.user_prompt is None:
        return False
    now = datetime.now(timezone.utc).isoformat()
    record = KeptTurn(turn_id=s.turn_id, user_id=s.user_id, character_id=s.character_id, reply=None,
                      herkunft=s.herkunft, fehler_knoten=failed_node, **nachricht_felder(s), created_at=now)
    rows = [r.model_copy(update={"seq": r.seq + MENSCH_LOG_SEQ_OFFSET}) for r in deps.trace.rows]
    status = await deps.session.commit_human(HumanCommit(
        user_id=s.user_id, character_id=s.character_id, turn_id=s.turn_id, mensch=stimulus_entry(state),
        jobs=[turn_job(state, "", record, rows), background_job(state, "mensch")],
        keep_turns=deps.settings.session_keep_turns, ttl_s=deps.settings.turn_result_ttl_s, zaun=deps.services.zaun))
    if status == 1:
        log.warning("dispatcher: fallback nachricht_behalten: node %s failed on turn %s of %s:%s; the human's "
                    "message is committed on its own, the same turn_id asks for the reply again", failed_node,
                    s.turn_id, s.user_id, s.character_id)
    else:
        log.info("dispatcher: turn %s of %s:%s: the human's message was kept before; nothing written twice",
                 s.turn_id, s.user_id, s.character_id)
    return True


def _anstoss_job(state: TurnState) -> list[SelfTriggerJob]:
    """Seed 000 §3.5: a self-trigger the Thinker set is delivered — as an outbox job committed with
    the turn, so a pair actor that dies between the turn and its follow-up loses nothing; a worker
    hands it to the pair's event queue (`actors/background.deliver_self_trigger`), once: the
    follow-up runs under its own turn id."""
    p, s = state.pruefung, state.stimulus
    if not (p and p.self_trigger and p.self_trigger_payload):
        return []
    return [SelfTriggerJob(turn={"user_id": s.user_id, "character_id": s.character_id, "turn_id": s.turn_id},
                           anstoss=p.self_trigger_payload)]


def nova_entry(state: TurnState, result: TurnResult) -> SessionTurn:
    """The session entry of Nova's reply, with her perceived reply."""
    s, np_ = state.stimulus, state.nova_perzeption
    return SessionTurn(rolle="assistant", sprecher=state.pair.character_name, inhalt=result.reply, turn_id=s.turn_id,
                       herkunft=s.herkunft, time=s.received_at.isoformat() if s.datiert else result.created_at,
                       emotion=np_.emotion if np_ else None, arousal=np_.arousal if np_ else None,
                       stil=np_.stil if np_ else None)


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    t0 = time.perf_counter()
    s = state.stimulus
    result = turn_result(state, deps)
    deps.trace.node_row(NAME, (time.perf_counter() - t0) * 1000, start_ms=(t0 - deps.trace.started) * 1000)
    # Nova's state after the turn: in the commit for the next turn's db_zugriff, in the job for Postgres
    zustand = state.nova_zustand
    jobs = [turn_job(state, result.reply, result, deps.trace.rows, zustand=zustand), background_job(state),
            *_anstoss_job(state)]
    committed = await deps.session.commit_turn(TurnCommit(
        result=result, mensch=human_entry(state), nova=nova_entry(state, result), jobs=jobs,
        keep_turns=deps.settings.session_keep_turns, ttl_s=deps.settings.turn_result_ttl_s,
        push=pushed_message(result), push_keep=deps.settings.push_keep_messages, zustand=zustand,
        zaun=deps.services.zaun))
    if not committed:
        log.warning("dispatcher: turn %s of %s:%s was committed already; nothing written twice",
                    s.turn_id, s.user_id, s.character_id)
        result = await deps.session.stored_result(s.user_id, s.character_id, s.turn_id) or result
    return {"dispatch": DispatchRecord(committed=committed, result=result)}
