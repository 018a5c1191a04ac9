"""The reasoning channel is separated from the content, whole and streamed."""
from serve.llm_backends import _ThinkSplitter, split_reasoning


def test_split_reasoning():
    assert split_reasoning("<think>a plan</think>Hallo") == ("Hallo", "a plan")
    assert split_reasoning("Hallo") == ("Hallo", None)


def test_stream_splitter_across_chunk_borders():
    s = _ThinkSplitter()
    pieces = ["<thi", "nk>ich ", "überlege</th", "ink>Hal", "lo!"]
    out = [p for c in pieces for p in s.feed(c)] + s.flush()
    content = "".join(t for k, t in out if k == "content")
    reasoning = "".join(t for k, t in out if k == "reasoning_content")
    assert content == "Hallo!"
    assert reasoning == "ich überlege"


def test_stream_splitter_plain_text_passes_through():
    s = _ThinkSplitter()
    out = s.feed("a < b") + s.feed(" und <x>") + s.flush()
    assert "".join(t for _, t in out) == "a < b und <x>"
    assert all(k == "content" for k, _ in out)
