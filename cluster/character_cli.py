"""`novaberg character add|list|show|remove|import|export`: characters over the running
system's HTTP API (the operator key writes; any key reads)."""
from __future__ import annotations

import json
from pathlib import Path

from cluster.cli_common import request
from core.settings import Settings

FIELDS = ("name", "identitaet", "sprechweise", "szenario", "begruessung", "beispieldialog", "charakter_anweisung")


def add_parser(sub) -> None:
    ch = sub.add_parser("character", help="create, list, show, remove, import and export characters")
    cs = ch.add_subparsers(dest="charcmd", required=True)
    add = cs.add_parser("add", help="create a character from its fields")
    add.add_argument("character_id")
    add.add_argument("--name", required=True)
    for f in FIELDS[1:]:
        add.add_argument(f"--{f}", default=None)
    cs.add_parser("list", help="every character")
    show = cs.add_parser("show", help="one character, all fields")
    show.add_argument("character_id")
    rm = cs.add_parser("remove", help="remove a character (the pairs' own memories stay)")
    rm.add_argument("character_id")
    imp = cs.add_parser("import", help="import a Character Card (V1/V2/V3, JSON or PNG)")
    imp.add_argument("file")
    imp.add_argument("--id", dest="character_id", help="the character's id (default: from the card's name)")
    imp.add_argument("--replace", action="store_true", help="overwrite a character with that id")
    exp = cs.add_parser("export", help="write a character as a Character Card V2 (JSON)")
    exp.add_argument("character_id")
    exp.add_argument("-o", "--output", help="file to write (default: stdout)")
    for p in (add, show, rm, imp, exp, cs.choices["list"]):
        p.add_argument("--key", help="API key (default: the local operator key)")


def run(settings: Settings, args) -> int:
    c = args.charcmd
    if c == "add":
        body = {"character_id": args.character_id, **{f: getattr(args, f) for f in FIELDS if getattr(args, f)}}
        r = request(settings, args, "POST", "/v1/characters", json=body)
    elif c == "list":
        r = request(settings, args, "GET", "/v1/characters")
        if r is not None:
            for ch in r.json()["characters"]:
                print(f"{ch['character_id']}\t{ch['name']}\t{ch['identitaet'][:60]}")
            return 0
    elif c == "show":
        r = request(settings, args, "GET", f"/v1/characters/{args.character_id}")
    elif c == "remove":
        r = request(settings, args, "DELETE", f"/v1/characters/{args.character_id}")
        if r is not None:
            print(f"removed {args.character_id}")
            return 0
    elif c == "import":
        data = Path(args.file).read_bytes()
        ctype = "image/png" if data.startswith(b"\x89PNG") else "application/json"
        params = {k: v for k, v in (("character_id", args.character_id), ("replace", "true" if args.replace else None)) if v}
        r = request(settings, args, "POST", "/v1/characters/import", content=data, params=params,
                     headers={"Content-Type": ctype})
    else:
        r = request(settings, args, "GET", f"/v1/characters/{args.character_id}/export")
        if r is not None and args.output:
            Path(args.output).write_text(json.dumps(r.json(), ensure_ascii=False, indent=2), encoding="utf-8")
            print(f"written: {args.output}")
            return 0
    if r is None:
        return 1
    print(json.dumps(r.json(), ensure_ascii=False, indent=2))
    return 0
