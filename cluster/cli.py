"""`novaberg`: up, down, status, chat, key create, memory, character, files."""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import httpx

from cluster.cli_common import hang_up, healthy, operator_key, read_text, running_daemon
from cluster.daemon import keys_dir, state_file
from cluster.reply_view import ReplyView
from core.settings import Settings, load_settings


def cmd_up(settings: Settings, args) -> int:
    from pipeline.node_config import check_budgets

    check_budgets(settings)  # a node budget above llm_max_tokens stops `up` here, not only in the daemon's log
    info = running_daemon(settings)
    if info and healthy(info["url"]):
        print(f"novaberg is already running at {info['url']}")
        return 0
    settings.logs_dir.mkdir(parents=True, exist_ok=True)
    log_path = settings.logs_dir / "daemon.log"
    state_file(settings.home).unlink(missing_ok=True)
    with open(log_path, "ab") as log:
        env = {**os.environ, **({"RAY_ADDRESS": args.address} if args.address else {})}
        proc = subprocess.Popen([sys.executable, "-m", "cluster.daemon"], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, env=env)
    print(f"starting novaberg (stores, Ray, Serve, model) — log: {log_path}", flush=True)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            print(f"novaberg failed to start (exit {proc.returncode}); see {log_path}", file=sys.stderr)
            return 1
        info = running_daemon(settings)
        if info and healthy(info["url"]):
            print(f"novaberg is up at {info['url']}")
            if info.get("first_start"):
                print(f"local API key for user 'local': {read_text(keys_dir(settings.home) / 'local.key')}")
                print(f"operator key: stored in {keys_dir(settings.home) / 'operator.key'}")
            return 0
        time.sleep(1)
    print(f"novaberg did not become ready within {args.timeout}s; see {log_path}", file=sys.stderr)
    return 1


def cmd_down(settings: Settings, args) -> int:
    info = running_daemon(settings)
    if not info:
        print("novaberg is not running")
        return 0
    os.kill(info["pid"], signal.SIGTERM)
    for _ in range(120):
        try:
            os.kill(info["pid"], 0)
        except ProcessLookupError:
            print("novaberg stopped")
            return 0
        time.sleep(0.5)
    print("novaberg did not stop within 60s", file=sys.stderr)
    return 1


def cmd_status(settings: Settings, args) -> int:
    info = running_daemon(settings)
    if not info:
        print("novaberg is not running")
        return 1
    key = operator_key(settings, args)
    r = httpx.get(f"{info['url']}/v1/operator/status", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    print(json.dumps({"url": info["url"], "healthy": healthy(info["url"]), **r.json()}, indent=2))
    return 0


def cmd_key_create(settings: Settings, args) -> int:
    info = running_daemon(settings)
    if not info:
        print("novaberg is not running; start it with `novaberg up`", file=sys.stderr)
        return 1
    if args.operator == (args.user is not None):
        print("name --user USER for a user's key, or --operator for an operator key", file=sys.stderr)
        return 2
    key = operator_key(settings, args)
    body = {"user_id": args.user, "operator": args.operator, "expires_in_days": args.expires_days}
    r = httpx.post(f"{info['url']}/v1/operator/keys", json=body, headers={"Authorization": f"Bearer {key}"},
                   timeout=30)
    if r.status_code != 200:
        print(f"error {r.status_code}: {r.text}", file=sys.stderr)
        return 1
    print(r.json()["api_key"])
    return 0


def cmd_key_list(settings: Settings, args) -> int:
    """Every key without its secret: id, whose, label, created, expires, state."""
    from cluster.cli_common import request

    r = request(settings, args, "GET", "/v1/operator/keys")
    if r is None:
        return 1
    for k in r.json()["keys"]:
        state = "active" if k["active"] else "revoked" if k["revoked_at"] else "expired"
        whose = "operator" if k["is_operator"] else f"user {k['user_id']}"
        print(f"{k['id']}\t{whose}\t{state}\tcreated {k['created_at'][:19]}\t"
              f"expires {(k['expires_at'] or 'never')[:19]}\t{k['label']}")
    return 0


def cmd_key_bootstrap(settings: Settings, args) -> int:
    """The first operator key of a deployment without `novaberg up` (Serve config): written
    straight into the database at DATABASE_URL, printed once."""
    import asyncio

    from memory import pg

    if not settings.database_url:
        print("key bootstrap needs DATABASE_URL (the deployment's database)", file=sys.stderr)
        return 1

    async def go() -> str:
        pool = pg.open_pool(settings.database_url, 1, 1)
        await pool.open(wait=True)
        try:
            return await pg.create_api_key(pool, None, operator=True, label=args.label)
        finally:
            await pool.close()

    print(asyncio.run(go()))
    return 0


def cmd_key_revoke(settings: Settings, args) -> int:
    info = running_daemon(settings)
    if not info:
        print("novaberg is not running; start it with `novaberg up`", file=sys.stderr)
        return 1
    if sum(x is not None for x in (args.api_key, args.user, args.id)) != 1:
        print("name exactly one: --api-key KEY, --id ID (novaberg key list) or --user USER", file=sys.stderr)
        return 2
    body = {"api_key": args.api_key} if args.api_key else {"key_id": args.id} if args.id else {"user_id": args.user}
    r = httpx.post(f"{info['url']}/v1/operator/keys/revoke", json=body,
                   headers={"Authorization": f"Bearer {operator_key(settings, args)}"}, timeout=30)
    if r.status_code != 200:
        print(f"error {r.status_code}: {r.text}", file=sys.stderr)
        return 1
    print(f"revoked {r.json()['revoked']} key(s)")
    return 0


_SCREEN = threading.Lock()
"""Held while a reply is drawn: a pushed message waits, so the draft's rows can be erased."""


class _Pushed:
    """The chat's events stream, read in a thread, and hung up at the chat's end: the connection
    closes at once, so the server frees the user's place among the open event streams
    (`max_event_streams_per_user`) even while this process goes on."""

    def __init__(self, base: str, headers: dict, character: str):
        self.stop = threading.Event()
        self._client = httpx.Client(timeout=httpx.Timeout(10, read=None))
        self._response: httpx.Response | None = None
        self._thread = threading.Thread(target=_print_pushed, daemon=True, name="events",
                                        args=(base, headers, character, self))
        self._thread.start()

    def stream(self, url: str, headers: dict):
        return self._client.stream("GET", url, headers=headers)

    def reading(self, response: httpx.Response) -> None:
        """Called by the reading thread once its stream is open."""
        self._response = response
        if self.stop.is_set():  # the chat ended while the stream opened: close it, the loop then ends
            hang_up(response)

    def hang_up(self) -> None:
        self.stop.set()
        hang_up(self._response)
        self._client.close()
        self._thread.join(timeout=5)


def _print_pushed(base: str, headers: dict, character: str, pushed: _Pushed) -> None:
    """Messages Nova sends without being asked (the events route), printed as they arrive; on a
    broken connection it resumes from the last id it saw, until the chat ends (`pushed.stop`)."""
    cursor, stop = None, pushed.stop
    while not stop.is_set():
        try:
            h = {**headers, **({"Last-Event-ID": cursor} if cursor else {})}
            with pushed.stream(f"{base}/events", h) as r:
                if r.status_code != 200:
                    return
                pushed.reading(r)
                event = None
                for line in r.iter_lines():
                    if line.startswith("event:"):
                        event = line[6:].strip()
                    elif line.startswith("id:"):
                        cursor = line[3:].strip()
                    elif line.startswith("data:") and event == "nachricht":
                        m = json.loads(line[5:])
                        art = "eigener Gedanke" if m["herkunft"] == "eigener_impuls" else "noch etwas"
                        with _SCREEN:  # never in the middle of a reply being drawn
                            print(f"\n{character} ({art})> {m['reply']}", flush=True)
        except (httpx.HTTPError, RuntimeError, OSError):  # a broken stream, or the chat hung up
            stop.wait(2)


def cmd_chat(settings: Settings, args) -> int:
    info = running_daemon(settings)
    if not info:
        print("novaberg is not running; start it with `novaberg up`", file=sys.stderr)
        return 1
    key = operator_key(settings, args)
    pair = f"{info['url']}/v1/pairs/{args.user}/{args.character}"
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(timeout=300) as client:
        g = client.get(f"{pair}/greeting", headers=headers)
        if g.status_code != 200:
            print(f"error {g.status_code}: {g.text}", file=sys.stderr)
            return 1
        print(f"Talking to {g.json()['name']} ({args.character}) as {args.user}. Empty line or Ctrl-D ends.")
        if g.json()["neu_im_verlauf"]:  # a new pair: the character opens with her greeting
            print(f"{args.character}> {g.json()['begruessung']}")
        # what she says without being asked arrives on the events stream, beside the conversation
        pushed = _Pushed(pair, headers, args.character)
        failed: tuple[str, str] | None = None  # a turn that failed with the message kept: (text, turn_id)
        try:
            while True:
                try:
                    text = input("du> ").strip() if not args.message else args.message.pop(0)
                except EOFError:
                    print()
                    return 0
                if not text:
                    return 0
                if text.split(" ", 1)[0] in TURN_OPS:
                    _turn_op(client, pair, headers, args.character, text)
                    continue
                if text == RETRY:
                    if failed is None:
                        print("(nothing to ask again)")
                        continue
                    text, turn_id = failed
                else:
                    turn_id = uuid.uuid4().hex
                kept = _stream_turn(client, f"{pair}/turns", headers, args.character, text, turn_id, args.draft)
                failed = (text, turn_id) if kept is False else None
                if args.once:
                    return 0 if kept is None else 1
        finally:
            pushed.hang_up()


RETRY = "/nochmal"
"""Typed in the chat after a failed turn whose message was kept: asks for the reply again."""


TURN_OPS = {"/neu": "regenerate", "/aendern": "edit", "/zurueck": "rewind"}
"""Typed in the chat: `/neu` a new reply to the last message, `/aendern <text>` the last message
changed and answered anew, `/zurueck [n]` the last n messages (default 1) and all after them gone."""


def _turn_op(client: httpx.Client, pair: str, headers: dict, character: str, text: str) -> None:
    word, _, rest = text.partition(" ")
    art, body = TURN_OPS[word], {"op_id": uuid.uuid4().hex}
    if art == "edit":
        if not rest.strip():
            print("(/aendern needs the changed message: /aendern <text>)")
            return
        body["text"] = rest.strip()
    elif art == "rewind":
        if rest.strip() and not rest.strip().isdigit():
            print("(/zurueck takes a number: /zurueck 2)")
            return
        body["n"] = int(rest.strip() or 1)
    r = client.post(f"{pair}/turns/{art}", json=body, headers=headers)
    if r.status_code != 200:
        try:
            print(f"({r.json()['error']['message']})")
        except (ValueError, KeyError, TypeError):
            print(f"(error {r.status_code}: {r.text})")
        return
    out = r.json()
    print(f"({len(out['zurueckgenommen'])} turn(s) taken back)")
    if out.get("turn"):
        print(f"{character}> {out['turn']['reply']}")


def _stream_turn(client: httpx.Client, url: str, headers: dict, character: str, text: str,
                 turn_id: str, draft: bool = False) -> bool | None:
    """One turn: a writing state (or, with `draft`, the draft) shown while it is written (on a
    terminal), then replaced by the reply as stored (cluster/reply_view.py). None: answered; False:
    failed, the message kept (the same turn_id asks again); True: failed otherwise."""
    with _SCREEN:
        return _draw_turn(client, url, headers, character, text, turn_id, draft)


def _draw_turn(client: httpx.Client, url: str, headers: dict, character: str, text: str,
               turn_id: str, draft: bool) -> bool | None:
    view = ReplyView(sys.stdout)
    view.begin(f"{character}> ")
    params = {"stream": "true", "draft": "true" if draft else "false"}
    with client.stream("POST", url, params=params, headers=headers,
                       json={"text": text, "turn_id": turn_id}) as r:
        if r.status_code != 200:
            view.failed(f"error {r.status_code}: {r.read().decode()}")
            return True
        event = None
        for line in r.iter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
                continue
            if not line.startswith("data:"):
                continue
            data = json.loads(line[5:])
            if event == "draft":
                view.draft(data["text"])
            elif event == "schreibt":
                view.writing()
            elif event == "token":
                view.kept(data["text"])
            elif event == "error":
                err = data.get("error") or {}
                if err.get("message_kept"):
                    view.failed(f"no reply: node {err.get('node')} failed; your message is kept — type {RETRY} "
                                "to ask for the reply again")
                    return False
                view.failed(f"turn failed: {err.get('message')}")
                return True
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="novaberg", description="Novaberg on Ray")
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start stores, Ray and the Serve app in the background")
    up.add_argument("--timeout", type=int, default=600)
    up.add_argument("--address", help="deploy onto this Ray cluster (auto, host:port, ray://host:port) instead of "
                                      "starting one; needs DATABASE_URL and REDIS_URL (default: RAY_ADDRESS, else local)")
    sub.add_parser("down", help="stop what `up` started or deployed (the data stays; an attached cluster stays up)")
    st = sub.add_parser("status", help="health, live pairs, outbox backlog")
    st.add_argument("--key")
    ch = sub.add_parser("chat", help="a terminal conversation with a character")
    ch.add_argument("--user", default="local")
    ch.add_argument("--character", default="nova")
    ch.add_argument("--key", help="API key (default: the local operator key)")
    ch.add_argument("--message", action="append", default=[], help="send this instead of reading stdin")
    ch.add_argument("--once", action="store_true", help="exit after one reply")
    ch.add_argument("--draft", action="store_true", help="show the reply's draft while it is written (dimmed, "
                                                          "replaced by the reviewed reply); default: a writing state")
    key = sub.add_parser("key", help="API keys")
    ks = key.add_subparsers(dest="keycmd", required=True)
    kc = ks.add_parser("create", help="create an API key bound to a user (or an operator key)")
    kc.add_argument("--user")
    kc.add_argument("--operator", action="store_true", help="an operator key, which reaches every user")
    kc.add_argument("--expires-days", type=int, help="the key stops working after so many days (default: never)")
    kc.add_argument("--key", help="operator key (default: the local one)")
    kl = ks.add_parser("list", help="every key without its secret: id, whose, expiry, state")
    kl.add_argument("--key", help="operator key (default: the local one)")
    kb = ks.add_parser("bootstrap", help="an operator key written straight into the database at DATABASE_URL "
                                         "(a deployment by Serve config, where no `up` made one)")
    kb.add_argument("--label", default="bootstrap")
    kr = ks.add_parser("revoke", help="revoke one key, or every key of a user")
    kr.add_argument("--api-key", help="the key to revoke")
    kr.add_argument("--id", type=int, help="the id of the key to revoke (novaberg key list), an operator's too")
    kr.add_argument("--user", help="revoke every key of this user")
    kr.add_argument("--key", help="operator key (default: the local one)")
    from cluster import character_cli, files_cli, memory_cli, outbox_cli

    memory_cli.add_parser(sub)
    character_cli.add_parser(sub)
    files_cli.add_parser(sub)
    outbox_cli.add_parser(sub)
    args = p.parse_args(argv)
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    settings = load_settings()
    handlers = {"up": cmd_up, "down": cmd_down, "status": cmd_status, "chat": cmd_chat,
                "key": lambda s, a: {"revoke": cmd_key_revoke, "bootstrap": cmd_key_bootstrap, "list": cmd_key_list}.get(
                    a.keycmd, cmd_key_create)(s, a),
                "memory": memory_cli.run, "character": character_cli.run, "files": files_cli.run,
                "outbox": outbox_cli.run}
    return handlers[args.cmd](settings, args)


if __name__ == "__main__":
    sys.exit(main())
