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


def heute_text(tz: str, now: datetime | None = None) -> str:
    """Today for a prompt that judges dates: German weekday, date, time and the zone."""
    local = local_now(tz, now)
    return f"{wochentag(local)}, {local.strftime('%d.%m.%Y, %H:%M')} Uhr ({tz})"


def termin_text(t: dict) -> str:
    """An appointment as the timeline store gives it (`wochentag`, `beginn_lokal`, `titel`, the
    window's `bezug`): weekday, date and local time, so a reader can check one against the other."""
    beginn = t.get("beginn_lokal")
    if beginn:
        local = datetime.fromisoformat(beginn)
        wann = f"{t.get('wochentag') or wochentag(local)}, {local.strftime('%d.%m.%Y, %H:%M')} Uhr"
    else:
        wann = t.get("wochentag") or "ohne Datum"
    bezug = f" ({t['bezug']})" if t.get("bezug") else ""
    return f"{wann}{bezug}: {t.get('titel', '')}"
