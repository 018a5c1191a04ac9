"""Import a conversation history into a pair's memory without LLM calls.

Accepts the LoCoMo conversation format: one object with `conversation` holding `speaker_a`,
`speaker_b`, `session_N` (turns `{speaker, dia_id, text}`) and `session_N_date_time`. One speaker
is the user, the other the character. Every turn becomes an LZG node (text embedded as
`[date] speaker: text`, source id kept in `quelle`), consecutive turns of a session are linked by
synapses, the newest turns fill the session and the KZG.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from core.errors import InputError
from memory import kzg, lzg, session

EmbedFn = Callable[[list[str]], list[list[float]]]
NEIGHBOUR_WEIGHT = 0.6
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


def node_text(t: Turn) -> str:
    date = t.when.strftime("%d %B %Y") if t.when else "?"
    return f"[{date}] {t.speaker}: {t.text}"


async def import_conversation(pool, r, user_id: str, character_id: str, turns: list[Turn], user_speaker: str,
                              embed: EmbedFn, batch: int = 64) -> dict[str, int]:
    texts = [node_text(t) for t in turns]
    vectors: list[list[float]] = []
    for i in range(0, len(texts), batch):
        vectors += embed(texts[i:i + batch])
    ids = await lzg.add_nodes(pool, user_id, character_id, [
        {"inhalt": text, "embedding": v, "dimension": "gespraech",
         "beobachter": "mensch" if t.speaker == user_speaker else "nova", "quelle": t.source_id,
         "zeitpunkt": t.when} for t, text, v in zip(turns, texts, vectors)])
    edges = [(ids[i], ids[i + 1], NEIGHBOUR_WEIGHT) for i in range(len(turns) - 1)
             if turns[i].session == turns[i + 1].session]
    await lzg.add_synapses(pool, edges, art="nachbar")
    for t, text, v in list(zip(turns, texts, vectors))[-KZG_RECENT_TURNS:]:
        await kzg.add_entry(r, user_id, character_id, text, v, quelle=t.source_id)
    records = []
    for t in turns:
        rolle = "user" if t.speaker == user_speaker else "assistant"
        records.append(json.dumps({"rolle": rolle, "sprecher": t.speaker, "inhalt": t.text,
                                   "turn_id": f"import-{t.source_id}", "herkunft": "user",
                                   "time": (t.when or datetime.now(timezone.utc)).isoformat(), "quelle": t.source_id}))
    key = session.session_key(user_id, character_id)
    for i in range(0, len(records), 200):
        await r.rpush(key, *records[i:i + 200])
    return {"turns": len(turns), "lzg_nodes": len(ids), "synapses": len(edges),
            "kzg_entries": min(len(turns), KZG_RECENT_TURNS)}


def read_file(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ImportFormatError(f"{path}: not JSON ({e})") from e
