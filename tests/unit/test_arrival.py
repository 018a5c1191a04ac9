"""Turns of a pair run one at a time, lowest arrival number first, whatever order Ray starts them in."""
import asyncio

from actors.arrival import ArrivalOrder


async def _run(order: ArrivalOrder, seqs_and_delays, log):
    async def turn(seq, delay):
        await asyncio.sleep(delay)
        await order.acquire(seq)
        try:
            log.append(("start", seq))
            await asyncio.sleep(0.02)
            log.append(("end", seq))
        finally:
            order.release()

    await asyncio.gather(*(turn(s, d) for s, d in seqs_and_delays))


def test_out_of_order_starts_run_in_arrival_order():
    log = []
    # 3 is started first, 1 a moment later, 2 last: the grace lets 1 and 2 go first
    asyncio.run(_run(ArrivalOrder(grace_s=0.2), [(3, 0.0), (1, 0.01), (2, 0.02)], log))
    assert [s for k, s in log if k == "start"] == [1, 2, 3]
    # never two at once
    running = 0
    for kind, _ in log:
        running += 1 if kind == "start" else -1
        assert running in (0, 1)


def test_a_missing_number_delays_only_by_the_grace():
    log = []

    async def go():
        order = ArrivalOrder(grace_s=0.1)
        await _run(order, [(1, 0.0)], log)
        t = asyncio.get_running_loop().time()
        await _run(order, [(3, 0.0)], log)  # 2 never comes
        return asyncio.get_running_loop().time() - t

    waited = asyncio.run(go())
    assert [s for k, s in log if k == "start"] == [1, 3]
    assert 0.09 <= waited < 1.0


def test_turns_without_a_number_run_after_numbered_ones():
    log = []
    asyncio.run(_run(ArrivalOrder(grace_s=0.05), [(1, 0.0), (None, 0.005), (2, 0.01)], log))
    assert [s for k, s in log if k == "start"] == [1, 2, None]


def test_a_primed_fresh_actor_waits_for_the_next_number():
    log = []
    order = ArrivalOrder(grace_s=0.3)
    order.prime(0)  # nothing started before: 1 is next
    # 2 reaches the new actor 0.1 s before 1: it still runs second
    asyncio.run(_run(order, [(2, 0.0), (1, 0.1), (3, 0.15)], log))
    assert [s for k, s in log if k == "start"] == [1, 2, 3]
