"""Every German word in the code's names has an entry in the glossary of docs/CHAINS.md.

The project names its domain in the seeds' German and its infrastructure in English. So that a
reader without German can follow the code, the glossary translates every German word that a name
in the code uses.

What is checked: the names in the Python files of the project's packages (`PACKAGES`): module and
package names, classes, functions, arguments, variables, attributes, keyword arguments and imported
names. Each name is split into words at `_`, digits and CamelCase humps (`DispatchRecord` →
dispatch, record; `_nach_dem_turn` → nach, dem, turn), lower-cased.

Which words are English: those in `data/english_words.txt`, a checked-in list of the English words
and technical tokens (library names, abbreviations, single letters) the code uses. A name that
adds an English word adds it there; a German word never goes there.

When a German word is covered: the glossary is the section `## Glossary` of docs/CHAINS.md; the
German terms are the words in the first column of its tables, lower-cased, with ä, ö, ü, ß written
ae, oe, ue, ss as in code. A word is covered when it is a term, or when it is composed of terms
(a compound), each optionally followed by one inflection ending of `ENDINGS` (which also covers the
linking s of compounds): `gravitationspunkte` = gravitation·s + punkt·e. A term shorter than three
letters (`ab`, `zu`, `gv`) covers only itself, never a part of a compound.
"""
from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("actors", "serve", "pipeline", "memory", "core", "cluster", "prompts")
ENGLISH = Path(__file__).resolve().parent / "data" / "english_words.txt"
GLOSSARY = ROOT / "docs" / "CHAINS.md"
ENDINGS = ("", "e", "em", "en", "er", "es", "n", "s", "t", "te", "d")
"""The inflection endings a glossary term may carry in code (and the linking s of compounds)."""
SHORTEST_PART = 3
"""Terms shorter than this cover only the whole word, never a part of a compound."""
SAME_IN_BOTH = {"person", "a", "b"}
"""Words spelled alike in both languages that the glossary lists for the phrase they form
("Person A, Person B"); no other word may be both English and a German term."""

_HUMPS = re.compile(r"[A-Z]+(?=[A-Z][a-z]|$)|[A-Z]?[a-z]+|[A-Z]+")


def words_of(name: str) -> list[str]:
    """The words of one identifier, lower-cased: split at `_`, digits and CamelCase humps."""
    return [w.lower() for part in re.split(r"_+|\d+", name) for w in _HUMPS.findall(part)]


def _names(tree: ast.AST):
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield n.name
        elif isinstance(n, ast.Name):
            yield n.id
        elif isinstance(n, ast.Attribute):
            yield n.attr
        elif isinstance(n, ast.arg):
            yield n.arg
        elif isinstance(n, ast.keyword) and n.arg:
            yield n.arg
        elif isinstance(n, ast.alias):
            yield from n.name.split(".")
            if n.asname:
                yield n.asname
        elif isinstance(n, ast.ImportFrom) and n.module:
            yield from n.module.split(".")


@lru_cache(maxsize=1)
def code_words() -> dict[str, str]:
    """Each word of the code's names, with the first place it stands (file: identifier)."""
    found: dict[str, str] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT)
            names = [*rel.parts[:-1], path.stem, *_names(ast.parse(path.read_text(encoding="utf-8")))]
            for name in names:
                for word in words_of(name):
                    found.setdefault(word, f"{rel}: {name}")
    return found


def english_words() -> set[str]:
    lines = ENGLISH.read_text(encoding="utf-8").splitlines()
    return {w.strip() for w in lines if w.strip() and not w.startswith("#")}


def as_in_code(text: str) -> str:
    """German spelling as names in code write it: lower case, umlauts and ß spelled out."""
    text = text.lower()
    for umlaut, spelled in (("ä", "ae"), ("ö", "oe"), ("ü", "ue"), ("ß", "ss")):
        text = text.replace(umlaut, spelled)
    return text


def glossary_terms(markdown: str | None = None) -> set[str]:
    """The German terms of the glossary: the words in the first column of its tables' rows."""
    markdown = GLOSSARY.read_text(encoding="utf-8") if markdown is None else markdown
    section = markdown.split("\n## Glossary\n", 1)[1].split("\n## ", 1)[0]
    terms: set[str] = set()
    for line in section.splitlines():
        cells = line.split("|")
        if len(cells) < 3 or set(cells[1].strip()) <= set("-: "):
            continue
        first = cells[1].strip()
        if first.lower() == "german":
            continue
        terms.update(re.findall(r"[a-z]+", as_in_code(first)))
    return terms


def covered(word: str, terms: set[str]) -> bool:
    """Whether the glossary covers `word`: it is a term, or a compound of terms with endings."""
    if word in terms:
        return True
    parts = {t for t in terms if len(t) >= SHORTEST_PART}
    ends = [False] * (len(word) + 1)
    ends[0] = True
    for start in range(len(word)):
        if not ends[start]:
            continue
        for term in parts:
            if word.startswith(term, start):
                for ending in ENDINGS:
                    stop = start + len(term) + len(ending)
                    if word.startswith(ending, start + len(term)):
                        ends[stop] = True
    return ends[len(word)]


def test_every_german_word_in_the_code_has_a_glossary_entry():
    english, terms = english_words(), glossary_terms()
    missing = {w: where for w, where in code_words().items() if w not in english and not covered(w, terms)}
    assert not missing, (
        "words in names that are neither in tests/unit/data/english_words.txt (English, technical) "
        "nor covered by the glossary of docs/CHAINS.md (German):\n"
        + "\n".join(f"  {w}  ({where})" for w, where in sorted(missing.items()))
    )


def test_no_word_is_both_english_and_a_glossary_term():
    both = english_words() & glossary_terms() - SAME_IN_BOTH
    assert not both, f"listed as English and as a German glossary term: {sorted(both)}"


def test_names_split_at_underscores_digits_and_humps():
    assert words_of("DispatchRecord") == ["dispatch", "record"]
    assert words_of("_nach_dem_turn") == ["nach", "dem", "turn"]
    assert words_of("IPv6Address") == ["i", "pv", "address"]
    assert words_of("HTTPError") == ["http", "error"]
    assert words_of("WISSEN_KAPPUNG") == ["wissen", "kappung"]


def test_terms_are_read_from_the_glossary_tables_first_column():
    doc = (
        "# Doc\n\n## Glossary\n\n| German | English |\n|---|---|\n"
        "| Prägung, Gedächtnis (KZG) | imprint, memory |\n| Rückfrage | asking back |\n\n## Next\n\n"
        "| Elsewhere | not read |\n"
    )
    assert glossary_terms(doc) == {"praegung", "gedaechtnis", "kzg", "rueckfrage"}


def test_compounds_and_endings_of_terms_are_covered_and_nothing_else():
    terms = {"gravitation", "punkt", "ziel", "zu", "rueckfrage"}
    assert covered("gravitationspunkte", terms)
    assert covered("ziele", terms) and covered("zielen", terms)
    assert covered("zu", terms)
    assert not covered("zuziel", terms), "a term shorter than three letters is no compound part"
    assert not covered("zielsog", terms), "an untranslated part leaves the word uncovered"
    assert not covered("rueckfragerei", terms)
    assert not covered("punktziellich", terms)
