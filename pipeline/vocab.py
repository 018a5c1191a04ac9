"""The vocabularies the seeds use, each set in one place (NODES.md, "Vocabularies")."""
from __future__ import annotations

EMOTIONEN = ("freude", "vertrauen", "angst", "ueberraschung", "traurigkeit", "ekel", "aerger", "erwartung",
             "frustration", "zufriedenheit", "neutral")
# Plutchik sector of each emotion (Nova's sector in the scene)
SEKTOR = {"freude": "freude", "zufriedenheit": "freude", "vertrauen": "vertrauen", "angst": "angst",
          "ueberraschung": "ueberraschung", "traurigkeit": "traurigkeit", "ekel": "ekel", "aerger": "aerger",
          "frustration": "aerger", "erwartung": "erwartung", "neutral": "neutral"}
# valence of each emotion, for the emotion vector
VALENZ = {"freude": 1.0, "zufriedenheit": 0.7, "vertrauen": 0.6, "erwartung": 0.3, "ueberraschung": 0.1,
          "neutral": 0.0, "angst": -0.6, "traurigkeit": -0.8, "ekel": -0.6, "aerger": -0.8, "frustration": -0.6}
EMOTIONS_VEKTOREN = ("einbruch", "absturz", "spirale", "erholung", "plateau", "stabilisierung")
SPRACHSTILE = ("locker", "formell", "fachlich", "emotional", "jugendlich")
BEZIEHUNGSDYNAMIK = ("vertrauen", "distanz", "angriff", "hilfesuchend", "dankbar", "neutral")
LEICHTE_INTENTIONEN = ("smalltalk", "bestaetigung", "abschluss", "humor")
USER_INTENTIONEN = LEICHTE_INTENTIONEN + ("anweisung", "hilferuf", "emotionaler_ausdruck", "information_teilen",
                                         "frage")
GESPRAECHSMODI = ("plaudern", "austausch", "beratung", "anliegen", "konflikt")
MOMENTUM = ("low", "mid", "high")
MANAGEMENT = ("keins", "notizen", "timeline", "direktiven", "charakter")
HERKUNFT = ("user", "eigener_impuls", "self_trigger")
AGENT_STATUS = ("abgeschlossen", "fehler", "rueckfrage", "verworfen")
CLUSTER = ("kissenschlacht", "feuerwerk", "schlachtfeld", "paradox", "lagerfeuer", "werkstatt", "bibliothek",
           "hafen", "gipfel", "nebelwald", "tanzflaeche", "krankenzimmer", "labyrinth", "garten")
WERKZEUGE = ("Impuls", "Frage", "Spiegel", "Geschichte", "Rat", "Trost", "Humor")
UMFANG_SPANNE = {"knapp": (1, 2), "mittel": (2, 3), "ausfuehrlich": (3, 5)}
"""Span of the reply in sentences per `umfang` (seed 004 §3.3: sentences, not characters)."""


def pick(value, allowed, default):
    """The value when it belongs to the vocabulary, else the default (callers log the fallback)."""
    return value if value in allowed else default
