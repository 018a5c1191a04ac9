"""Knowledge that changes (memory/LESEPFAD.md, "Supersession"): a long-term memory can be marked
superseded by a later one (`lzg.abloesen`): `gueltig_bis` on the old node, a synapse
`abgeloest_durch` from old to new, once, and taken back with the turn that made the mark."""
import asyncio
from datetime import datetime, timezone

from memory import lzg, ruecknahme
from memory.ops import PoolStore
from tests.conftest import new_pair, unit, with_pool

DAMALS = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


async def _mark(p, alt: int):
    async with p.connection() as conn:
        cur = await conn.execute("SELECT gueltig_bis FROM lzg_knoten WHERE id=%s", (alt,))
        bis = (await cur.fetchone())[0]
        cur = await conn.execute("SELECT nach_id, art FROM lzg_synapsen WHERE von_id=%s AND art='abgeloest_durch'", (alt,))
        return bis, await cur.fetchall()


def test_the_store_op_marks_once_and_a_rewind_takes_the_mark_back(pool):
    user, ch = new_pair("abl")

    async def go(p):
        alt, neu = await lzg.add_nodes(p, user, ch, [{"inhalt": "Bello lebt", "embedding": unit(1)},
                                                     {"inhalt": "Bello ist gestorben", "embedding": unit(2)}])
        store = PoolStore(p)
        first = await store.lzg.abloesen(user, ch, alt, neu, "t9", seit=DAMALS)
        again = await store.lzg.abloesen(user, ch, alt, neu, "t9", seit=datetime.now(timezone.utc))
        marked = await _mark(p, alt)
        fremd = await store.lzg.abloesen("someone-else", ch, alt, neu, "t9")
        await ruecknahme.zuruecknehmen(p, user, ch, ["t9"])
        return first, again, marked, fremd, await _mark(p, alt)

    first, again, marked, fremd, after = asyncio.run(with_pool(pool, go))
    assert first is True and again is False and fremd is False
    assert marked[0] == DAMALS and [a for _, a in marked[1]] == ["abgeloest_durch"]
    assert after == (None, [])
