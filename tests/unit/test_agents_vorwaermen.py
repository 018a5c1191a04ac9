"""The agents' warm-up: what an agent's first order would load (the timeline agent: dateparser and
its German data) loads once per process in a thread of its own, started by the planner beside its
model call, never on the turn's path; a warm-up that fails says so by name and costs nothing else."""
import logging
import subprocess
import sys
import threading

from pipeline import agents

_FRISCH = """
import sys
from pipeline import agents
assert "dateparser" not in sys.modules
started = agents.vorwaermen_starten()
print([t.name for t in started])
for t in started:
    t.join(60)
from dateparser.languages.loader import default_loader
print("dateparser" in sys.modules, sorted(default_loader._loaded_languages))
print(agents.vorwaermen_starten())
"""


def test_the_timeline_agents_library_and_german_data_load_once_in_a_thread_of_their_own():
    out = subprocess.run([sys.executable, "-c", _FRISCH], capture_output=True, text=True, timeout=120, check=True)
    started, loaded, again = out.stdout.splitlines()
    assert started == "['vorwaermen-timeline']"  # the only agent with something to load
    assert loaded == "True ['de']"
    assert again == "[]"  # once per process


def test_a_warm_up_that_fails_is_named_and_does_not_reach_the_caller(monkeypatch, caplog):
    ran = []

    def boom():
        ran.append(threading.current_thread().name)
        raise OSError("language data missing")

    async def dispatch(state, deps):
        return None

    monkeypatch.setattr(agents, "AGENTS", {"kaputt": agents.Agent(name="kaputt", dispatch=dispatch, vorwaermen=boom),
                                           "ohne": agents.Agent(name="ohne", dispatch=dispatch)})
    monkeypatch.setattr(agents, "_gewaermt", set())
    with caplog.at_level(logging.WARNING, logger="novaberg.agents"):
        for t in agents.vorwaermen_starten():
            t.join(10)
    assert ran == ["vorwaermen-kaputt"]  # not on the caller's thread; the agent without one starts nothing
    assert "fallback kalt_beim_ersten_auftrag: kaputt" in caplog.text
    assert agents.vorwaermen_starten() == []  # failed once: not again on every turn
