"""`novaberg memory import|search`: load a conversation into a pair's memory and ask the read
path, directly against the stores (no LLM, no Ray)."""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from core.settings import Settings


class _Ctx:
    def __init__(self, settings: Settings):
        from memory.embedded import resolve_store_urls
        from serve.embedder import load_model, model_dimension

        self.settings = settings
        self.stores = resolve_store_urls(settings.home, settings.database_url, settings.redis_url)
        self.model = load_model(settings.embed_threads)
        self.dim = model_dimension(self.model)

    def embed(self, texts: list[str]) -> list[list[float]]:
        from serve.embedder import encode

        return encode(self.model, texts)

    async def open(self):
        from redis.asyncio import Redis

        from memory import pg
        from memory.migrate import apply_migrations

        await asyncio.to_thread(apply_migrations, self.stores.database_url, self.dim)
        self.pool = pg.open_pool(self.stores.database_url, 1, 2)
        await self.pool.open(wait=True)
        self.redis = Redis.from_url(self.stores.redis_url)

    async def close(self):
        try:
            await self.pool.close()
            await self.redis.aclose()
        finally:
            await asyncio.to_thread(self.stores.stop_started)  # never leaves services it started behind


def cmd_import(settings: Settings, args) -> int:
    from memory.importer import ImportFormatError, import_conversation, load_conversation, read_file

    try:
        data, turns = load_conversation(read_file(Path(args.file)), args.conversation)
    except (ImportFormatError, FileNotFoundError) as e:
        print(f"import failed: {e}", file=sys.stderr)
        return 2
    conv = data["conversation"]
    user_speaker = args.user_speaker or conv["speaker_a"]
    if user_speaker not in (conv["speaker_a"], conv["speaker_b"]):
        print(f"import failed: --user-speaker must be {conv['speaker_a']!r} or {conv['speaker_b']!r}", file=sys.stderr)
        return 2
    ctx = _Ctx(settings)

    async def go():
        await ctx.open()
        try:
            return await import_conversation(ctx.pool, ctx.redis, args.user, args.character, turns, user_speaker,
                                             ctx.embed)
        finally:
            await ctx.close()

    stats = asyncio.run(go())
    print(f"imported {stats['turns']} turns: {stats['lzg_nodes']} LZG nodes, {stats['synapses']} synapses, "
          f"{stats['kzg_entries']} KZG entries, session filled")
    return 0


def cmd_search(settings: Settings, args) -> int:
    from memory.config import for_model
    from memory.lesepfad import erinnern

    ctx = _Ctx(settings)
    cfg = for_model(settings.embedding_model)  # the same configuration the pair actors read with

    async def go():
        await ctx.open()
        try:
            return await erinnern(ctx.pool, args.user, args.character, args.question,
                                  ctx.embed([args.question])[0], cfg, k=args.k)
        finally:
            await ctx.close()

    for hit in asyncio.run(go()).erinnerungen:
        print(hit.quelle if hit.quelle else f"lzg:{hit.id}")
    return 0


def add_parser(sub) -> None:
    mem = sub.add_parser("memory", help="import a conversation into a pair's memory; search it")
    ms = mem.add_subparsers(dest="memcmd", required=True)
    imp = ms.add_parser("import", help="load a conversation (LoCoMo format) without LLM calls")
    imp.add_argument("--user", required=True)
    imp.add_argument("--character", required=True)
    imp.add_argument("--conversation", type=int, default=0, help="index when the file holds a list")
    imp.add_argument("--user-speaker", help="the speaker who is the user (default: speaker_a)")
    imp.add_argument("file")
    se = ms.add_parser("search", help="source ids of what the memory read path returns, best first")
    se.add_argument("--user", required=True)
    se.add_argument("--character", required=True)
    se.add_argument("-k", type=int, help="how many memories (default: the read path's bound, lesepfad_k)")
    se.add_argument("question")


def run(settings: Settings, args) -> int:
    return cmd_import(settings, args) if args.memcmd == "import" else cmd_search(settings, args)
