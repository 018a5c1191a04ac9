"""The vocabularies the seeds use, each set in one place (NODES.md, "Vocabularies")."""
from __future__ import annotations

from typing import NamedTuple

EMOTIONEN = ("freude", "vertrauen", "angst", "ueberraschung", "traurigkeit", "ekel", "aerger", "erwartung",
             "frustration", "zufriedenheit", "neutral")
# Plutchik sector of each emotion (Nova's sector in the scene)
SEKTOR = {"freude": "freude", "zufriedenheit": "freude", "vertrauen": "vertrauen", "angst": "angst",
          "ueberraschung": "ueberraschung", "traurigkeit": "traurigkeit", "ekel": "ekel", "aerger": "aerger",
          "frustration": "aerger", "erwartung": "erwartung", "neutral": "neutral"}
# valence of each emotion, for the emotion vector
VALENZ = {"freude": 1.0, "zufriedenheit": 0.7, "vertrauen": 0.6, "erwartung": 0.3, "ueberraschung": 0.1,
          "neutral": 0.0, "angst": -0.6, "traurigkeit": -0.8, "ekel": -0.6, "aerger": -0.8, "frustration": -0.6}
VEKTOR_LAGE = {
    "einbruch": "vorher → deutlich tiefer",
    "absturz": "oben → ploetzlich ganz unten",
    "spirale": "negativ → noch negativer",
    "erholung": "negativ → wieder heller",
    "plateau": "gleichbleibend",
    "stabilisierung": "schwankend → wieder ruhiger",
}
"""Each emotion vector as a situation, without an instruction (seed 004 §3.2 a)."""
EMOTIONS_VEKTOREN = tuple(VEKTOR_LAGE)
SPRACHSTILE = ("locker", "formell", "fachlich", "emotional", "jugendlich")
BEZIEHUNGSDYNAMIK = ("vertrauen", "distanz", "angriff", "hilfesuchend", "dankbar", "neutral")
LEICHTE_INTENTIONEN = ("smalltalk", "bestaetigung", "abschluss", "humor")
USER_INTENTIONEN = LEICHTE_INTENTIONEN + ("anweisung", "hilferuf", "emotionaler_ausdruck", "information_teilen",
                                         "frage")
GESPRAECHSMODI = ("plaudern", "austausch", "beratung", "anliegen", "konflikt")
MOMENTUM = ("low", "mid", "high")
MANAGEMENT = ("keins", "notizen", "timeline", "direktiven", "charakter", "wissen", "dateien")
HERKUNFT = ("user", "eigener_impuls", "self_trigger")
AGENT_STATUS = ("abgeschlossen", "fehler", "rueckfrage", "verworfen")


class Landschaft(NamedTuple):
    """What a landscape cluster gives [DEIN SPRACHSTIL] (seed 004 §4.1): the landscape in a few words,
    how often and how she asks there, and the guiding line."""

    beschreibung: str
    fragen: str
    leitgedanke: str


LANDSCHAFTEN = {
    "kissenschlacht": Landschaft("Spielerisch, nah, lebendig. Leichtigkeit ist der Inhalt.", "Mittel, neckisch",
                                 "Die Leichtigkeit halten, nicht erklaeren."),
    "feuerwerk": Landschaft("Begeistert, hell, laut. Die Freude ist der Anlass.", "Wenig, mitreissend",
                            "Mitfeiern, nicht einordnen."),
    "schlachtfeld": Landschaft("Gespannt, scharf, gegeneinander. Es steht etwas auf dem Spiel.", "Selten, klaerend",
                               "Standhalten, ohne zurueckzuschlagen."),
    "paradox": Landschaft("Widerspruechlich, offen, ungeklaert. Noch ist nicht klar, wohin es geht.",
                          "Mittel, tastend", "Das Ungeklaerte aushalten, nicht vorschnell aufloesen."),
    "lagerfeuer": Landschaft("Warm, ruhig, erzaehlend. Man sitzt beieinander.", "Wenig, einladend",
                             "Zuhoeren und erzaehlen lassen."),
    "werkstatt": Landschaft("Sachlich, tatkraeftig, konkret. Es wird an etwas gebaut.", "Mittel, praezise",
                            "Beim Werkstueck bleiben."),
    "bibliothek": Landschaft("Still, neugierig, gruendlich. Wissen ist der Inhalt.", "Mittel, weiterfuehrend",
                             "Genau sein, nicht ausschweifen."),
    "hafen": Landschaft("Geborgen, ruhig, angekommen. Hier darf man ausruhen.", "Selten, sanft",
                        "Sicherheit geben, nichts antreiben."),
    "gipfel": Landschaft("Stolz, weit, gehoben. Etwas ist geschafft.", "Wenig, anerkennend",
                         "Den Erfolg wuerdigen, nicht kleinreden."),
    "nebelwald": Landschaft("Unsicher, suchend, verhangen. Der Weg ist nicht zu sehen.", "Mittel, behutsam",
                            "Orientierung geben, ohne den Weg vorzuschreiben."),
    "tanzflaeche": Landschaft("Beschwingt, rhythmisch, kokett. Das Hin und Her ist der Inhalt.", "Viel, verspielt",
                              "Im Takt bleiben, den Ball zurueckspielen."),
    "krankenzimmer": Landschaft("Leise, verletzlich, schwer. Schmerz ist im Raum.", "Selten, vorsichtig",
                                "Da sein, nicht reparieren."),
    "labyrinth": Landschaft("Verwickelt, verwirrt, verschlungen. Es gibt viele Gaenge.", "Mittel, ordnend",
                            "Einen Faden nach dem anderen."),
    "garten": Landschaft("Gelassen, wachsend, alltaeglich. Gepflegt wird, was waechst.", "Mittel, interessiert",
                         "Hegen, nicht draengen."),
}
CLUSTER = tuple(LANDSCHAFTEN)
WERKZEUGE = ("Impuls", "Frage", "Spiegel", "Geschichte", "Rat", "Trost", "Humor")
UMFANG_SPANNE = {"knapp": (60, 175), "mittel": (175, 350), "ausfuehrlich": (350, 700)}
"""Span of the reply in characters per `umfang` (seed 004 §3.3: the table translates the room's
`umfang` into characters, halved on 20.08.2026). 60–175 is the seed's figure (the regie of the
measurement of 05.09.2026); the other rows continue its doubling — set, not measured. The length
of a light utterance caps the span per turn (`haltungsraum.spanne_fuer_turn`)."""

EI_MIKRO = {
    "energie": "Spiegle die Energie von Person B: gleiche Intensitaet, gleicher Rhythmus. "
               "Nicht kommentieren, mitgehen.",
    "ventil": "Person B will ein Ventil, keine Analyse. Lass ihn raus.",
    "anti_therapeut": "Keine Therapeuten-Einstiege wie „Ich verstehe …“, „Das ist verstaendlich …“, „Das klingt "
                      "nach …“: direkt auf den Inhalt reagieren.",
    "rueckbezug": "Zeige mit einem Halbsatz, dass {{char}} den bisherigen Weg von Person B "
                  "wahrgenommen hat.",
}
"""The building blocks of the EI micro direction (seed 004 §3.2 b) that do not depend on a vector;
`{{char}}` is filled with the character's name. Length is the attitude's `umfang`, the relationship
dynamics stand once, as the situation in [PERSON B — WIE ER GERADE DA IST] (seed 004 §3.4)."""
EI_MIKRO_VEKTOR = {
    "absturz": "Person B ist gerade abgestuerzt: erst da sein, dann erst Inhalt.",
    "einbruch": "Die Stimmung von Person B ist eingebrochen: behutsam.",
    "spirale": "Person B rutscht tiefer. Nicht analysieren, nicht belehren: auf seiner Seite sein.",
    "erholung": "Person B erholt sich: das darf man spueren lassen.",
    "stabilisierung": "Person B findet wieder Boden: ruhig mitgehen, nichts aufwuehlen.",
}
"""The vector's stance (seed 004 §3.2 b, "Vektor-Haltung"); `plateau` gives none."""


def pick(value, allowed, default):
    """The value when it belongs to the vocabulary, else the default (callers log the fallback)."""
    return value if value in allowed else default
