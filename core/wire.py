"""Typed messages across the process seams. Each seam's models live in its own section:

- the ingress ↔ the pair actor (a turn, an event, the stream's events, a failed turn as an object);
- the chain runner ↔ the node deployment;
- the LLM client ↔ the LLM deployment ↔ its backends (`LLMEngine`, the protocol every engine
  implements, the scripted one of the tests too);
- the store's operations: declared in `memory/clients.py`, one class per store module.

Like everything in `core/`, it imports nothing of the project.
"""
from __future__ import annotations

import abc
import json
from datetime import datetime
from typing import Annotated, Any, AsyncIterator, Literal

from pydantic import (BaseModel, ConfigDict, Field, TypeAdapter, computed_field, field_serializer, model_serializer,
                      model_validator)

from core.errors import ServiceError
from core.result import TurnCheck, TurnResult, TurnUsage  # noqa: F401  (the ingress ↔ pair actor seam's result)
from core.state import (DraftRecord, MemoryRecord, NovaPerzeptionRecord, NovaZustandRecord, PairRecord,
                        PerzeptionRecord, PruefungRecord, RetryNutzlast, SessionTurn, Stimulus, TurnRecords,
                        UrteilRecord)

# ---------------------------------------------------------------------------- ingress ↔ pair actor

class PairSuperseded(ServiceError, RuntimeError):
    """The pair process asked is not (or no longer) the pair's (actors/registry.py): it was never
    bound, or the registry gave the pair to another process under a newer token — found at the
    latest by the commit's fence. Callers resolve the pair anew and try again (the turn_id holds)."""


class PairTurnRequest(BaseModel):
    """A message of the human, as the ingress hands it to the pair's actor (`PairActor.turn`,
    `PairActor.turn_stream`)."""

    model_config = ConfigDict(extra="forbid")

    text: str
    turn_id: str | None = None
    """The idempotency key, fixed before the first attempt (a retry after the actor died runs under
    the same one); None: the actor draws one."""
    seq: int | None = None
    """The turn's arrival number for its pair (drawn with its admission); None: not in the order."""
    name: str | None = None
    """The human's name as the client sent it (`TurnRequest.name`); None: `Person B`."""
    received_at: datetime | None = None
    """When the message was said, for a replayed conversation (an operator's `TurnRequest.zeitpunkt`);
    None: now."""


class PairEventRequest(BaseModel):
    """An event without a message of the human (`PairActor.event`): Nova's own thought (`impulse`)
    or a `continue` (a self-trigger, or an operator's prompt). Exactly one of eigener_gedanke /
    user_prompt (the ingress and the Thinker's retry payload check it)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["impulse", "continue"]
    eigener_gedanke: str | None = None
    user_prompt: str | None = None
    turn_id: str | None = None
    """The event's turn; a retry runs under this id with a suffix and names it as its origin."""
    aus_turn: str | None = None
    """The turn a planned impulse came from: once that turn is taken back, the impulse is dropped."""
    reiz_herkunft: str | None = None
    gedanke_arousal: float | None = None
    thinker_unsicher_retry: bool = False
    person_name: str | None = None
    """A retry of a named message: the name it came with."""
    received_at: datetime | None = None
    """A retry of a message an operator dated: its date."""


class TurnFailure(BaseModel):
    """A turn whose chain failed, returned by the pair actor in place of its result: which node,
    and whether the human's message is kept (then the same turn_id asks for the reply again, and
    his message is not stored twice). The ingress answers it with a 502 (`turn_failed`)."""

    model_config = ConfigDict(extra="forbid")

    turn_id: str | None = None
    node: str | None = None
    """None: no node ran (the pair actor could not be reached)."""
    message: str
    message_kept: bool = False
    refused: bool = False
    """The pair's actor held as many turns as it may: nothing of this one ran (429)."""
    zurueckgenommen: bool = False
    """The turn_id belongs to a turn that was taken back: it is not run again (409)."""
    ausfall: bool = False
    """The node failed because a store or a service was away (an outage, not the turn's own fault):
    whoever runs the turn again later may expect it to pass."""


class EventDropped(BaseModel):
    """An event the pair actor did not run: an order waits for the human's answer
    (`pending_agent`), the self-triggers reached their limit (`max_self_triggers`, `counter`), or
    the turn it continues was taken back (`zurueckgenommen`)."""

    model_config = ConfigDict(extra="forbid")

    dropped: Literal[True] = True
    reason: Literal["pending_agent", "max_self_triggers", "zurueckgenommen"]
    counter: int | None = None


class _StreamEvent(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NodeStartedEvent(_StreamEvent):
    event: Literal["node_started"] = "node_started"
    node: str
    at_ms: float


class NodeFinishedEvent(_StreamEvent):
    event: Literal["node_finished"] = "node_finished"
    node: str
    ms: float
    at_ms: float


class DraftEvent(_StreamEvent):
    """The responder's text as it is written: provisional (the Thinker, the tribunal, the
    corrector and the leak guard may still change it)."""

    event: Literal["draft"] = "draft"
    node: str
    text: str


class TokenEvent(_StreamEvent):
    """The committed reply, byte for byte, once the turn is committed; `draft_kept`: the streamed
    draft was kept as it was (a client that showed it need not redraw it)."""

    event: Literal["token"] = "token"
    text: str
    draft_kept: bool


class FinalEvent(_StreamEvent):
    event: Literal["final"] = "final"
    result: TurnResult


class ErrorEvent(_StreamEvent):
    event: Literal["error"] = "error"
    failure: TurnFailure


class RestartEvent(_StreamEvent):
    """Sent by the ingress: the pair's actor died mid-stream and the turn runs again."""

    event: Literal["restart"] = "restart"
    reason: str


TurnStreamEvent = Annotated[NodeStartedEvent | NodeFinishedEvent | DraftEvent | TokenEvent | FinalEvent | ErrorEvent
                            | RestartEvent, Field(discriminator="event")]
"""One event of `PairActor.turn_stream`: while the turn runs node_started / node_finished / draft,
then `token` and `final`, or `error`; `restart` comes from the ingress."""


# ---------------------------------------------------------------------------- runner ↔ node deployment


class NodeRunRequest(BaseModel):
    """A node to run in the node deployment: its name, the records it declared to read (the
    stimulus always among them) and the chain it runs in."""

    node: str
    records: TurnRecords
    chain: str = "character"


class NodeRunResult(BaseModel):
    """What the node deployment sends back: the records the node wrote (assigned to the turn state
    by the runner, which checks them against the node's `writes`), the pipeline rows it recorded,
    its time at the LLM and the embedder, its LLM calls and tokens (the turn's usage) and the system
    messages it sent (the leak guard compares the reply with them)."""

    update: TurnRecords
    rows: list[LogRow] = []
    llm_ms: float = 0.0
    embed_ms: float = 0.0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    system_prompts: dict[str, str] = {}


# ---------------------------------------------------------------------------- LLM client ↔ deployment ↔ engine
class TextProtocol(BaseModel):
    """A text answer's form, for the engines that can hold a model to it: a GBNF grammar (llama.cpp)
    and the same as a regular expression (vLLM)."""

    model_config = ConfigDict(extra="forbid")

    gbnf: str | None = None
    regex: str | None = None


class ChatRequest(BaseModel):
    """One model call as the LLM client sends it and every engine gets it. Each engine hands on
    what it supports of the answer's constraints (`response_schema`, `protocol`); the deployment
    drops them when structured outputs are off."""

    model_config = ConfigDict(extra="forbid")

    messages: list[dict[str, Any]]
    """The chat messages (`role`, `content`), handed to the engine as they are."""
    temperature: float = 0.7
    max_tokens: int | None = None
    """The answer's budget; unset: the deployment's `llm_max_tokens`."""
    think: bool = False
    """Reasoning on or off (templates that know the switch, e.g. Qwen3's `enable_thinking`)."""
    caller: str | None = None
    """The node that asks (the deployment counts tokens per caller; the schema's name)."""
    pair: str | None = None
    """`user:character` of the turn the call belongs to."""
    response_schema: dict[str, Any] | None = None
    """The JSON schema the answer must follow."""
    protocol: TextProtocol | None = None
    """The text protocol the answer must follow (when no schema is given)."""

    def as_dict(self) -> dict[str, Any]:
        """The request as a plain dict of the fields it carries (what the deployment records)."""
        return self.model_dump(exclude_none=True)


class ChatUsage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    """Of the prompt tokens, those the engine found in its prefix cache (vLLM's
    `prompt_tokens_details.cached_tokens`); 0 where the engine does not say."""


class AnswerMessage(BaseModel):
    role: str = "assistant"
    content: str | None = None
    reasoning_content: str | None = None
    """The model's reasoning, apart from the content (never mixed into it)."""


class ChatChoice(BaseModel):
    index: int = 0
    finish_reason: str | None = None
    message: AnswerMessage = Field(default_factory=AnswerMessage)


class ChatResponse(BaseModel):
    """A whole answer, shaped as OpenAI's chat completion."""

    id: str = ""
    object: str = "chat.completion"
    created: int = 0
    model: str = ""
    choices: list[ChatChoice] = Field(default_factory=list)
    usage: ChatUsage = Field(default_factory=ChatUsage)

    @property
    def content(self) -> str:
        return (self.choices[0].message.content or "") if self.choices else ""

    @property
    def reasoning(self) -> str | None:
        return self.choices[0].message.reasoning_content if self.choices else None

    @property
    def finish_reason(self) -> str | None:
        return self.choices[0].finish_reason if self.choices else None


class ChatDelta(BaseModel):
    content: str | None = None
    reasoning_content: str | None = None


class ChunkChoice(BaseModel):
    index: int = 0
    delta: ChatDelta = Field(default_factory=ChatDelta)
    finish_reason: str | None = None


class ChatChunk(BaseModel):
    """A piece of a streamed answer, shaped as OpenAI's chat completion chunk; the last one of a
    stream carries `usage` and the finish reason."""

    id: str = ""
    object: str = "chat.completion.chunk"
    created: int = 0
    model: str = ""
    choices: list[ChunkChoice] = Field(default_factory=list)
    usage: ChatUsage | None = None

    @property
    def content(self) -> str | None:
        return self.choices[0].delta.content if self.choices else None

    @property
    def reasoning(self) -> str | None:
        return self.choices[0].delta.reasoning_content if self.choices else None

    @property
    def finish_reason(self) -> str | None:
        return self.choices[0].finish_reason if self.choices else None


class LLMEngine(abc.ABC):
    """What the LLM deployment runs: one of its backends (llama.cpp, vLLM, an OpenAI-compatible
    server) or an engine class injected in their place (`build_app(settings, engine=…)`), as Ray
    Serve LLM takes its engine. The class is called with the settings. A failed call raises an
    error object (`LLMBackendError`, its `transient` says whether the call may be asked again)."""

    model: str
    """The model's name, as the answers carry it."""

    @abc.abstractmethod
    async def start(self) -> None:
        """Load or connect; the deployment calls it once before the first request."""

    @abc.abstractmethod
    async def chat(self, request: ChatRequest) -> ChatResponse:
        """The whole answer."""

    @abc.abstractmethod
    def chat_stream(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        """The answer in pieces; the last piece carries the usage."""

    @abc.abstractmethod
    def load(self) -> dict[str, Any]:
        """The engine's own figures for the deployment's load (`queued`, `busy_s`, …)."""


class PairRuecknahmeRequest(BaseModel):
    """Take turns back (`PairActor.zuruecknehmen`): `rewind` the last `n` messages of the human and
    everything after them; `regenerate` the last reply (the same message, a new reply; the old one
    stays as a swipe); `edit` the last message (`text`) and answer it anew. `op_id` makes the
    operation happen once: the same op_id again answers what it did. `turn_id`: the new turn's id
    (regenerate, edit)."""

    model_config = ConfigDict(extra="forbid")

    art: Literal["rewind", "regenerate", "edit"]
    op_id: str
    n: int = Field(1, ge=1, le=50)
    text: str | None = None
    turn_id: str | None = None
    name: str | None = None
    """edit: the name the changed message comes with (None: the old message's)."""


class RuecknahmeResult(BaseModel):
    """What a retraction took back (`zurueckgenommen`: the turn ids, oldest first; `by_store`: what
    went or came back, per table and key family) and, for regenerate and edit, the new turn."""

    model_config = ConfigDict(extra="forbid")

    op_id: str
    art: str
    zurueckgenommen: list[str]
    by_store: dict[str, int] = {}
    turn: TurnResult | None = None
    failure: TurnFailure | None = None
    nichts: bool = False
    """Nothing to take back: the pair has no message of the human (409)."""


# ---------------------------------------------------------------------------- the store: long-term memory's one write
def knoten_text(zeitpunkt: datetime, zeitzone: str, sprecher: str, text: str) -> str:
    """A spoken node's text, the one its vector is made from: the day it was said in the pair's
    time zone, who said it, the words (`[04 December 2026] Person B: …`)."""
    from zoneinfo import ZoneInfo

    return f"[{zeitpunkt.astimezone(ZoneInfo(zeitzone)).strftime('%d %B %Y')}] {sprecher}: {text}"


class Aeusserung(BaseModel):
    """One side of an exchange as long-term memory keeps it: verbatim, with who said it."""

    model_config = ConfigDict(extra="forbid")

    sprecher: str
    """The name the text carries ("Person B", the character's name, an imported speaker)."""
    beobachter: Literal["mensch", "nova"]
    text: str = Field(min_length=1)
    embedding: list[float]
    """The vector of the node's text (`knoten_text`: date, speaker and the words)."""
    quelle: str | None = None
    """Its own source id (an imported turn's id); None: the episode's."""
    emotion: str | None = None
    arousal: float | None = None


class Verdichtung(BaseModel):
    """A memory distilled from an exchange (praegung): linked to the episode it came from."""

    model_config = ConfigDict(extra="forbid")

    inhalt: str = Field(min_length=1)
    embedding: list[float]
    dimension: str = "erlebnis"
    emotion: str | None = None
    arousal: float | None = None


class Episode(BaseModel):
    """What one exchange leaves in long-term memory (memory/lzg.py `episode_schreiben`, the one
    write of LZG nodes for live turns and imports): its utterances in order and what was distilled
    from it. Written once per `quelle` (a live turn's id; an import's session key)."""

    model_config = ConfigDict(extra="forbid")

    quelle: str
    zeitpunkt: datetime
    """When it was said (aware); the nodes' dates are read in `zeitzone`."""
    zeitzone: str = "UTC"
    aeusserungen: list[Aeusserung] = Field(default_factory=list)
    verdichtungen: list[Verdichtung] = Field(default_factory=list)
    anschluss_s: float | None = None
    """Link the first utterance `nachbar` to the pair's newest utterance when that was said at most
    this many seconds before (the same session); None: the episode opens a session."""
    resonanz: list[int] = Field(default_factory=list)
    """Older nodes of the pair that resonated in the turn's read: the distilled memories are linked
    to them (`praegung`, `resonanz_gewicht`) and their forgetting curves restart, in the same
    transaction as the nodes (a live turn's; an import has none)."""
    resonanz_gewicht: float = 0.5
    abloesungen: list[int] = Field(default_factory=list)
    """Older nodes of the pair this exchange supersedes or ends (praegung's `abgeloest`): each is
    marked (`lzg.abloesen`: `gueltig_bis` = `zeitpunkt`, a synapse `abgeloest_durch` to the first
    distilled memory, or to the human's utterance without one), in the same transaction, with the
    before-images under `quelle` (a live turn's id: taking the turn back removes the marks)."""


# ---------------------------------------------------------------------------- the turn's commit: stored and queued shapes
# The session entries (`core.state.SessionTurn`), the stored result (`TurnResult`) and the outbox
# jobs a committed turn writes to Redis, which the background workers read back (actors/worker.py).

JOB_VERSION = 2
"""The outbox jobs' format this release writes (`OutboxJob.v`). 1: the jobs written before the field
existed (plain dicts; read as version 1)."""


class JobTooNew(ServiceError, RuntimeError):
    """An outbox job written by a newer release (its `v` above `JOB_VERSION`): this worker leaves it
    pending, uncounted, and a worker of the newer release takes it up (memory/outbox.py)."""


class KeptTurn(BaseModel):
    """The record of a turn whose character chain failed while the human's message was kept
    (`dispatcher.keep_human`): no reply, the node that failed. A later success of the same
    turn_id replaces it with its `TurnResult`."""

    model_config = ConfigDict(extra="allow")

    turn_id: str
    user_id: str
    character_id: str
    reply: None = None
    herkunft: str
    fehler_knoten: str
    name: str | None = None
    zeitpunkt: str | None = None
    created_at: str


class JobPair(BaseModel):
    """The pair and the turn a job works for."""

    model_config = ConfigDict(extra="ignore")

    user_id: str
    character_id: str
    turn_id: str


def session_entry(entry: SessionTurn) -> dict[str, Any]:
    """A session entry as the session list stores it: the keys it was made with, its time in
    ISO form with its offset."""
    out = entry.model_dump(mode="json", exclude_unset=True)
    if "time" in out:
        out["time"] = entry.time.isoformat()
    return out


def zustand_json(z: NovaZustandRecord) -> dict[str, Any]:
    """Nova's state after a turn as Redis (`session.zustand_key`) and the turn's job hold it: its
    time in ISO form with its offset."""
    return {**z.model_dump(mode="json"), "stand": z.stand.isoformat()}


class _Envelope(BaseModel):
    """An outbox job's envelope: its format's version (a job read without one is version 1,
    `read_job`), keys it does not know ignored (`TurnJob`)."""

    model_config = ConfigDict(extra="ignore")

    v: int = JOB_VERSION


class TurnRecordJob(JobPair):
    """A turn's durable record (Postgres `turns`): the message as its session entry holds it
    (`mensch.inhalt`, also for a retry or an own thought, whose entry the session does not get a
    second time), the reply ("" when it failed), the message's vector, the stored result, Nova's
    state after the turn. Read from a version 1 job, the message comes from `user_text`."""

    mensch: SessionTurn
    reply: str
    user_embedding: list[float] | None = None
    result: TurnResult | KeptTurn = Field(union_mode="left_to_right")
    created_at: str
    nova_zustand: NovaZustandRecord | None = None
    """Nova's emotion state after the turn (Postgres `nova_emotion`, unless a later turn's is there)."""

    @model_validator(mode="before")
    @classmethod
    def _user_text(cls, data: Any) -> Any:
        """Version 1: the message as `user_text`, beside the result that names its origin."""
        if isinstance(data, dict) and "mensch" not in data and "user_text" in data:
            res = data.get("result") or {}
            herkunft = res.get("herkunft", "user") if isinstance(res, dict) else "user"
            data = {**data, "mensch": {
                "rolle": "assistant" if herkunft == "eigener_impuls" else "user", "sprecher": "",
                "inhalt": data["user_text"], "turn_id": data.get("turn_id"), "herkunft": herkunft,
                "time": data.get("created_at")}}
        return data

    @field_serializer("mensch")
    def _eintrag(self, v: SessionTurn) -> dict[str, Any]:
        return session_entry(v)

    @field_serializer("nova_zustand")
    def _zustand(self, v: NovaZustandRecord | None) -> dict[str, Any] | None:
        return None if v is None else zustand_json(v)

    @field_serializer("result")
    def _ergebnis(self, v: TurnResult | KeptTurn) -> dict[str, Any]:
        """The result with the keys it was made with (as Redis stores it)."""
        return v.model_dump(mode="json", exclude_unset=True)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def user_text(self) -> str:
        """The message under its version 1 name, for the workers of the release before `v`: they
        read `user_text` (written, never read, until no such worker runs)."""
        return self.mensch.inhalt


class _LogRow(BaseModel):
    """What every pipeline_log row holds: its place in the turn's rows, the node, its outcome, what
    it was decided on or when it ran (`inputs`, free-form per decision) and when it was written."""

    model_config = ConfigDict(extra="ignore")

    seq: int
    node: str
    outcome: str | None = None
    inputs: dict[str, Any] = Field(default_factory=dict)
    at: str
    """ISO time with its offset."""


class NodeLogRow(_LogRow):
    """A node's run (pipeline/trace.py `node_row`): its time and, in `inputs`, its start and end
    since the turn began (`start_ms`, `end_ms`)."""

    art: Literal["node"] = "node"
    duration_ms: float | None = None


class SwitchLogRow(_LogRow):
    """A decision entry (pipeline/trace.py `decision`): which branch a node took (`outcome`) in
    which decision (`entscheidung`), on what (`inputs`), against what (`threshold`)."""

    art: Literal["switch"] = "switch"
    entscheidung: str
    threshold: float | None = None


LogRow = Annotated[NodeLogRow | SwitchLogRow, Field(discriminator="art")]
"""One row of a turn's pipeline_log (pipeline/trace.py `TurnTrace.rows`): it travels from the node
deployment to the pair actor (`NodeRunResult.rows`) and in the turn's outbox job (`TurnJob.log`)
to Postgres. Keys it does not know are ignored, like the jobs' envelopes."""


class TurnJob(_Envelope):
    """The job that writes a turn's record and its pipeline_log rows to Postgres (memory/pg.py
    `write_turn_job`).

    Versioning, for a rolling deploy where workers of two releases read one outbox: every job
    carries `v` (`JOB_VERSION`); a job without it is version 1 and reads (the dicts the release
    before wrote, `user_text` for the message). The envelopes ignore keys they do not know
    (`extra="ignore"`): a key a newer release adds to a job is dropped by an older reader, not
    refused. The records a job carries (the session entry, the turn state's records) keep their
    `extra="forbid"`: a change an older reader cannot read raises `v`, and a worker that finds a
    `v` above its own leaves the job pending, uncounted (`JobTooNew`), for a worker of the newer
    release. Toward the release before `v` (which reads jobs by key) this one writes what that one
    reads: the turn's `user_text` besides `mensch`, `teil` always, `v` it does not read."""

    kind: Literal["turn"] = "turn"
    turn: TurnRecordJob
    log: list[LogRow] = Field(default_factory=list)
    """The turn's pipeline_log rows (pipeline/trace.py `TurnTrace.rows`)."""

    def ziel(self) -> JobPair:
        return self.turn


class BackgroundState(BaseModel):
    """The records of the turn state the background chain starts from (`dispatcher.BACKGROUND_RECORDS`);
    serialised whole, a record that is None left out."""

    model_config = ConfigDict(extra="forbid")

    stimulus: Stimulus
    pair: PairRecord | None = None
    draft: DraftRecord | None = None
    pruefung: PruefungRecord | None = None
    urteil: UrteilRecord | None = None
    perzeption: PerzeptionRecord | None = None
    memory: MemoryRecord | None = None
    nova_perzeption: NovaPerzeptionRecord | None = None

    @model_serializer(mode="plain")
    def _records(self) -> dict[str, Any]:
        return {k: getattr(self, k).model_dump(mode="json") for k in type(self).model_fields
                if getattr(self, k) is not None}


class BackgroundJob(_Envelope):
    """The background chain of a committed turn (`teil` `ganz`), or salience alone over the human's
    words of a turn kept without a reply (`mensch`): actors/background.py `run_background`.
    Versioning as for `TurnJob`."""

    kind: Literal["hintergrund"] = "hintergrund"
    teil: Literal["ganz", "mensch"] = "ganz"
    turn_id: str
    state: BackgroundState

    def ziel(self) -> JobPair:
        s = self.state.stimulus
        return JobPair(user_id=s.user_id, character_id=s.character_id, turn_id=self.turn_id)


class SelfTriggerJob(_Envelope):
    """A self-trigger the Thinker set (seed 000 §3.5), delivered to the pair's event queue by a
    worker (actors/background.py `deliver_self_trigger`). Versioning as for `TurnJob`."""

    kind: Literal["selbst_anstoss"] = "selbst_anstoss"
    turn: JobPair
    anstoss: RetryNutzlast

    @field_serializer("anstoss")
    def _gesetzt(self, v: RetryNutzlast) -> dict[str, Any]:
        return v.model_dump(mode="json", exclude_none=True)

    def ziel(self) -> JobPair:
        return self.turn


OutboxJob = Annotated[TurnJob | BackgroundJob | SelfTriggerJob, Field(discriminator="kind")]
"""One job of the outbox stream (memory/outbox.py), as a committed turn queues it."""

OUTBOX_JOB: TypeAdapter[TurnJob | BackgroundJob | SelfTriggerJob] = TypeAdapter(OutboxJob)


def read_job(raw: dict[str, Any] | str | bytes) -> TurnJob | BackgroundJob | SelfTriggerJob:
    """An outbox job as a worker reads it (any version up to `JOB_VERSION`); a newer one raises
    `JobTooNew`, a malformed one pydantic's ValidationError."""
    data = json.loads(raw) if isinstance(raw, (str, bytes)) else raw
    if isinstance(data, dict):
        data = {"v": 1, **data}  # written before `v` existed
        if isinstance(data["v"], int) and data["v"] > JOB_VERSION:
            raise JobTooNew(f"a {data.get('kind')} job of version {data['v']}; this release reads up to "
                            f"{JOB_VERSION}")
    return OUTBOX_JOB.validate_python(data)


def job_json(job: TurnJob | BackgroundJob | SelfTriggerJob) -> str:
    """A job as the outbox stream stores it."""
    return job.model_dump_json()


class PushedMessage(BaseModel):
    """A message nobody asked for (the Thinker's retry, a planned impulse, a `continue`) as the
    pair's push stream holds it for the events route (`session.push_key`)."""

    model_config = ConfigDict(extra="forbid")

    turn_id: str
    herkunft: str
    character_id: str
    character_name: str
    reply: str
    eigener_gedanke: str | None = None
    ursprung_turn_id: str | None = None
    created_at: str


class TurnCommit(BaseModel):
    """What a turn commits to Redis at once (memory/session.py `commit_turn`): the stored result
    (what a repeated turn_id returns), both session entries (`mensch` None: the turn has no new
    message of the human, a Thinker retry), the message pushed to the events route (one nobody
    asked for), Nova's state after the turn and the outbox jobs. `keep_turns`, `ttl_s` and
    `push_keep` bound what stays; `zaun` (the registry's hash, the pair's field, the committing
    process's entry): commit only while that process still serves the pair, else PairSuperseded."""

    model_config = ConfigDict(extra="forbid")

    result: TurnResult
    mensch: SessionTurn | None
    nova: SessionTurn
    jobs: list[TurnJob | BackgroundJob | SelfTriggerJob] = Field(default_factory=list)
    keep_turns: int
    ttl_s: int
    push: PushedMessage | None = None
    push_keep: int = 1000
    zustand: NovaZustandRecord | None = None
    zaun: tuple[str, str, str] | None = None

    @property
    def user_id(self) -> str:
        return self.result.user_id

    @property
    def character_id(self) -> str:
        return self.result.character_id

    @property
    def turn_id(self) -> str:
        return self.result.turn_id


class HumanCommit(BaseModel):
    """The human's message kept on its own when Nova's chain failed (memory/session.py
    `commit_human`): his session entry and its jobs (the turn's record without a reply, salience
    over his words), once per turn."""

    model_config = ConfigDict(extra="forbid")

    user_id: str
    character_id: str
    turn_id: str
    mensch: SessionTurn
    jobs: list[TurnJob | BackgroundJob | SelfTriggerJob] = Field(default_factory=list)
    keep_turns: int
    ttl_s: int
    zaun: tuple[str, str, str] | None = None
