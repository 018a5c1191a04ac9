"""Local time for prompts: the configured time zone and German weekday names from a table
(seed 004: `%A` in the C locale gave "Monday" in a German prompt)."""
from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

WOCHENTAGE = ("Montag", "Dienstag", "Mittwoch", "Donnerstag", "Freitag", "Samstag", "Sonntag")


def local_now(tz: str, now: datetime | None = None) -> datetime:
    now = now or datetime.now(ZoneInfo("UTC"))
    return now.astimezone(ZoneInfo(tz))


def wochentag(dt: datetime) -> str:
    return WOCHENTAGE[dt.weekday()]
