"""The HTTP client benchmark runs against the stand-in and reports both clients' CPU per request."""
import asyncio

from bench import http_client, standin
from bench.harness import _free_port


def test_a_round_measures_both_clients_on_the_same_requests():
    port = _free_port()
    proc = standin.start(port, 5)
    try:
        rows = asyncio.run(http_client._rounds(f"http://127.0.0.1:{port}/v1", 30, 4, 1))
    finally:
        proc.terminate()
    (r,) = rows
    assert r["backend_cpu_ms"] > 0 and r["httpx_cpu_ms"] > 0
    assert abs(r["ratio"] - r["httpx_cpu_ms"] / r["backend_cpu_ms"]) < 0.05  # the ratio of the printed figures
    assert r["backend_rps"] > 0 and r["httpx_rps"] > 0
