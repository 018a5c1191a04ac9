"""`novaberg files add|list|remove`: a pair's files over the running system's HTTP API (the
user's own key with --key; default: the local operator key, which reaches every user)."""
from __future__ import annotations

import sys
from pathlib import Path

from cluster.cli_common import request
from core.settings import Settings

CONTENT_TYPES = {".txt": "text/plain", ".text": "text/plain", ".md": "text/markdown", ".markdown": "text/markdown",
                 ".pdf": "application/pdf"}


def add_parser(sub) -> None:
    f = sub.add_parser("files", help="upload, list and remove a pair's files (text, Markdown, PDF)")
    fs = f.add_subparsers(dest="filescmd", required=True)
    add = fs.add_parser("add", help="upload a file: indexed once, found by questions about it")
    add.add_argument("path")
    add.add_argument("--name", help="the file's name in the index (default: the file's own)")
    fs.add_parser("list", help="the pair's files")
    rm = fs.add_parser("remove", help="remove a file and its chunks")
    rm.add_argument("datei_id", type=int)
    for p in (add, rm, fs.choices["list"]):
        p.add_argument("--user", required=True)
        p.add_argument("--character", default="nova")
        p.add_argument("--key", help="API key (default: the local operator key)")


def run(settings: Settings, args) -> int:
    base = f"/v1/pairs/{args.user}/{args.character}/files"
    if args.filescmd == "add":
        path = Path(args.path)
        if not path.is_file():
            print(f"no such file: {path}", file=sys.stderr)
            return 1
        ctype = CONTENT_TYPES.get(path.suffix.lower(), "application/octet-stream")  # the server decides or says 415
        r = request(settings, args, "POST", base, content=path.read_bytes(), params={"name": args.name or path.name},
                     headers={"Content-Type": ctype})
        if r is None:
            return 1
        d = r.json()["datei"]
        wie = "indexed" if r.json()["neu"] else "already indexed (same content)"
        print(f"{d['id']}\t{d['name']}\t{wie}: {d['abschnitte']} chunks, topic {d['thema']!r}, "
              f"keywords {', '.join(d['stichworte'])}")
        return 0
    if args.filescmd == "list":
        r = request(settings, args, "GET", base)
        if r is None:
            return 1
        for d in r.json()["dateien"]:
            print(f"{d['id']}\t{d['name']}\t{d['art']}\t{d['abschnitte']} chunks\t{d['thema']}")
        return 0
    r = request(settings, args, "DELETE", f"{base}/{args.datei_id}")
    if r is None:
        return 1
    print(f"removed file {args.datei_id}")
    return 0
