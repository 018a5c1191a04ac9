"""The turn's search key reaches the services `wissen` and `dateien` (seed 001: `such_vektor`
travels to them as their declared need): the enricher hands it to every plugin, the plugin
`such_vektor` keeps it in the memory record, `dienste.suchschluessel` reads it there; the Thinker's
protocol reads a call of either service."""
import asyncio
import re

from pipeline import dienste, plugins
from pipeline.plugins import such_vektor
from pipeline.state import MemoryRecord
from pipeline.thinker.protokoll import REGEX, lesen


def test_the_plugin_keeps_the_key_it_was_handed_and_the_services_read_it():
    assert such_vektor in plugins.discover() and plugins.braucht_suchschluessel(such_vektor)
    kept = asyncio.run(such_vektor.enrich(None, None, (0.6, 0.8, 0.0)))
    memory = MemoryRecord(plugins={such_vektor.NAME: kept})
    assert dienste.suchschluessel(memory) == [0.6, 0.8, 0.0]
    assert asyncio.run(such_vektor.enrich(None, None, None)) == []  # a turn that searched nothing keeps none
    assert dienste.suchschluessel(MemoryRecord()) is None and dienste.suchschluessel(None) is None


def test_the_protocol_reads_a_service_call_with_and_without_a_question():
    for line, arg in (("TOOL: wissen()", ""), ("TOOL: dateien(Steuerfrist)", "Steuerfrist")):
        step = lesen(line)
        assert (step.art, step.argument) == ("tool", arg)
        assert re.fullmatch(REGEX, line)  # an engine held to the protocol may write it
