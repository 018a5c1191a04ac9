"""Redis session of a pair and the idempotency record of its turns.

Keys: `session:{user}:{character}:turns` (list of turn records, oldest first) and
`turnres:{user}:{character}:{turn_id}` (the stored result of a finished turn). A turn is committed
by one Lua script, so the two session entries, the stored result and the outbox job appear
together or not at all: a repeated `turn_id` can never append twice.
"""
from __future__ import annotations

import json
from typing import Any

from redis.asyncio import Redis

from memory.outbox import OUTBOX_STREAM


def session_key(user_id: str, character_id: str) -> str:
    return f"session:{user_id}:{character_id}:turns"


def summary_key(user_id: str, character_id: str) -> str:
    return f"session:{user_id}:{character_id}:summary"


def result_key(user_id: str, character_id: str, turn_id: str) -> str:
    return f"turnres:{user_id}:{character_id}:{turn_id}"


_COMMIT = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'EX', tonumber(ARGV[2]))
if ARGV[3] == '' then
  redis.call('RPUSH', KEYS[2], ARGV[4])
else
  redis.call('RPUSH', KEYS[2], ARGV[3], ARGV[4])
end
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[5]), -1)
for i = 6, #ARGV do
  redis.call('XADD', KEYS[3], '*', 'job', ARGV[i])
end
return 1
"""


async def load_turns(r: Redis, user_id: str, character_id: str, last: int) -> list[dict[str, Any]]:
    raw = await r.lrange(session_key(user_id, character_id), -last, -1)
    return [json.loads(x) for x in raw]


async def count_turns(r: Redis, user_id: str, character_id: str) -> int:
    return await r.llen(session_key(user_id, character_id))


async def set_summary(r: Redis, user_id: str, character_id: str, summary: str) -> None:
    await r.set(summary_key(user_id, character_id), summary)


async def get_summary(r: Redis, user_id: str, character_id: str) -> str | None:
    raw = await r.get(summary_key(user_id, character_id))
    return None if raw is None else raw.decode()


async def stored_result(r: Redis, user_id: str, character_id: str, turn_id: str) -> dict | None:
    raw = await r.get(result_key(user_id, character_id, turn_id))
    return None if raw is None else json.loads(raw)


async def commit_turn(r: Redis, *, user_id: str, character_id: str, turn_id: str, result: dict,
                      user_turn: dict | None, nova_turn: dict, job: dict | list[dict], keep_turns: int, ttl_s: int) -> bool:
    """Store result, both session turns and the outbox jobs atomically. False: already committed.
    `user_turn` None: the turn has no new message of the human (a self-triggered retry)."""
    jobs = job if isinstance(job, list) else [job]
    done = await r.eval(
        _COMMIT, 3,
        result_key(user_id, character_id, turn_id), session_key(user_id, character_id), OUTBOX_STREAM,
        json.dumps(result), ttl_s, json.dumps(user_turn) if user_turn is not None else "", json.dumps(nova_turn), keep_turns,
        *[json.dumps(j) for j in jobs],
    )
    return bool(done)


_GREET = """
if redis.call('LLEN', KEYS[1]) > 0 then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[1])
return 1
"""


async def begruessen(r: Redis, user_id: str, character_id: str, turn: dict) -> bool:
    """The character's greeting as the first message of a pair's session, once: only a session
    without any turn takes it (atomic, so two clients asking at once store it once)."""
    return bool(await r.eval(_GREET, 1, session_key(user_id, character_id), json.dumps(turn)))
