"""Ask the LLM for a small JSON object, from a node's prompt files, and check the answer.

The model's answer is an external source: it is parsed and validated, and every way it can fail
has a name (`aufruf_gescheitert`, `leer`, `kein_json`, `ungueltig`), is logged with the node, and
is written as the node's decision entry `{node}.antwort`. An answer the token budget cut off is
closed where it ended and used when it then fits (`geschlossen`, logged as the fallback
`abgeschnitten_geschlossen`). The caller gets None and uses its
documented default.
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
from functools import lru_cache
from typing import TypeVar

from pydantic import BaseModel, Field, ValidationError

from core.errors import EngineError, ModelUnavailable
from pipeline.satzende import GEKAPPT
from pipeline.services import Deps

log = logging.getLogger("novaberg.llm_json")
M = TypeVar("M", bound=BaseModel)


STRING_CAP = 80
"""The longest string the engine may write into a field that sets no cap of its own (characters)."""
ITEM_CAP = 40
"""The same for a string inside a list (a tag, a reason)."""
ARRAY_CAP = 3
"""The most items of a list with no cap of its own."""
SCHLUESSEL_CAP = 16
"""The longest key of a free object (a dict field: the planner's `parameter`, whose longest key is `zusammenfassung`), in characters."""
FREI_WERT = {"type": "string", "maxLength": 64}
"""What a value of a free object may be: a bounded text (the planner's parameters: name, inhalt,
titel, wann, text; a list such as personen or themen as words separated by commas, which the
agents split with `liste`)."""
ZEICHEN_JE_TOKEN = 2.0
"""Characters per token of text in the longest answer a schema allows (measured on SmolLM2's
tokenizer: German prose and JSON 2.2–2.7; 2.0 leaves room)."""
ZAHL_TOKEN = 36
"""A JSON number as llama.cpp's schema grammar bounds it (16 digits, a point, 16 decimals, sign,
exponent), one token per digit."""


def liste(value) -> list[str]:
    """A list parameter as the engine may write it: a list, or words separated by commas."""
    if isinstance(value, str):
        return [w.strip() for w in value.split(",") if w.strip()]
    return [str(x) for x in value or []]


def wort(vocabulary, default: str):
    """A field whose answer belongs to a vocabulary: the engine is held to it, while validation
    stays lenient (the node maps what lies outside to its default, by name)."""
    return Field(default=default, json_schema_extra={"enum": list(vocabulary)})


def woerter(vocabulary):
    """A list field of vocabulary words (see `wort`)."""
    return Field(default_factory=list, json_schema_extra={"items": {"type": "string", "enum": list(vocabulary)}})


@lru_cache(maxsize=64)
def engine_schema(model: type[BaseModel]) -> dict:
    """The JSON schema the engine is held to for a node's answer model: every property present
    (a grammar that allows `{}` would let a model skip the work), nothing extra, every string and
    list bounded so the answer fits the node's token budget. The answer is validated against the
    model itself either way."""
    schema = model.model_json_schema()

    def tighten(s):
        if isinstance(s, dict):
            s.pop("default", None)
            s.pop("title", None)
            if s.get("type") == "object" and "properties" in s:
                s["required"] = list(s["properties"])
                s["additionalProperties"] = False
            elif s.get("type") == "object":  # a free object: at most ARRAY_CAP flat entries
                s["additionalProperties"] = json.loads(json.dumps(FREI_WERT))
                s.setdefault("maxProperties", ARRAY_CAP)
            if s.get("type") == "string" and "enum" not in s:
                s.setdefault("maxLength", STRING_CAP)
            if s.get("type") == "array":
                s.setdefault("maxItems", ARRAY_CAP)
                items = s.get("items")
                if isinstance(items, dict) and items.get("type") == "string" and "enum" not in items:
                    items.setdefault("maxLength", ITEM_CAP)
            for v in s.values():
                tighten(v)
        elif isinstance(s, list):
            for v in s:
                tighten(v)

    tighten(schema)
    return schema


def antwort_tokens(schema: dict) -> int:
    """The tokens the longest answer a node's engine schema allows can take: a node's budget must
    reach it, or the engine cuts a valid answer off inside the JSON (tests/unit/test_structured_outputs.py)."""
    defs = schema.get("$defs", {})

    def laenge(s: dict) -> tuple[int, int]:  # (characters of text, tokens of numbers)
        if "$ref" in s:
            return laenge(defs[s["$ref"].rsplit("/", 1)[-1]])
        if "anyOf" in s:
            return max((laenge(x) for x in s["anyOf"]), key=lambda z: z[0] / ZEICHEN_JE_TOKEN + z[1])
        if "enum" in s:
            return max(len(json.dumps(e, ensure_ascii=False)) for e in s["enum"]), 0
        typ = s.get("type")
        if typ == "object" and "properties" not in s:  # free: keys ≤ SCHLUESSEL_CAP, flat values
            c, n = laenge(s.get("additionalProperties") or FREI_WERT)
            k = s.get("maxProperties", ARRAY_CAP)
            return 2 + k * (SCHLUESSEL_CAP + 5 + c), k * n
        if typ == "object":
            teile = [laenge(v) for v in s.get("properties", {}).values()]
            keys = sum(len(k) + 4 for k in s.get("properties", {}))
            return 2 + keys + sum(t[0] for t in teile), sum(t[1] for t in teile)
        if typ == "array":
            c, n = laenge(s.get("items", {}))
            k = s.get("maxItems", ARRAY_CAP)
            return 2 + k * (c + 2), k * n
        if typ == "string":
            return 2 + s.get("maxLength", STRING_CAP), 0
        if typ in ("number", "integer"):
            return 0, ZAHL_TOKEN
        return 5, 0  # true, false, null

    zeichen, zahlen = laenge(schema)
    return int(zeichen / ZEICHEN_JE_TOKEN + 0.999) + zahlen


class NichtEndlich(EngineError, ValueError):
    """A number in a model's answer that is NaN or infinite (Redis and Postgres refuse them)."""


def _nicht_endlich(name: str):
    raise NichtEndlich(name)


def _endlich(text: str) -> float:
    v = float(text)
    if v != v or v in (float("inf"), float("-inf")):
        raise NichtEndlich(text)
    return v


def first_json_object(text: str) -> dict | None:
    """The first balanced {...} in the text that parses as a JSON object."""
    start = text.find("{")
    while start >= 0:
        depth, in_str, esc = 0, False, False
        for i in range(start, len(text)):
            ch = text[i]
            if in_str:
                if esc:
                    esc = False
                elif ch == "\\":
                    esc = True
                elif ch == '"':
                    in_str = False
            elif ch == '"':
                in_str = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    try:
                        # strict=False: a raw control character inside a string (an engine not held
                        # to a grammar writes a newline there) is read, not refused
                        obj = json.loads(text[start:i + 1], parse_constant=_nicht_endlich, parse_float=_endlich,
                                         strict=False)
                        return obj if isinstance(obj, dict) else None
                    except NichtEndlich as e:
                        log.warning("llm answer holds a number that is not finite (%s): not used", e)
                        return None
                    except json.JSONDecodeError:
                        break
        start = text.find("{", start + 1)
    return None


_OFFENER_SCHLUSS = (
    re.compile(r",\s*$"),                                   # a comma before nothing
    re.compile(r'(,\s*)?"(?:[^"\\]|\\.)*"\s*:\s*$'),            # a key without its value
    re.compile(r'(,\s*)?"(?:[^"\\]|\\.)*"\s*$'),                 # a key without its colon (or a value)
    re.compile(r"(,\s*)?[\w.+-]+\s*$"),                       # a number or literal cut off
)


def _offen(text: str) -> tuple[list[str], bool]:
    """The brackets still open at the end of a JSON prefix, and whether it ends inside a string."""
    stack, in_str, esc = [], False, False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
    return stack, in_str


def json_schliessen(text: str) -> dict | None:
    """A JSON object the token budget cut off, closed: an open string ends where it was cut, a
    dangling key or comma is dropped, the open brackets are closed. An engine held to a grammar
    writes a valid prefix, so what comes back is its answer up to the cut (`geschlossen`)."""
    start = text.find("{")
    if start < 0:
        return None
    t = text[start:].rstrip()
    stack, in_str = _offen(t)
    if in_str:  # the string ends where it was cut (an escape cut in half goes with it)
        m = re.search(r"(\\+)(u[0-9a-fA-F]{0,3})?$", t)
        if m and len(m.group(1)) % 2:
            t = t[:m.start()] + m.group(1)[:-1]
        t += '"'
    for _ in range(6):
        stack, _ = _offen(t)
        try:
            obj = json.loads(t + "".join(reversed(stack)), strict=False, parse_constant=_nicht_endlich,
                             parse_float=_endlich)
            return obj if isinstance(obj, dict) and obj else None  # nothing left: not an answer
        except NichtEndlich:
            return None
        except json.JSONDecodeError:
            for muster in _OFFENER_SCHLUSS:
                kuerzer = muster.sub("", t).rstrip()
                if kuerzer != t:
                    t = kuerzer
                    break
            else:
                return None
    return None


class ModelAway(ModelUnavailable, RuntimeError):
    """A background chain's model call found the model away: the job waits for it (the outbox
    leaves it pending, memory/outbox.py `is_model_away`) instead of a default standing in."""


def _wartet(deps: Deps, e: BaseException) -> bool:
    """A background chain's model call failed because the model is away (its replica died or cannot
    be reached, after the client's own repeats): the job waits for it (the outbox keeps a job whose
    failure is an outage pending) instead of a default standing in — nobody waits for the background,
    and what it writes is kept for good. A timeout or a refusal is no outage: the default stands in."""
    from memory.outbox import is_outage

    return (deps.trace.chain.startswith("background") and is_outage(e)
            and not isinstance(e, (TimeoutError, asyncio.TimeoutError)))


async def ask(deps: Deps, node: str, variables: dict, *, parts: tuple[str, ...] = ("identity", "rules", "task"),
              think: bool = False, prompt: str | None = None, timeout_s: float | None = None,
              response_schema: dict | None = None, max_tokens: int | None = None) -> tuple[str | None, str]:
    """Plain text answer: (text or None, outcome). `prompt` names the prompt files when they are
    not the node's own; `timeout_s` is the call's deadline; `response_schema` holds the engine to
    a JSON schema where the backend can; `max_tokens` is the answer's budget (unset: the node's).
    The outcome is `ok`, `gekappt` (the text as far as the token budget let it go: `finish_reason`
    "length"), `leer` or `aufruf_gescheitert`."""
    import asyncio

    model = await deps.llm.model_name()
    rendered = deps.prompts.render_parts(prompt or node, parts, model, variables)
    system, user = "\n\n".join(rendered[:-1]), rendered[-1]
    log.debug("%s: prompt:\n%s\n\n%s", node, system, user)  # seed 004 §3a: every prompt can be read back
    try:
        call = deps.llm.chat(deps.trace, node, [{"role": "system", "content": system},
                                                 {"role": "user", "content": user}], think=think,
                             response_schema=response_schema, **({"max_tokens": max_tokens} if max_tokens else {}))
        res = await (asyncio.wait_for(call, timeout_s) if timeout_s else call)
    except Exception as e:  # the engine is down or refused: the node goes on without it
        if _wartet(deps, e):
            log.warning("%s: fallback hintergrund_wartet: the model is away (%s: %s); the background job waits "
                        "and runs again, no default stands in (turn %s)", node, type(e).__name__, e, deps.trace.turn_id)
            raise ModelAway(f"{node}: the model is away ({type(e).__name__})") from e
        log.warning("%s: fallback aufruf_gescheitert: %s: %s", node, type(e).__name__, e)
        return None, "aufruf_gescheitert"
    text = res.content.strip()
    if not text:
        return None, "leer"
    return text, "gekappt" if res.finish_reason == GEKAPPT else "ok"


async def ask_json(deps: Deps, node: str, schema: type[M], variables: dict, *,
                   parts: tuple[str, ...] = ("identity", "rules", "task")) -> tuple[M | None, str]:
    text, outcome = await ask(deps, node, variables, parts=parts, response_schema=engine_schema(schema))
    result: M | None = None
    if text is not None:
        obj = first_json_object(text)
        if obj is None and (obj := json_schliessen(text)) is not None:
            outcome = "geschlossen"  # validated below; stays `geschlossen` when it fits
            log.warning("%s: fallback abgeschnitten_geschlossen: the answer was cut off after %d characters; "
                        "closed where it ended", node, len(text))
        if obj is None:
            outcome = "kein_json"
        else:
            try:
                result = schema.model_validate(obj)
                outcome = "ok" if outcome != "geschlossen" else outcome
            except ValidationError as e:
                outcome = "ungueltig"
                log.warning("%s: answer did not fit %s: %s", node, schema.__name__, e.errors()[:2])
    inputs = {"zeichen": 0 if text is None else len(text)}
    if result is None:
        log.warning("%s: fallback %s: the model's answer was not usable; defaults apply", node, outcome)
        if text:  # what was unusable, for the decision entry: the start and the end of the answer
            inputs.update(anfang=text[:80], ende=text[-80:])
    deps.trace.decision(node, f"{node}.antwort", outcome, inputs)
    return result, outcome
