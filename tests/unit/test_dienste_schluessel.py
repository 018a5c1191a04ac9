"""The turn's search key reaches the services `wissen` and `dateien` (seed 001: `such_vektor`
travels to them as their declared need): the enricher writes it into the memory record,
`dienste.suchschluessel` reads it there (tests/stores/test_lesepfad.py runs the enricher); the
Thinker's protocol reads a call of either service."""
import re

from pipeline import dienste
from pipeline.state import MemoryRecord
from pipeline.thinker.protokoll import REGEX, lesen


def test_the_services_read_the_key_the_memory_record_carries():
    assert dienste.suchschluessel(MemoryRecord(such_vektor=[0.6, 0.8, 0.0])) == [0.6, 0.8, 0.0]
    # a turn that searched nothing carries none, through the job's JSON as well
    leer = MemoryRecord.model_validate_json(MemoryRecord().model_dump_json())
    assert dienste.suchschluessel(leer) is None and dienste.suchschluessel(None) is None


def test_the_protocol_reads_a_service_call_with_and_without_a_question():
    for line, arg in (("TOOL: wissen()", ""), ("TOOL: dateien(Steuerfrist)", "Steuerfrist")):
        step = lesen(line)
        assert (step.art, step.argument) == ("tool", arg)
        assert re.fullmatch(REGEX, line)  # an engine held to the protocol may write it
