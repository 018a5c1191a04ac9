"""Rows of prompts/README.md that name what the code holds: the Thinker's normaliser stems are the
settings' (`Settings.thinker_reasoning_models`), the timeline limit caps `timeline_search` only
(seed 000 §4.1; `timeline_check` shows the whole day), and the landscape in the responder's prompt
is the previous turn's cluster (seed 004 §4.1, `memory.cluster_vorturn`, fallback `kein_vorturn`)."""
from pathlib import Path

from core.settings import Settings
from pipeline.thinker import tools

README = (Path(__file__).resolve().parents[2] / "prompts" / "README.md").read_text(encoding="utf-8")


def _row(*words: str) -> str:
    (row,) = [line for line in README.splitlines() if line.startswith("|") and all(w in line for w in words)]
    return row


def test_the_normaliser_row_names_the_stems_of_the_settings():
    row = _row("Normalizer nach dem antwortenden Modell")
    assert [s for s in Settings().thinker_reasoning_models if f"`{s}`" in row] == Settings().thinker_reasoning_models
    assert "`gemma4` und `qwen3` (" not in row


def test_the_timeline_row_caps_only_timeline_search():
    row = _row("ohne Erinnerungs-Anker, im Paar, Limit 5")
    assert tools.TIMELINE_LIMIT == 5
    assert "`timeline_check`, der ganze Tag, ungekappt" in row and "nur `timeline_search` trägt das Limit" in row


def test_the_landscape_rows_name_the_previous_turns_cluster():
    for row in (_row("`szene()`", "`Landschaft: kissenschlacht.`"), _row("`sprachstil()`", "`Landschaft: Kissenschlacht")):
        assert "`memory.cluster_vorturn`" in row and "kein_vorturn" in row and "Verzug" in row
