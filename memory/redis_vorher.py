"""Before-images of a turn's overwrites in Redis: Nova's state after a turn, the pair's GV detail,
the session summary, the self-trigger count. Before a turn first overwrites one of these keys,
the key as it was (a string, a hash, or none) goes into the turn's hash `vorher:{user}:{character}:{turn}`
(the first image of a turn wins); taking the turn back (`memory/ruecknahme.py`) puts the keys
back, newest turn first, and drops the hash. The Postgres side is `memory/vorher.py`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from memory import schluessel_index

if TYPE_CHECKING:
    from redis.asyncio import Redis

FRIST_S = schluessel_index.VORHER_FRIST_S
"""How long a turn's before-images are kept (defined beside the key index, which keeps a turn as
long as any of its keys)."""

LUA_FESTHALTEN = schluessel_index.LUA_MERKEN + """
local function vorher_festhalten(key, ziel, ttl)
  if ziel == '' or redis.call('HEXISTS', ziel, key) == 1 then return end
  ziel_merken(ziel)
  local typ = redis.call('TYPE', key)['ok']
  local bild = '{"typ":"none"}'
  if typ == 'string' then bild = cjson.encode({typ = 'string', wert = redis.call('GET', key)})
  elseif typ == 'hash' then bild = cjson.encode({typ = 'hash', wert = redis.call('HGETALL', key)}) end
  redis.call('HSET', ziel, key, bild)
  redis.call('EXPIRE', ziel, ttl)
end
"""
"""A Lua function for scripts that overwrite a key: `vorher_festhalten(key, vorher_key(...), FRIST_S)`
(an empty `ziel`: the write belongs to no turn, nothing is kept). The turn enters its pair's index
(memory/schluessel_index.py) with its first image."""

_ZURUECK = """
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local key, b = all[i], cjson.decode(all[i + 1])
  redis.call('DEL', key)
  if b.typ == 'string' then redis.call('SET', key, b.wert)
  elseif b.typ == 'hash' and #b.wert > 0 then redis.call('HSET', key, unpack(b.wert)) end
end
redis.call('DEL', KEYS[1])
return #all / 2
"""


def vorher_key(user_id: str, character_id: str, turn_id: str | None) -> str:
    """The turn's hash of before-images ('' without a turn)."""
    return f"vorher:{user_id}:{character_id}:{turn_id}" if turn_id else ""


async def festhalten(r: Redis, user_id: str, character_id: str, turn_id: str | None, *keys: str) -> None:
    """Keep the keys as they are now, before the turn overwrites them (first image of a turn wins)."""
    ziel = vorher_key(user_id, character_id, turn_id)
    if ziel and keys:
        await r.eval(LUA_FESTHALTEN + "for i = 2, #KEYS do vorher_festhalten(KEYS[i], KEYS[1], tonumber(ARGV[1])) end",
                     1 + len(keys), ziel, *keys, FRIST_S)


async def zuruecksetzen(r: Redis, user_id: str, character_id: str, turn_ids: list[str]) -> int:
    """Put back what the turns overwrote, newest turn first (`turn_ids` oldest first); each turn's
    hash goes in the same step as its keys come back. Returns the keys put back."""
    n = 0
    for turn_id in reversed(turn_ids):
        n += int(await r.eval(_ZURUECK, 1, vorher_key(user_id, character_id, turn_id)))
    return n
