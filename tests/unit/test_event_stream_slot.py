"""A user's place among the open event streams is given back once, however the stream ends —
also when the client left before the answer started, so that neither the generator nor the
answer ran (the place would otherwise be lost until the replica restarts)."""
import asyncio
import gc

from serve.routes.turns import _Slot, _SlotResponse


async def _never_started():
    yield {"event": "bereit", "data": "{}"}


def test_an_answer_that_never_ran_gives_its_place_back():
    counts = {"alice": 1}
    gen = _never_started()
    _SlotResponse(gen, _Slot(counts, "alice"))  # made and dropped: the client left before it started
    gc.collect()
    assert counts == {"alice": 0}
    asyncio.run(gen.aclose())


def test_the_place_is_given_back_once_whoever_ends_first():
    counts = {"alice": 2}
    slot = _Slot(counts, "alice")
    response = _SlotResponse(_never_started(), slot)
    slot.free()  # the generator's end
    slot.free()
    del response
    gc.collect()  # and the answer's collection
    assert counts == {"alice": 1}
