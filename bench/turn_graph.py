"""Figures about a turn's shape for the harness: the critical path of its LLM calls (the longest
chain of dependent calls the data schedule allows), how many calls were in flight at once, and
the CPU the system spent per turn."""
from __future__ import annotations

import os
import statistics
from collections import Counter
from typing import Any

CALLER_NODE = {"query_rewrite": "enricher"}
"""LLM callers that are not named after their node."""


def calls_per_turn(records: list[dict], turns: int) -> dict[str, float]:
    """Mean LLM calls per turn by node (background callers included; the chains' nodes are used)."""
    n = Counter(CALLER_NODE.get(r["request"].get("caller"), r["request"].get("caller")) for r in records)
    return {k: v / max(1, turns) for k, v in n.items()}


def critical_path_ms(per_node: dict[str, float], latency_ms: float) -> dict[str, float]:
    """The human chain, then the character chain, each along its longest dependent path; a node's
    cost is its mean LLM calls per turn × the engine's latency (a node in both chains is counted
    in the character chain). `serial_ms` is the same calls one after another."""
    from pipeline.chains import CHARACTER_CHAIN, HUMAN_CHAIN, NODES
    from pipeline.runner import Loop, EarlyStart, with_early_starts, schedule_deps

    def names(step):
        return step.names() if isinstance(step, (Loop, EarlyStart)) else (step.name,)

    in_character = {n for s in CHARACTER_CHAIN for n in names(s)}
    path, serial = 0.0, 0.0
    for chain in (HUMAN_CHAIN, CHARACTER_CHAIN):
        mods = {n: NODES[n] for s in chain for n in names(s)}
        steps = with_early_starts(chain, mods)  # a node that starts early makes its model calls in its early step
        early = {s.name for s in steps if isinstance(s, EarlyStart)}
        own = [[n for n in names(s) if (chain is CHARACTER_CHAIN or n not in in_character)
                and (isinstance(s, EarlyStart) or n not in early)] for s in steps]
        cost = [sum(per_node.get(n, 0.0) for n in nn) * latency_ms for nn in own]
        # a node whose model call starts at the turn's start (`model_call_at_start`) waits for
        # that call, begun beside the human chain, and adds nothing after it
        at_start = [max((c for n, c in zip(nn, (per_node.get(n, 0.0) * latency_ms for n in nn))
                         if mods[n].model_call_at_start), default=None) for nn in own]
        begin, finish = path, []
        for j, before in enumerate(schedule_deps(steps, mods)):
            done = max((finish[i] for i in before), default=begin)
            finish.append(max(done, at_start[j]) if at_start[j] is not None else done + cost[j])
        path = max(finish, default=path)
        serial += sum(cost)
    return {"critical_path_ms": round(path, 1), "serial_ms": round(serial, 1)}


def calls_of_turn(records: list[dict], pair: str, began: float, ended: float) -> Counter:
    """The LLM calls one turn made, by node: its pair's calls that started while the client waited
    for it (with the pair's turns in order, a background call of the turn before that runs into
    this one is counted under its own caller, which no chain node has)."""
    return Counter(CALLER_NODE.get(r["request"].get("caller"), r["request"].get("caller")) for r in records
                   if r["request"].get("pair") == pair and began <= r["started"] <= ended)


def turn_paths(rows: list[dict], records: list[dict], latency_ms: float, engine_ms: float | None) -> dict[str, Any]:
    """Each turn against its own critical path (the calls that turn made: a smalltalk turn is not
    measured against the mean of a mix with agent turns, whose planner adds calls): the medians of
    turn / critical path, of the own time (the turn less its critical path) and of its share of the
    turn; with `engine_ms` (each call's time as the LLM deployment met it) the same against it."""
    ratio, own, share, share_met, own_met = [], [], [], [], []
    for r in rows:
        if "began" not in r or not r["client_ms"]:
            continue
        calls = calls_of_turn(records, r["llm_pair"], r["began"], r["began"] + r["client_ms"] / 1000)
        cp = critical_path_ms(calls, latency_ms)["critical_path_ms"]
        if not cp:
            continue
        ratio.append(r["client_ms"] / cp)
        own.append(max(0.0, r["client_ms"] - cp))
        share.append(own[-1] / r["client_ms"])
        if engine_ms:
            met = critical_path_ms(calls, engine_ms)["critical_path_ms"]
            own_met.append(max(0.0, r["client_ms"] - met))
            share_met.append(own_met[-1] / r["client_ms"])
    if not ratio:
        return {}
    med = statistics.median
    out = {"turn_over_critical_path": round(med(ratio), 3), "own_ms_p50": round(med(own), 1),
           "own_share": round(med(share), 4)}
    if share_met:
        out.update(own_met_ms_p50=round(med(own_met), 1), own_share_met=round(med(share_met), 4))
    return out


def where_own_time_goes(rows: list[dict]) -> dict[str, Any]:
    """Where a turn's own time goes: each node's own code (its time less its model calls as the
    pair actor waited for them), p50 over the turns it ran in; a model call as the pair actor
    waited for it (p50 of each turn's mean; less the engine as met, that is the call's hop); the
    client's time beyond the pair actor's turn (HTTP front, ingress, the call to the pair actor)."""
    own: dict[str, list[float]] = {}
    call, beyond = [], []
    for r in rows:
        llm = r.get("nodes_llm_ms") or {}
        for node, ms in (r.get("nodes_ms") or {}).items():
            own.setdefault(node, []).append(max(0.0, ms - llm.get(node, 0.0)))
        if r.get("llm_calls"):
            call.append(r["llm_ms"] / r["llm_calls"])
        if r.get("actor_ms"):
            beyond.append(r["client_ms"] - r["actor_ms"])
    out: dict[str, Any] = {}
    if any(r.get("nodes_llm_ms") for r in rows):
        out["node_own_ms_p50"] = {n: round(statistics.median(v), 2) for n, v in own.items()}
    if call:
        out["llm_call_at_pair_ms_p50"] = round(statistics.median(call), 2)
    if beyond:
        out["client_beyond_actor_ms_p50"] = round(statistics.median(beyond), 2)
    return out


def in_flight(records: list[dict]) -> dict[str, Any]:
    """LLM calls in flight at once over the recorded requests: the most, and the mean while any was."""
    events = sorted([(r["started"], 1) for r in records] + [(r["started"] + r["ms"] / 1000, -1) for r in records])
    now = busy = weighted = 0.0
    most = level = 0
    for t, d in events:
        if level:
            busy += t - now
            weighted += level * (t - now)
        now, level = t, level + d
        most = max(most, level)
    return {"max": most, "mean_while_busy": round(weighted / busy, 2) if busy else None}


def cpu_seconds(exclude: tuple[int, ...] = ()) -> float:
    """CPU seconds the machine spent so far (user + system), less the given processes' (the
    harness itself and the stand-in engine are not the system under test)."""
    import psutil

    t = psutil.cpu_times()
    total = t.user + t.system + getattr(t, "nice", 0.0)
    for pid in (os.getpid(), *exclude):
        try:
            c = psutil.Process(pid).cpu_times()
            total -= c.user + c.system
        except psutil.Error:
            pass
    return total


def _label(p) -> str:
    """A process's part in the system: a Ray actor or replica by its title, else its program."""
    try:
        cmd = p.cmdline()
    except Exception:
        cmd = []
    if not cmd:
        return "kernel"  # kernel threads (network, block I/O) have no command line
    title = cmd[0]
    if title.startswith("ray::"):
        return title.split(" ")[0].split(".")[0]
    if "postgres" in title:
        return "postgres"
    program = os.path.basename(title.split(" ")[0]) or p.name()
    if program.startswith("python"):  # Ray's helpers are Python scripts: by script (or module)
        args = iter(cmd[1:])
        for a in args:
            if a == "-m":
                return f"python {next(args, '')}".rstrip()
            if not a.startswith("-"):
                return f"python {os.path.basename(a)}"
    return program


def cpu_by_part(exclude: tuple[int, ...] = ()) -> dict[str, float]:
    """CPU seconds so far per part of the system (processes that ended are not counted), less
    the given processes (as `cpu_seconds`: the harness and the stand-in engine)."""
    import psutil

    out: dict[str, float] = {}
    skip = {os.getpid(), *exclude}
    for p in psutil.process_iter():
        if p.pid in skip:
            continue
        try:
            c = p.cpu_times()
            out[_label(p)] = out.get(_label(p), 0.0) + c.user + c.system
        except psutil.Error:
            continue
    return out


def cpu_profile(before: dict[str, float], after: dict[str, float], turns: int, top: int = 8) -> dict[str, float]:
    """The parts that spent the most CPU between two snapshots, in seconds per turn."""
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    return {k: round(v / max(1, turns), 4) for k, v in sorted(delta.items(), key=lambda kv: -kv[1])[:top] if v > 0}
