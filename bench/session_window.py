"""The responder's session window, three ways side by side: what the prompt shows and what the
engine must read anew each turn.

Seed 004 §4.1 fixes `SESSION_MAX_TURNS = 20` and names trimming the history the strongest remedy
against echo; an engine's prefix cache (llama.cpp, vLLM) reuses a prompt only up to its first
changed character, so a window that slides by one entry a turn makes it re-read the whole history.
A synthetic conversation (fixed seed: the person's entries ~80 characters, Nova's ~260) is rendered
each turn with the responder's own history block (`pipeline.nodes.responder._verlauf`) under:

- `gleitend` — exactly the newest 20 entries, sliding by one entry a turn (the seed's literal form);
- `block_mindestens` — at least 20, from a block's start (20–27 entries: the window until now);
- `block_hoechstens` — at most 20, from a block's start (13–20 entries: the window now).

For each: entries shown (mean, max) and the history characters not covered by the previous turn's
prompt (what the engine prefills anew, mean per turn; ÷ 4 ≈ tokens).

    python -m bench.session_window [--turns 200]
"""
from __future__ import annotations

import argparse
import json
import os
import random
from datetime import datetime, timezone


def _conversation(n_entries: int) -> list:
    from core.state import SessionTurn

    rng = random.Random(7)
    words = "ich du wir heute morgen Meer Hund Arbeit Abend Buch Regen Sonne Musik Freund Stadt Zug".split()
    out = []
    for i in range(n_entries):
        mensch = i % 2 == 0
        length = max(12, int(rng.gauss(80 if mensch else 260, 30 if mensch else 90)))
        text = ""
        while len(text) < length:
            text += rng.choice(words) + " "
        out.append(SessionTurn(rolle="user" if mensch else "assistant", sprecher="Person B" if mensch else "Nova",
                               inhalt=text.strip(), turn_id=f"t{i // 2}", time=datetime(2026, 12, 1, tzinfo=timezone.utc),
                               emotion="freude", arousal=0.5))
    return out


def _common(a: str, b: str) -> int:
    return len(os.path.commonprefix([a, b]))


def measure(turns: int, n: int = 20) -> dict:
    from memory import session
    from pipeline.nodes.responder import _verlauf

    conv = _conversation(2 * turns)
    ways = {"gleitend": lambda g: max(0, g - n),
            "block_mindestens": lambda g: session.fenster_start(g, n),
            "block_hoechstens": lambda g: session.fenster_start(g, n, hoechstens=True)}
    out = {}
    for name, start in ways.items():
        shown, anew, prev = [], [], ""
        for t in range(1, turns + 1):
            total = 2 * t - 1  # the person's new entry is the message itself; the history holds what came before
            window = conv[start(total - 1):total - 1]
            text = _verlauf(window)
            shown.append(len(window))
            anew.append(len(text) - _common(prev, text))
            prev = text
        steady = slice(n, None)  # turns after the window first fills
        out[name] = {"eintraege_mittel": round(sum(shown[steady]) / len(shown[steady]), 1),
                     "eintraege_max": max(shown),
                     "neu_zu_lesen_zeichen_mittel": round(sum(anew[steady]) / len(anew[steady])),
                     "verlauf_zeichen_mittel": round(sum(len(_verlauf(conv[start(2 * t - 2):2 * t - 2]))
                                                         for t in range(n + 1, turns + 1)) / (turns - n))}
    return {"turns": turns, "session_max_turns": n, "block": session.FENSTER_BLOCK, "ways": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=200)
    args = ap.parse_args()
    print(json.dumps(measure(args.turns), indent=2))


if __name__ == "__main__":
    main()
