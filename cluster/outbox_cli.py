"""`novaberg outbox dead|replay`: the background jobs given up after failures of their own, and
putting them back into the queue, each exactly once — over the running system's HTTP API with the
local operator key (or --key)."""
from __future__ import annotations

from cluster.cli_common import request
from core.settings import Settings


def add_parser(sub) -> None:
    o = sub.add_parser("outbox", help="the dead letters of the background queue: list and replay them")
    os_ = o.add_subparsers(dest="outboxcmd", required=True)
    dead = os_.add_parser("dead", help="the dead letters, oldest first, with the reason each was given up")
    rp = os_.add_parser("replay", help="queue dead letters again (each at most once)")
    rp.add_argument("ids", nargs="*", help="dead letter ids (as `outbox dead` lists them)")
    rp.add_argument("--all", action="store_true", help="every dead letter")
    for p in (dead, rp):
        p.add_argument("--key", help="operator API key (default: the local operator key)")


def run(settings: Settings, args) -> int:
    if args.outboxcmd == "dead" or args.all:
        r = request(settings, args, "GET", "/v1/operator/outbox/dead", params={"limit": 1000})
        if r is None:
            return 1
        letters = r.json()["dead_letters"]
        if args.outboxcmd == "dead":
            for d in letters:
                print(f"{d['id']}\t{d['kind']}\t{d['user_id']}/{d['character_id']}\t{d['turn_id']}\t{d['reason']}")
            print(f"{len(letters)} dead letter(s)")
            return 0
        ids = [d["id"] for d in letters]
    else:
        ids = args.ids
    if not ids:
        print("nothing to replay: name dead letter ids, or --all")
        return 0 if args.all else 2
    failed = 0
    for dead_id in ids:
        r = request(settings, args, "POST", f"/v1/operator/outbox/dead/{dead_id}/replay")
        if r is None:
            failed += 1
            continue
        print(f"{dead_id}\tqueued again as job {r.json()['job']}")
    return 1 if failed else 0
