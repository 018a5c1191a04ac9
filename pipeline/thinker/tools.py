"""§4 the Thinker's tools, made as closures over the store, the pair, the web layer and the
per-turn cache and search budget — no globals, nothing that outlives the turn.

Every tool takes the one argument the protocol carries and returns text for the model. Tool
output is data: the node puts it into a user message under a data marker, never into a system
message. Log lines show the model's arguments and what a tool failed with only as
`Settings.said` allows (`log_utterances`).
"""
from __future__ import annotations

import logging
import re
from datetime import date, datetime
from typing import Awaitable, Callable
from urllib.parse import unquote_plus, urlsplit

from pipeline import dienste
from pipeline.services import Deps
from core.bestand import Termin
from core.state import BibliothekTreffer, DateiTreffer, Erinnerung, Stimulus
from pipeline.thinker.budget import LEITTEXT, SearchBudget
from pipeline.thinker.cache import HINWEIS_TREFFER, ToolCache

log = logging.getLogger("novaberg.thinker.tools")

TIMELINE_LIMIT = 5
"""What `timeline_search` hands the model (seed 000 §4.2: "Limit (5) fest konfiguriert");
`timeline_check` has no cap of its own (§4.1): a day's appointments come as the store reads them."""
FETCH_CHARS = 3000
"""Page text handed to the model per fetch (the prompt stays small on small engines)."""
WISSEN_CHARS = 500
"""Text of one library entry handed to the model (five of them stay below one fetched page)."""

Tool = Callable[[str], Awaitable[str]]


def parse_datum(text: str) -> date | None:
    t = text.strip().strip("\"'")
    for fmt in ("%Y-%m-%d", "%d.%m.%Y", "%d.%m.%y"):
        try:
            return datetime.strptime(t, fmt).date()
        except ValueError:
            pass
    m = re.search(r"\b(\d{4})-(\d{2})-(\d{2})\b", t)
    if m:
        try:
            return date(int(m[1]), int(m[2]), int(m[3]))
        except ValueError:
            return None
    return None


def format_termin(e: Termin) -> str:
    beginn = datetime.fromisoformat(e.beginn_lokal)
    personen = f" (mit {', '.join(e.personen)})" if e.personen else ""
    return f"[{e.typ}] {beginn.strftime('%d.%m.%Y %H:%M')}: {e.titel}{personen}"


def format_faktencheck_treffer(rows: list[Erinnerung]) -> str:
    """The read path's order as retrieved (no reordering by weight), the observer as source, no weight;
    a superseded memory as past (`früher: …, seit …: …`): a change, not a conflict."""
    return "\n".join(f"[LZG/{r.dimension}, Quelle: {r.beobachter}]: {r.als_text()}" for r in rows)


def format_wissen(hits: list[BibliothekTreffer]) -> str:
    """The library's entries nearest first, each with its cosine, its text cut at `WISSEN_CHARS`."""
    return "\n".join(f"[Bibliothek, Kosinus {h.similarity:.2f}] {h.titel}: {h.inhalt[:WISSEN_CHARS]}"
                     for h in hits)


def format_dateien(hits: list[DateiTreffer]) -> str:
    """The files nearest first, labelled as files (seed 001 §3.1a: what a file says is not Nova's
    memory, and the label says so), with topic, summary and excerpt."""
    lines = ["Aus den Dateien, die Person B gegeben hat (nicht Novas Erinnerung):"]
    for h in hits:
        kosinus = "-" if h.cosinus is None else f"{h.cosinus:.2f}"
        zusammenfassung = f" — {h.zusammenfassung}" if h.zusammenfassung else ""
        lines.append(f"[Datei {h.datei or h.pfad}, Kosinus {kosinus}] {h.titel}{zusammenfassung}\n"
                     f"   {h.auszug}")
    return "\n".join(lines)


def format_treffer(hits: list[dict], kopf: str) -> str:
    lines = [kopf]
    for i, h in enumerate(hits, 1):
        lines.append(f"{i}. {h.get('titel', '')} — {h.get('url', '')}\n   {h.get('snippet', '')}")
    return "\n".join(lines)


_URL = re.compile(r"https?://[^\s<>\"')\]]+", re.IGNORECASE)
_WORD = re.compile(r"\w{3,}")


def _url_key(url: str) -> str:
    """A URL as compared with the allowed ones: without its fragment and a trailing slash."""
    return url.split("#", 1)[0].rstrip("/")


def traegt_erinnerung(url: str, erinnerungen: list[str]) -> bool:
    """Whether a URL's path or query carries a memory's text: three of its words in a row."""
    parts = urlsplit(url)
    carried = " ".join(_WORD.findall(unquote_plus(f"{parts.path} {parts.query}").lower()))
    for text in erinnerungen:
        words = _WORD.findall(text.lower())
        if any(" ".join(words[i:i + 3]) in carried for i in range(len(words) - 2)):
            return True
    return False


class FetchRules:
    """What the Thinker may fetch in one turn, so that neither a card's text nor a fetched page
    can have it carry the pair's memory out: a URL of this turn's search results (the sachlage's
    research included), of the human's
    own message, or of a configured host — none whose path or query carries a memory it was
    shown — and at most `web_fetch_per_turn` of them."""

    def __init__(self, human_text: str, allowed_hosts: list[str], per_turn: int):
        self.urls = {_url_key(u) for u in _URL.findall(human_text or "")}
        self.hosts = [h.lower().lstrip(".") for h in allowed_hosts]
        self.left = per_turn
        self.erinnerungen: list[str] = []

    def refusal(self, url: str) -> tuple[str, str] | None:
        """(fallback name, reason) when the URL may not be fetched; None when it may."""
        host = (urlsplit(url).hostname or "").lower()
        listed = _url_key(url) in self.urls or any(host == h or host.endswith("." + h) for h in self.hosts)
        if not listed:
            return "web_fetch.fremde_url", "nur URLs aus den Suchtreffern dieses Turns oder aus der Nachricht"
        if traegt_erinnerung(url, self.erinnerungen):
            return "web_fetch.erinnerung_in_url", "die URL traegt Text aus dem Gedaechtnis"
        if self.left <= 0:
            return "web_fetch.budget", "das Abrufbudget dieses Turns ist verbraucht"
        return None


def dienst_werkzeuge(deps: Deps, stimulus: Stimulus, such_vektor: list[float] | None,
                     regeln: FetchRules) -> dict[str, Tool]:
    """`wissen` and `dateien`: the services of seed 001 (pipeline/dienste.py) as tools. Without a
    question they search with the turn's key, with one with the question's vector. What they
    return is the pair's own text: a URL that carries it is not fetched (`regeln.erinnerungen`)."""

    async def _schluessel(tool: str, arg: str):
        """The vector a service searches with: the question's, else the turn's key (None: neither)."""
        if arg.strip():
            return await deps.embedder.embed(deps.trace, arg)
        if such_vektor is None:
            log.info("thinker: %s fallback kein_suchschluessel: this turn searched no memory and the call "
                     "names no question", tool)
        return such_vektor

    def werkzeug(name: str, suche, leer: str, texte: Callable[[BibliothekTreffer | DateiTreffer], list[str | None]],
                 formatieren) -> Tool:
        async def rufen(arg: str) -> str:
            vector = await _schluessel(name, arg)
            if vector is None:
                return f"Dieser Turn hat keinen Suchschluessel: frage mit {name}(frage)."
            hits = await suche(deps, stimulus, vector, "thinker")
            if not hits:
                return leer
            regeln.erinnerungen += [t for h in hits for t in texte(h) if t]
            return formatieren(hits)

        return rufen

    return {"wissen": werkzeug("wissen", dienste.wissen, "Keine Eintraege in der Bibliothek zu diesem Gegenstand.",
                               lambda h: [h.titel, h.inhalt], format_wissen),
            "dateien": werkzeug("dateien", dienste.dateien, "Keine Dateien.",
                                lambda h: [h.titel, h.zusammenfassung, h.auszug], format_dateien)}


def timeline_werkzeuge(deps: Deps, stimulus: Stimulus) -> dict[str, Tool]:
    """`timeline_check` (the pair's dates of one day, every one of them) and `timeline_search`
    (by keyword, the nearest `TIMELINE_LIMIT`)."""
    store, tz = deps.store, deps.settings.timezone
    user_id, character_id = stimulus.user_id, stimulus.character_id

    async def timeline_check(arg: str) -> str:
        day = parse_datum(arg)
        if day is None:
            return f"Kein Datum erkannt in '{arg}'. Erwartet: JJJJ-MM-TT."
        rows = await store.timeline.find_by_date_range(user_id, character_id, day, day, tz)
        if not rows:
            return f"Keine Termine am {day.isoformat()}."
        return f"Termine am {day.isoformat()}:\n" + "\n".join(format_termin(r) for r in rows)

    async def timeline_search(arg: str) -> str:
        if not arg.strip():
            return "Leeres Stichwort."
        rows = await store.timeline.find_by_keyword(user_id, character_id, arg, tz, limit=TIMELINE_LIMIT)
        if not rows:
            return f"Keine Termine zu '{arg}'."
        return "\n".join(format_termin(r) for r in rows)

    return {"timeline_check": timeline_check, "timeline_search": timeline_search}


def gedaechtnis_werkzeug(deps: Deps, stimulus: Stimulus, cache: ToolCache, regeln: FetchRules) -> Tool:
    """`memory_search`: the pair's long-term memory on the read path; what it returns is the
    pair's own text, so a URL that carries it is not fetched (`regeln.erinnerungen`)."""
    store = deps.store
    user_id, character_id = stimulus.user_id, stimulus.character_id

    async def memory_search(arg: str) -> str:
        vector = await deps.embedder.embed(deps.trace, arg)
        cfg = deps.services.memory_cfg  # the memory read path: top thinker_top_k (20), no floor, no spreading (§4.3)
        rows = (await store.lesepfad.erinnern(user_id, character_id, arg, vector, cfg,
                                              k=cfg.thinker_top_k, ausbreiten=False, boden=False)).erinnerungen
        if not rows:
            return "Keine Eintraege im Langzeitgedaechtnis."
        regeln.erinnerungen += [r.inhalt for r in rows]
        if cache.seen_result([r.id for r in rows]):  # stage 2: other words, the same hits
            log.info("thinker: memory_search %s returned hits seen before (stage 2)", deps.settings.said(arg))
            return HINWEIS_TREFFER
        return format_faktencheck_treffer(rows)

    return memory_search


async def _seite(web, url: str) -> dict:
    if web is None:
        return {"url": url, "ok": False, "fehler": "keine Webanbindung"}
    return await web.fetch(url)


async def _mit_erster_seite(web, text: str, hits: list[dict]) -> str:
    """The search's text with the top hit's page: its auto-fetch is code, not a decision of the
    model (seed 000 §4.4)."""
    top = hits[0].get("url")
    if top:
        page = await _seite(web, top)
        if page.get("ok"):
            text += f"\n\n--- Vollstaendiger Inhalt von {page['url']} ---\n{page['text'][:FETCH_CHARS]}"
        else:
            text += f"\n\n(Die erste Seite liess sich nicht laden: {page.get('fehler')})"
    return text


def web_werkzeuge(deps: Deps, budget: SearchBudget, regeln: FetchRules) -> dict[str, Tool]:
    """`web_search` (one search per turn, the sachlage's research first) and `web_fetch` (a page
    the `regeln` allow)."""
    web = deps.services.web

    async def web_search(arg: str) -> str:
        if not budget.available():
            return LEITTEXT
        hits = budget.take(arg)
        if hits is not None:
            kopf = f"In diesem Turn bereits nachgeschlagen zu {budget.sachlage_objekt}:"
        else:
            if web is None or not web.configured:
                log.warning("thinker: web_search fallback keine_suchmaschine: no provider configured")
                return "Keine Suchmaschine konfiguriert; die Suche dieses Turns ist verbraucht."
            try:
                found = await web.search(arg)
            except Exception as e:  # a failed search counts against the budget all the same
                log.warning("thinker: web_search fallback suche_gescheitert: %s: %s", type(e).__name__,
                            deps.settings.said(e))
                return f"Die Suche ist gescheitert ({type(e).__name__}); die Suche dieses Turns ist verbraucht."
            hits = found.get("treffer") or []
            if not hits:
                return f"Keine Treffer fuer '{arg}'; die Suche dieses Turns ist verbraucht."
            kopf = f"Treffer fuer '{arg}' ({found.get('anbieter')}):"
        regeln.urls |= {_url_key(h["url"]) for h in hits if h.get("url")}
        return await _mit_erster_seite(web, format_treffer(hits[:5], kopf), hits)

    async def web_fetch(arg: str) -> str:
        url = arg.strip().strip("\"'<>")
        refused = regeln.refusal(url)
        if refused is not None:
            log.warning("thinker: web_fetch of a URL on %s refused (fallback %s)",
                        deps.settings.said(urlsplit(url).hostname or ""), refused[0])
            return f"Seite {url} nicht geladen: {refused[1]}."
        regeln.left -= 1
        page = await _seite(web, url)
        if not page.get("ok"):
            return f"Seite {url} nicht geladen: {page.get('fehler')}"
        return f"Seiteninhalt von {page['url']}:\n{page['text'][:FETCH_CHARS]}"

    return {"web_search": web_search, "web_fetch": web_fetch}


def create_tools(deps: Deps, stimulus: Stimulus, cache: ToolCache, budget: SearchBudget,
                 such_vektor: list[float] | None = None) -> dict[str, Tool]:
    """The tools of one check; `such_vektor` is the turn's search key (`dienste.suchschluessel`),
    which `wissen` and `dateien` read when called without a question."""
    regeln = FetchRules(stimulus.text or "", deps.settings.web_fetch_allowed_hosts, deps.settings.web_fetch_per_turn)
    regeln.urls |= {_url_key(h["url"]) for h in budget.sachlage_treffer if h.get("url")}  # the turn's research
    return {**timeline_werkzeuge(deps, stimulus), "memory_search": gedaechtnis_werkzeug(deps, stimulus, cache, regeln),
            **dienst_werkzeuge(deps, stimulus, such_vektor, regeln), **web_werkzeuge(deps, budget, regeln)}
