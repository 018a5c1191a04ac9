"""reducer: merge the memory entries of all sources into one list and shape a block per reader.

Identical content is kept once (the highest weight wins, ties by arrival); every source's weight
is put on one 0–1 scale; each source has a cap. A lorebook's triggered entries (`weg` immer or
schluessel) count against no cap: the store took them within the book's token budget, highest
insertion order first, as SillyTavern does, and they keep its placement order; their placeholders
get the character's and the person's names. `lzg_resonanz` enters the blocks untouched (seed
001: the LZG memories take no dedup). The file index is not merged here: it is its own channel.

Three readers, three blocks (seed 004 §6: the judging nodes see the situation, not the associations):
- `gedaechtnis_verfasser` — the Verfasser's [GEDAECHTNIS]: every entry except the appointment
  window, every LZG memory, a spread one with the path it came by. Seed 001 §3.2: the timeline's
  proactive window (three days back, fourteen ahead) is read by Thinker, tribunal and corrector;
  the Verfasser's [GEDAECHTNIS] lacks it — it gets the appointments the turn asked for in
  [TERMINE] (the router's read), so Nova does not bring up appointments nobody asked about;
- `gedaechtnis_thinker` — the Thinker's [GEDAECHTNIS]: the same with the appointment window;
- `gedaechtnis_tribunal` — the memory part of the tribunal's and the corrector's [FAKTEN]: the
  entries with the window, but only the LZG anchors (seed 000 §4.3: a fact check takes no
  spreading) and no paths. The appointments carry weekday, date and time.
The blocks are grouped by `quelle` (seed 001 §3.2: "Der Formatter gruppiert nach `quelle` statt nach
Listenposition"): each source stands as one group in the order the enricher reads them (KZG,
library, notes, timeline), strongest first within its group, the LZG memories last.
The appointments the router reads come after this node; the tribunal takes them from the route.
"""
from __future__ import annotations

from pipeline.figur import einsetzen, sein_name
from pipeline.node import Node
from pipeline.services import Deps
from core.state import ErinnerungsRahmen, KontextRecord, MemoryRecord, Resonanz, TurnState
from pipeline.timefmt import termin_text

NAME = "reducer"
NODE = Node(
    name=NAME,
    reads=("stimulus", "pair", "memory"),
    writes=("kontext",),
)
CAPS = {"kzg": 5, "bibliothek": 3, "notizen": 5, "timeline": 6}
ABGELOEST_FAKTOR = 0.5
"""A superseded short-term entry's weight against the current ones (it reads as past: `früher: …`)."""
GRUPPEN = ("kzg", "bibliothek", "notizen", "timeline")
"""The order of the source groups in a block: the order the enricher reads its sources in."""
NICHT_FUER_VERFASSER = ("timeline",)
LORE = ("immer", "schluessel")
"""How a lorebook entry was triggered (memory/charaktere.wissen_suchen's `weg`); one found by its
topic (`thema`) is a library entry like the pair's own."""


def entries(memory: MemoryRecord, figur: str | None = None, person: str = "Person B") -> list[dict]:
    """Every source's entries on one scale. `figur`, `person`: the names a character's lorebook entry
    gets for its placeholders (`{{char}}`, `<BOT>`, `{{user}}`, `<USER>`)."""
    out = []
    for h in memory.kzg:
        gewicht = max(0.0, min(1.0, h.similarity)) * (ABGELOEST_FAKTOR if h.abgeloest_seit else 1.0)
        out.append({"quelle": "kzg", "inhalt": h.als_text(), "gewicht": gewicht})  # a superseded one as past
    for h in memory.bibliothek:
        text = f"{h.titel}: {h.inhalt}"
        if h.weg is not None and figur:  # the character's book, written for any user
            text = einsetzen(text, figur, person)
        out.append({"quelle": "bibliothek", "inhalt": text, "gewicht": h.gewicht, "lore": h.weg in LORE})
    for n in memory.plugins.get("notizen", []):
        text = n["name"] + (f" — {n['zusammenfassung']}" if n.get("zusammenfassung") else "")
        if n.get("inhalt"):  # a note the human asked about carries its text (the notes plugin's targeted branch)
            text += f": {n['inhalt']}"
        out.append({"quelle": "notizen", "inhalt": text, "gewicht": 0.5})
    for t in memory.plugins.get("timeline", []):
        out.append({"quelle": "timeline", "inhalt": termin_text(t), "gewicht": 0.6})
    return out


def lore(memory: MemoryRecord, figur: str, person: str = "Person B") -> str:
    """The lorebook's triggered entries of the turn as lines, in their placement order (the store's
    token budget has bounded them), placeholders filled: what the responder reads on a turn whose
    context an agent cut, where no Verfasser brings them."""
    return "\n".join(f"- {e['inhalt']}" for e in entries(memory, figur, person) if e.get("lore"))


def reduce(raw: list[dict]) -> list[dict]:
    best: dict[str, tuple[int, dict]] = {}
    for order, e in enumerate(raw):
        key = " ".join(e["inhalt"].lower().split())
        if key not in best or e["gewicht"] > best[key][1]["gewicht"]:
            best[key] = (best[key][0] if key in best else order, e)
    kept = [e for _, e in sorted(best.values(), key=lambda x: x[0])]
    out, counts = [], {}
    for e in sorted(kept, key=lambda e: -e["gewicht"]):
        if e.get("lore"):  # bounded by the book's token budget in the store, not by a count
            out.append(e)
            continue
        counts[e["quelle"]] = counts.get(e["quelle"], 0) + 1
        if counts[e["quelle"]] <= CAPS.get(e["quelle"], 5):
            out.append(e)
    rang = {q: i for i, q in enumerate(GRUPPEN)}
    return sorted(out, key=lambda e: rang.get(e["quelle"], len(GRUPPEN)))  # stable: strongest first in a group


def rahmen_zeile(rahmen: ErinnerungsRahmen) -> str:
    """The frame of the long-term read (seed 001 §4: "Kontext-Rahmen (Anker-Anzahl, Sprung-Tiefe,
    Cluster, Nova-Sektor)"), the line that heads its memories in a [GEDAECHTNIS]."""
    sektor = f", Sektor {rahmen.nova_sektor}" if rahmen.nova_sektor else ""
    return (f"Rahmen der Erinnerungen: {rahmen.anker_anzahl} Anker, Sprung-Tiefe {rahmen.sprung_tiefe}, "
            f"Landschaft {rahmen.cluster}{sektor}")


def block(kept: list[dict], resonanz: Resonanz | None, ohne: tuple[str, ...] = ()) -> str:
    """A [GEDAECHTNIS]: the kept entries by source group, then the LZG memories with their paths
    under the frame of their read (seed 001 §3.3: the reducer passes `lzg_resonanz` through to the
    formatter whole); the sources in `ohne` left out (the Verfasser's: the appointment window)."""
    lines = [f"- ({e['quelle']}) {e['inhalt']}" for e in kept if e["quelle"] not in ohne]
    if resonanz and resonanz.erinnerungen:
        lines.append(rahmen_zeile(resonanz.rahmen))
        for m in resonanz.erinnerungen:
            via = "" if m.tiefe == 0 else f" [{m.eingefallen_ueber}]"
            lines.append(f"- (erinnerung) {m.als_text()}{via}")
    return "\n".join(lines)


BESTAND = ("timeline", "notizen")  # what a pair's next turn finds again, not what this turn's search found


def block_tribunal(kept: list[dict], resonanz: Resonanz | None) -> str:
    """The memory part of the tribunal's and the corrector's [FAKTEN]: the anchors of the LZG
    read, no memory that came by spreading, no path. The pair's standing entries (the window's
    appointments, the notes) come before what this turn's search found, so the next turn's prompt
    repeats them byte for byte and an engine reuses them (a fact check reads a list, no ranking)."""
    ordered = [e for e in kept if e["quelle"] in BESTAND] + [e for e in kept if e["quelle"] not in BESTAND]
    lines = [f"- ({e['quelle']}) {e['inhalt']}" for e in ordered]
    lines += [f"- (erinnerung) {m.als_text()}" for m in (resonanz.erinnerungen if resonanz else []) if m.tiefe == 0]
    return "\n".join(lines)


@NODE.runs
async def run(state: TurnState, deps: Deps) -> dict:
    raw = entries(state.memory, state.pair.character_name, sein_name(state) or "Person B")
    kept = reduce(raw)
    resonanz = state.memory.lzg_resonanz
    rec = KontextRecord(gedaechtnis_verfasser=block(kept, resonanz, ohne=NICHT_FUER_VERFASSER),
                        gedaechtnis_thinker=block(kept, resonanz), gedaechtnis_tribunal=block_tribunal(kept, resonanz))
    erinnerungen = resonanz.erinnerungen if resonanz else []
    deps.trace.decision(NAME, "reducer.zusammenfuehrung", "eintraege" if kept or resonanz else "leer",
                        {"roh": len(raw), "behalten": len(kept), "lzg": len(erinnerungen),
                         "lzg_anker_tribunal": sum(1 for m in erinnerungen if m.tiefe == 0),
                         "zeichen_verfasser": len(rec.gedaechtnis_verfasser),
                         "zeichen_thinker": len(rec.gedaechtnis_thinker),
                         "zeichen_tribunal": len(rec.gedaechtnis_tribunal)})
    return {"kontext": rec}
