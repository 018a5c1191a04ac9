"""The vllm backend builds Ray Serve LLM's LLMServer application (GPU machines with the extra)."""
import pytest

pytest.importorskip("vllm")
pytest.importorskip("ray.serve.llm")


def test_vllm_server_app_builds():
    from core.settings import Settings
    from serve.llm import vllm_server_app

    app = vllm_server_app(Settings(llm_backend="vllm", llm_model="qwen3-8b", vllm_model_source="Qwen/Qwen3-8B"))
    assert app is not None
