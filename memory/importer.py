"""Import a conversation history into a pair's memory without LLM calls.

Accepts the LoCoMo conversation format: one object with `conversation` holding `speaker_a`,
`speaker_b`, `session_N` (turns `{speaker, dia_id, text}`) and `session_N_date_time`. One speaker
is the user, the other the character. Each session is written as an episode through long-term
memory's one write (`lzg.episode_schreiben`, the same as a live turn's): every turn a node (text
embedded as `[date] speaker: text`, source id kept in `quelle`), consecutive turns of a session
linked `nachbar`; the newest turns fill the session and the KZG.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from core.errors import InputError
from core.wire import Aeusserung, Episode, knoten_text
from memory import kzg, lzg, session

EmbedFn = Callable[[list[str]], list[list[float]]]
KZG_RECENT_TURNS = 40


class ImportFormatError(InputError, ValueError):
    pass


@dataclass
class Turn:
    speaker: str
    text: str
    source_id: str
    when: datetime | None
    session: int


def parse_locomo_date(s: str) -> datetime | None:
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y"):
        try:
            return datetime.strptime(s.strip(), fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            continue
    return None


def load_conversation(data: Any, index: int = 0) -> tuple[dict[str, Any], list[Turn]]:
    """The conversation object (a list of them picks `index`) and its turns in order."""
    if isinstance(data, list):
        if not 0 <= index < len(data):
            raise ImportFormatError(f"conversation index {index} outside 0..{len(data) - 1}")
        data = data[index]
    conv = data.get("conversation") if isinstance(data, dict) else None
    if not isinstance(conv, dict) or "speaker_a" not in conv or "speaker_b" not in conv:
        raise ImportFormatError("not a LoCoMo conversation: expected conversation.speaker_a/speaker_b/session_N")
    numbers = sorted(int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))
    if not numbers:
        raise ImportFormatError("conversation has no session_N")
    turns: list[Turn] = []
    for n in numbers:
        when = parse_locomo_date(conv.get(f"session_{n}_date_time", ""))
        for t in conv[f"session_{n}"]:
            if not {"speaker", "dia_id", "text"} <= set(t):
                raise ImportFormatError(f"session_{n}: turn without speaker/dia_id/text: {t}")
            turns.append(Turn(t["speaker"], t["text"], t["dia_id"], when, n))
    return data, turns


IMPORT_ZEITZONE = "UTC"
"""LoCoMo's dates carry no zone: the importer reads them, and dates its nodes, in UTC."""


def node_text(t: Turn) -> str:
    if t.when is None:
        return f"[?] {t.speaker}: {t.text}"
    return knoten_text(t.when, IMPORT_ZEITZONE, t.speaker, t.text)


def episoden(turns: list[Turn], user_speaker: str, vectors: list[list[float]]) -> list[Episode]:
    """The conversation as long-term memory's episodes: one a session, its turns in order (each its
    own node under its own id); a session opens without a link to the one before."""
    out: list[Episode] = []
    for t, v in zip(turns, vectors):
        if not out or out[-1].quelle != f"import-session-{t.session}":
            out.append(Episode(quelle=f"import-session-{t.session}", zeitpunkt=t.when, zeitzone=IMPORT_ZEITZONE))
        out[-1].aeusserungen.append(Aeusserung(sprecher=t.speaker, text=t.text, embedding=v, quelle=t.source_id,
                                               beobachter="mensch" if t.speaker == user_speaker else "nova"))
    return out


async def import_conversation(pool, r, user_id: str, character_id: str, turns: list[Turn], user_speaker: str,
                              embed: EmbedFn, batch: int = 64) -> dict[str, int]:
    jetzt = datetime.now(timezone.utc)  # an undated session is dated by its import
    turns = [t if t.when else replace(t, when=jetzt) for t in turns]
    texts = [node_text(t) for t in turns]
    vectors: list[list[float]] = []
    for i in range(0, len(texts), batch):
        vectors += embed(texts[i:i + batch])
    ids, edges = [], 0
    for ep in episoden(turns, user_speaker, vectors):  # the one write of long-term memory (memory/lzg.py)
        out = await lzg.episode_schreiben(pool, user_id, character_id, ep)
        ids += out.episode
        edges += max(0, len(out.episode) - 1)
    if not ids:  # imported before: its long-term memory stands, and so do its session and KZG
        return {"turns": len(turns), "lzg_nodes": 0, "synapses": 0, "kzg_entries": 0}
    for t, text, v in list(zip(turns, texts, vectors))[-KZG_RECENT_TURNS:]:
        await kzg.add_entry(r, user_id, character_id, text, v, quelle=t.source_id)
    records = []
    for t in turns:
        rolle = "user" if t.speaker == user_speaker else "assistant"
        records.append(json.dumps({"rolle": rolle, "sprecher": t.speaker, "inhalt": t.text,
                                   "turn_id": f"import-{t.source_id}", "herkunft": "user",
                                   "time": t.when.isoformat(), "quelle": t.source_id}))
    key = session.session_key(user_id, character_id)
    for i in range(0, len(records), 200):
        await r.rpush(key, *records[i:i + 200])
    return {"turns": len(turns), "lzg_nodes": len(ids), "synapses": edges,
            "kzg_entries": min(len(turns), KZG_RECENT_TURNS)}


def read_file(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ImportFormatError(f"{path}: not JSON ({e})") from e
