"""The timeline agent's rule for its pending order (`ergaenzen`) reads a date against the message's
own time: a message an operator dated (`zeitpunkt`) completes the order with a date that was still
ahead then, and a date already past at that time completes nothing."""
from datetime import datetime, timezone

from pipeline.agents.timeline.dispatch import ergaenzen

DAMALS = datetime(2023, 5, 8, 12, 0, tzinfo=timezone.utc)


def test_a_dated_message_is_read_against_its_own_day():
    assert ergaenzen({}, ["wann"], "Am 20. Mai 2023 um 15 Uhr, danke", "Europe/Berlin", DAMALS) == {
        "wann": "Am 20. Mai 2023 um 15 Uhr"}
    # the same words today: that day has passed, nothing is completed
    assert ergaenzen({}, ["wann"], "Am 20. Mai 2023 um 15 Uhr, danke", "Europe/Berlin") is None


def test_a_date_past_at_the_messages_time_completes_nothing():
    assert ergaenzen({}, ["wann"], "am 1. Mai 2023 um 9 Uhr", "Europe/Berlin", DAMALS) is None
    assert ergaenzen({}, ["titel"], "am 20. Mai 2023 um 15 Uhr", "Europe/Berlin", DAMALS) is None
