"""Timeline: UTC storage, local-day queries across DST, anchors excluded before the limit, the
proactive window with German weekdays and the relation to today."""
import asyncio
from datetime import date, datetime, timezone

from memory import timeline
from tests.conftest import new_pair, with_pool

TZ = "Europe/Berlin"


def test_stored_in_utc_and_dst_days(pool):
    async def go(p):
        user, ch = new_pair("tl")
        # 2026-03-29: clocks jump 02:00 → 03:00 (a 23-hour day); 2026-10-25: 03:00 → 02:00 (25 hours)
        spring = await timeline.add(p, user, ch, "Fruehlingsbrunch", datetime(2026, 3, 29, 23, 30), TZ)
        late_sat = await timeline.add(p, user, ch, "Samstagnacht", datetime(2026, 3, 28, 23, 30), TZ)
        autumn = await timeline.add(p, user, ch, "Herbstnacht", datetime(2026, 10, 25, 2, 30), TZ)
        rows = await timeline.find_by_date_range(p, user, ch, date(2026, 3, 29), date(2026, 3, 29), TZ)
        assert [r.id for r in rows] == [spring]
        assert rows[0].beginn_utc == "2026-03-29T21:30:00+00:00"  # CEST, UTC+2
        assert rows[0].wochentag == "Sonntag"
        sat = await timeline.find_by_date_range(p, user, ch, date(2026, 3, 28), date(2026, 3, 28), TZ)
        assert [r.id for r in sat] == [late_sat] and sat[0].beginn_utc == "2026-03-28T22:30:00+00:00"
        oct_ = await timeline.find_by_date_range(p, user, ch, date(2026, 10, 25), date(2026, 10, 25), TZ)
        assert [r.id for r in oct_] == [autumn]
        start, end = timeline.day_bounds_utc(date(2026, 10, 25), TZ)
        assert (end - start).total_seconds() == 25 * 3600

    asyncio.run(with_pool(pool, go))


def test_anchors_are_excluded_before_the_limit(pool):
    async def go(p):
        user, ch = new_pair("anchor")
        for i in range(6):
            await timeline.add(p, user, ch, f"Zahnarzt Erinnerung {i}", datetime(2026, 12, 1, 9, i), TZ,
                               typ="erinnerungs_anker")
        real = await timeline.add(p, user, ch, "Zahnarzt Termin", datetime(2026, 12, 20, 9, 0), TZ,
                                  personen=["Dr. Weber"])
        found = await timeline.find_by_keyword(p, user, ch, "zahnarzt", TZ, limit=5,
                                               now=datetime(2026, 12, 1, tzinfo=timezone.utc))
        assert [r.id for r in found] == [real]
        by_person = await timeline.find_by_keyword(p, user, ch, "weber", TZ)
        assert [r.id for r in by_person] == [real]
        day = await timeline.find_by_date_range(p, user, ch, date(2026, 12, 1), date(2026, 12, 1), TZ)
        assert day == []
        with_anchors = await timeline.find_by_date_range(p, user, ch, date(2026, 12, 1), date(2026, 12, 1), TZ,
                                                         include_anchors=True)
        assert len(with_anchors) == 6
        other = await timeline.find_by_keyword(p, "someone-else", ch, "zahnarzt", TZ)
        assert other == []

    asyncio.run(with_pool(pool, go))


def test_proactive_window(pool):
    now = datetime(2026, 11, 30, 10, 0, tzinfo=timezone.utc)  # a Monday

    async def go(p):
        user, ch = new_pair("window")
        await timeline.add(p, user, ch, "zu alt", datetime(2026, 11, 26, 12), TZ)
        await timeline.add(p, user, ch, "vor drei Tagen", datetime(2026, 11, 27, 12), TZ)
        await timeline.add(p, user, ch, "heute Abend", datetime(2026, 11, 30, 20), TZ)
        await timeline.add(p, user, ch, "morgen", datetime(2026, 12, 1, 8), TZ)
        await timeline.add(p, user, ch, "in zwei Wochen", datetime(2026, 12, 14, 8), TZ)
        await timeline.add(p, user, ch, "zu weit", datetime(2026, 12, 15, 8), TZ)
        rows = await timeline.proaktives_fenster(p, user, ch, TZ, now=now)
        assert [(r.titel, r.wochentag, r.bezug) for r in rows] == [
            ("vor drei Tagen", "Freitag", "vor 3 Tagen"), ("heute Abend", "Montag", "heute"),
            ("morgen", "Dienstag", "morgen"), ("in zwei Wochen", "Montag", "in 14 Tagen")]

    asyncio.run(with_pool(pool, go))


def test_move_and_delete(pool):
    async def go(p):
        user, ch = new_pair("crud")
        i = await timeline.add(p, user, ch, "Kino", datetime(2026, 12, 5, 20), TZ)
        assert await timeline.move(p, user, ch, i, datetime(2026, 12, 6, 21), TZ)
        rows = await timeline.find_by_date_range(p, user, ch, date(2026, 12, 6), date(2026, 12, 6), TZ)
        assert rows[0].beginn_lokal.startswith("2026-12-06T21:00")
        assert not await timeline.delete(p, "intruder", ch, i)
        assert await timeline.delete(p, user, ch, i)

    asyncio.run(with_pool(pool, go))
