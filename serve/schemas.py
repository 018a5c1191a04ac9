"""Wire schemas of the HTTP API, kept apart from the internal turn state."""
from __future__ import annotations

import re
import unicodedata
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.result import TurnResult
from core.settings import OPENAI_MESSAGES_CEILING

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"
TURN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,63}$"
RESERVED_TURN_IDS = frozenset({"begruessung"})
"""Turn ids the system gives its own entries (a character's greeting in the session)."""
RESERVED_TURN_ID_PREFIXES = ("imp-", "import-")
"""Prefixes of the turn ids the system gives Nova's impulses and an imported conversation's turns."""


def turn_id_frei(v: str | None) -> str | None:
    """A client's turn id is never one the system gives its own entries: taking such an entry back
    (a rewind, a regenerate) would reach the greeting or an impulse."""
    if v is not None and (v in RESERVED_TURN_IDS or v.startswith(RESERVED_TURN_ID_PREFIXES)):
        raise ValueError(f"turn_id {v!r} is reserved (reserved: {sorted(RESERVED_TURN_IDS)}, and ids that "
                         f"start with {list(RESERVED_TURN_ID_PREFIXES)})")
    return v


_CONTROL_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def no_control(v: str | None) -> str | None:
    """Text may hold line breaks and tabs, never NUL or other control characters (Postgres refuses
    NUL, so such a turn could be acknowledged and never stored)."""
    if isinstance(v, str) and _CONTROL_TEXT.search(v):
        raise ValueError("control characters (such as NUL) are not allowed")
    return v


PERSON_NAME_MAX = 64
_NAME_RAHMEN = set(":\uff1a<>")
"""The colons that frame an utterance in a memory's text (`[date] Name: …`) and the angle brackets
of a card's placeholders (`<BOT>`); every bracket of Unicode but `(` `)` — `[…]`, `{{user}}`,
`［…］` — is open/close punctuation, refused by its category (`_rahmt`)."""
_NAME_LABELS = ("person a", "person b")
"""The labels the prompts give the two speakers."""
_LABEL_LOOKALIKES = str.maketrans(
    "\u0440\u03c1\u2ca3" "\u0435\u03b5\u04bd" "\u0433\u0280" "\u0455\ua731" "\u043e\u03bf\u0585" "0"
    "\u043f\u0578\u03b7\u0274" "\u0430\u03b1\u0251" "\u044c\u0432\u03b2\u0185",
    "ppp" "eee" "rr" "ss" "ooo" "o" "nnnn" "aaa" "bbbb")
"""Letters of other scripts that read as the labels' own (after case folding): Cyrillic, Greek,
Armenian, small capitals, the digit zero."""


def person_name(v: str | None) -> str | None:
    """The human's name as a client sends it, in Unicode's compatibility form (NFKC: a no-break or
    wide space is a space, a fullwidth or small colon a colon), trimmed; empty is none. One line of
    at most 64 characters: no control, format or line-separating characters (bidi overrides among
    them), nothing that frames an utterance in a memory's text, and not the label the prompts give
    him, nor a look-alike of it."""
    if v is None:
        return None
    v = unicodedata.normalize("NFKC", v).strip()
    if not v:
        return None
    if len(v) > PERSON_NAME_MAX or any(_rahmt(c) for c in v):
        raise ValueError(f"a name is one line of at most {PERSON_NAME_MAX} characters, without control "
                         "characters, ':', '<', '>' or brackets other than '(' and ')'")
    if _wie_label(v) in _NAME_LABELS:
        raise ValueError(f"'{v}' reads as a label the prompts give a speaker, not a name")
    return v


def _wie_label(v: str) -> str:
    """How a name reads beside the speakers' labels: case, accents, the width of spaces and the
    look-alike letters of other scripts aside."""
    v = unicodedata.normalize("NFD", v.casefold())
    v = "".join(c for c in v if unicodedata.category(c) != "Mn").translate(_LABEL_LOOKALIKES)
    return " ".join(v.split())


def _rahmt(c: str) -> bool:
    cat = unicodedata.category(c)
    return (c in _NAME_RAHMEN or cat[0] == "C" or cat in ("Zl", "Zp")
            or (cat in ("Ps", "Pe") and c not in "()"))


ZEITPUNKT_AB = 1900
"""The earliest year a replayed message may be dated in."""


class TurnRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(description="The human's message.")
    turn_id: str | None = Field(default=None, pattern=TURN_ID_PATTERN,
                                description="Idempotency key; repeating it returns the stored result.")
    name: str | None = Field(default=None, description="The human's name as the client knows it (a persona): "
                             "Nova's long-term memory of this message names him so instead of `Person B`.")
    zeitpunkt: datetime | None = Field(default=None, description=(
        "When the message was said, with its zone: a conversation replayed from elsewhere keeps its dates "
        "(its memories are dated so, its sessions part at their gaps). Operator keys only; not in the future."))

    _turn_id = field_validator("turn_id")(classmethod(lambda cls, v: turn_id_frei(v)))

    _text = field_validator("text")(classmethod(lambda cls, v: no_control(v)))
    _name = field_validator("name")(classmethod(lambda cls, v: person_name(v)))

    @field_validator("zeitpunkt")
    @classmethod
    def _aware(cls, v: datetime | None) -> datetime | None:
        if v is not None and v.utcoffset() is None:
            raise ValueError("zeitpunkt needs its zone (e.g. 2023-05-08T13:56:00Z)")
        if v is not None and v.year < ZEITPUNKT_AB:
            raise ValueError(f"zeitpunkt lies before {ZEITPUNKT_AB}")
        return v


class RewindRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    n: int = Field(default=1, ge=1, le=50, description="How many of the human's last messages go, with all after them.")
    op_id: str | None = Field(default=None, pattern=TURN_ID_PATTERN,
                              description="Idempotency key; repeating it answers what the operation did.")


class RegenerateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    op_id: str | None = Field(default=None, pattern=TURN_ID_PATTERN,
                              description="Idempotency key; repeating it answers what the operation did.")
    turn_id: str | None = Field(default=None, pattern=TURN_ID_PATTERN, description="The new turn's id.")

    _turn_id = field_validator("turn_id")(classmethod(lambda cls, v: turn_id_frei(v)))


class EditRequest(RegenerateRequest):
    text: str = Field(description="The human's message, as it should have been.")
    name: str | None = Field(default=None, description="The name the message comes with (none: the old message's).")

    _text = field_validator("text")(classmethod(lambda cls, v: no_control(v)))
    _name = field_validator("name")(classmethod(lambda cls, v: person_name(v)))


class TurnTimings(BaseModel):
    model_config = ConfigDict(extra="allow")

    total_ms: float | None = None
    llm_ms: float | None = None
    embed_ms: float | None = None


class TurnResponse(TurnResult):
    """A turn's result over HTTP: the turn's one result (`core.result.TurnResult`), its fields and
    no others (a key a stored result holds beyond them is not sent)."""

    model_config = ConfigDict(extra="ignore")


class RetractResponse(BaseModel):
    op_id: str
    art: str
    zurueckgenommen: list[str] = Field(description="The turn ids taken back, oldest first.")
    by_store: dict[str, int] = Field(description="What went or came back, per table and key family "
                                                 "(empty when the same op_id is asked again).")
    turn: TurnResponse | None = Field(default=None, description="The new turn (regenerate, edit).")


class SwipesResponse(BaseModel):
    turn_id: str
    swipes: list[dict[str, Any]] = Field(description="The replies this turn replaced, oldest first.")


class HistoryResponse(BaseModel):
    user_id: str
    character_id: str
    turns: list[dict[str, Any]]


class KeyCreateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str | None = Field(default=None, pattern=ID_PATTERN, description="The user; none with `operator`.")
    label: str = Field(default="", max_length=200)
    operator: bool = Field(default=False, description="An operator key (reaches every user).")
    expires_in_days: int | None = Field(default=None, ge=1, le=3650, description="None: it does not expire.")


class KeyRevokeRequest(BaseModel):
    """Exactly one: the key itself, its id (`GET /v1/operator/keys`), or a user (every key of that user)."""

    model_config = ConfigDict(extra="forbid")

    api_key: str | None = Field(default=None, min_length=8, max_length=200)
    key_id: int | None = Field(default=None, ge=1, le=2**63 - 1)
    user_id: str | None = Field(default=None, pattern=ID_PATTERN)


class KeyCreateResponse(BaseModel):
    user_id: str | None
    api_key: str
    operator: bool = False
    expires_in_days: int | None = None


# ------------------------------------------------------------------ OpenAI-compatible
class ContentPart(BaseModel):
    """One part of a message's content; only `text` parts carry a turn, others are refused."""

    model_config = ConfigDict(extra="allow")

    type: Literal["text", "input_text"]
    text: str = Field(max_length=100_000)

    _text = field_validator("text")(classmethod(lambda cls, v: no_control(v)))


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant", "developer", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = None

    _content = field_validator("content")(classmethod(lambda cls, v: no_control(v) if isinstance(v, str) else v))


SAMPLING_FIELDS = ("temperature", "top_p", "top_k", "min_p", "top_a", "typical_p", "repetition_penalty",
                   "presence_penalty", "frequency_penalty", "logit_bias", "stop", "seed", "max_tokens",
                   "max_completion_tokens", "logprobs", "top_logprobs")
"""The sampling fields chat clients send (SillyTavern always sends most of them): accepted and
ignored, because every node of the chain sets its own temperature, budget and stops."""


class ClientUser(BaseModel):
    """`user` as Open WebUI sends it for a model it serves as a pipeline: the account (`id`, `name`,
    `email`, `role`). The id names the user as a string `user` does; the name is the person's."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(pattern=ID_PATTERN)
    name: str | None = None


class ChatCompletionRequest(BaseModel):
    """The fields the OpenAI clients send. The sampling fields (`SAMPLING_FIELDS`) and any other
    field a client adds are accepted and ignored, and `ignored()` names them: the answer's
    `X-Novaberg-Ignored` header and the log say which (as vLLM's OpenAI server does)."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(pattern=ID_PATTERN, description="The character.")
    messages: list[ChatMessage] = Field(min_length=1, max_length=OPENAI_MESSAGES_CEILING)
    user: Annotated[str, Field(pattern=ID_PATTERN)] | ClientUser | None = None
    """The user an operator key speaks for: his id, or Open WebUI's account object (`ClientUser`)."""
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    n: int | None = Field(default=None, ge=1, le=1, description="One reply per request.")
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    top_a: float | None = None
    typical_p: float | None = None
    repetition_penalty: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    stop: str | list[str] | None = None
    seed: int | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None

    def user_id(self) -> str | None:
        return self.user.id if isinstance(self.user, ClientUser) else self.user

    def ignored(self) -> list[str]:
        """The fields this request set that the turn does not use: sampling fields, fields no
        OpenAI client is known to send, and the client's system messages (the character's card
        lives server-side, `GET /v1/characters/{id}`)."""
        out = [f for f in SAMPLING_FIELDS if getattr(self, f) not in (None, {}, [], "")]
        out += sorted(self.model_extra or {})
        if any(m.role in ("system", "developer") for m in self.messages):
            out.append("messages[role=system]")
        return out


class EventRequest(BaseModel):
    """An event without a message of the human: Nova's own thought (`impulse`) or a `continue`
    (self-trigger). Exactly one of eigener_gedanke / user_prompt."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["impulse", "continue"]
    eigener_gedanke: str | None = Field(default=None, min_length=1, max_length=2000)
    user_prompt: str | None = Field(default=None, min_length=1, max_length=8000)
    turn_id: str | None = Field(default=None, pattern=TURN_ID_PATTERN)
    _turn_id = field_validator("turn_id")(classmethod(lambda cls, v: turn_id_frei(v)))
    reiz_herkunft: Literal["user", "eigener_impuls"] | None = None

    _texts = field_validator("eigener_gedanke", "user_prompt")(classmethod(lambda cls, v: no_control(v)))
    gedanke_arousal: float | None = Field(default=None, ge=0, le=1)
    thinker_unsicher_retry: bool = False


# ------------------------------------------------------------------ characters
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
CHARACTER_LIMITS = {"name": 80, "identitaet": 8000, "sprechweise": 2000, "szenario": 4000, "begruessung": 4000,
                    "beispieldialog": 8000, "charakter_anweisung": 4000}
"""The longest text each character field may hold (characters)."""


def _clean_text(v: str | None) -> str | None:
    if v is not None and _CONTROL.search(v):
        raise ValueError("must not contain control characters")
    return v


class CharacterPatch(BaseModel):
    """The fields a character has; every one optional (PATCH changes what it names)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=CHARACTER_LIMITS["name"])
    identitaet: str | None = Field(default=None, max_length=CHARACTER_LIMITS["identitaet"],
                                   description="Who she is: the core she was created with.")
    sprechweise: str | None = Field(default=None, max_length=CHARACTER_LIMITS["sprechweise"],
                                    description="How she speaks.")
    szenario: str | None = Field(default=None, max_length=CHARACTER_LIMITS["szenario"],
                                 description="The scene in which she and the human meet.")
    begruessung: str | None = Field(default=None, max_length=CHARACTER_LIMITS["begruessung"],
                                    description="Her first message to a new pair.")
    beispieldialog: str | None = Field(default=None, max_length=CHARACTER_LIMITS["beispieldialog"],
                                       description="Example dialogue: how she sounds.")
    charakter_anweisung: str | None = Field(default=None, max_length=CHARACTER_LIMITS["charakter_anweisung"],
                                            description="Instructions: the user-defined seed of her nature.")

    @field_validator("*")
    @classmethod
    def _no_control(cls, v):
        return _clean_text(v) if isinstance(v, str) else v


class CharacterCreate(CharacterPatch):
    character_id: str = Field(pattern=ID_PATTERN)
    name: str = Field(min_length=1, max_length=CHARACTER_LIMITS["name"])


class Character(BaseModel):
    character_id: str
    name: str
    identitaet: str
    sprechweise: str
    szenario: str
    begruessung: str
    beispieldialog: str
    charakter_anweisung: str
    karte_rest: dict[str, Any]
    """Character Card fields with no place of their own, kept for the export."""
    created_at: str
    updated_at: str


class CharacterImportResponse(BaseModel):
    character: Character
    format: str
    quelle: Literal["json", "png"]
    abbildung: dict[str, str]
    """Each card field that was taken over, and the field of ours it went to."""
    nicht_uebernommen: list[str]
    """Card fields with no place of ours: kept in `karte_rest`, given back by the export."""
    wissen_eintraege: int
    """Lorebook entries that became the character's background knowledge."""


class Datei(BaseModel):
    """An uploaded file of a pair, as indexed: topic, summary and keywords written once."""

    id: int
    name: str
    art: Literal["text", "markdown", "pdf"]
    inhalt_hash: str
    """SHA-256 of the bytes: the same content is indexed once per pair."""
    bytes: int
    zeichen: int
    """Characters of text read from it."""
    abschnitte: int
    """Chunks stored with an embedding each."""
    thema: str
    zusammenfassung: str
    stichworte: list[str]
    erschliessung: dict[str, str]
    """Where topic, summary and keywords came from: `modell`, or the named fallback."""
    created_at: str


class DateiUploadResponse(BaseModel):
    datei: Datei
    neu: bool
    """False: the pair had this content already (nothing was indexed again)."""


class DateiListe(BaseModel):
    user_id: str
    character_id: str
    dateien: list[Datei]
