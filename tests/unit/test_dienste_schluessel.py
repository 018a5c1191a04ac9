"""The turn's search key reaches the services `wissen` and `dateien` (seed 001: `such_vektor`
travels to them as their declared need): the enricher writes it into the memory record,
the Thinker hands it to the services (tests/stores/test_lesepfad.py runs the enricher, tests/stores/test_dienste.py the Thinker); the
Thinker's protocol reads a call of either service."""
import re

from core.state import MemoryRecord
from pipeline.thinker.protokoll import REGEX, lesen


def test_the_key_survives_the_jobs_json():
    kept = MemoryRecord.model_validate_json(MemoryRecord(such_vektor=[0.6, 0.8, 0.0]).model_dump_json())
    assert kept.such_vektor == [0.6, 0.8, 0.0] and MemoryRecord().such_vektor is None


def test_the_protocol_reads_a_service_call_with_and_without_a_question():
    for line, arg in (("TOOL: wissen()", ""), ("TOOL: dateien(Steuerfrist)", "Steuerfrist")):
        step = lesen(line)
        assert (step.art, step.argument) == ("tool", arg)
        assert re.fullmatch(REGEX, line)  # an engine held to the protocol may write it
