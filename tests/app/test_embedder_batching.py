"""The embedder computes a lone text at once (Settings.embed_batch_wait_ms = 0) and still batches:
texts that arrive while a batch computes go together into the next one."""
import math
import uuid

from ray import serve

from core.names import APP_NAME, EMBEDDER_DEPLOYMENT


def test_texts_sent_at_once_are_embedded_in_few_batches(system):
    assert system.settings.embed_batch_wait_ms == 0
    h = serve.get_deployment_handle(EMBEDDER_DEPLOYMENT, app_name=APP_NAME)
    before = h.load.remote().result()
    # long texts (a batch computes for a while), so that the driver's sends arrive while one computes
    # even when the machine is loaded and this driver sends slowly
    satz = "Im Garten hinter dem Haus wachsen Tomaten, Bohnen, Kuerbisse und ein alter Apfelbaum. "
    texts = [f"{satz * 6} Nummer {i} ({uuid.uuid4().hex[:8]})" for i in range(24)]
    responses = [h.embed.remote(t) for t in texts]
    vectors = [r.result(timeout_s=60) for r in responses]
    after = h.load.remote().result()
    assert len({tuple(v) for v in vectors}) == len(texts)  # each text its own vector, none from a cache
    assert all(len(v) == 384 and math.isclose(sum(x * x for x in v), 1.0, rel_tol=1e-3) for v in vectors)
    assert after["texts"] - before["texts"] == len(texts)
    # the first text starts a batch alone; the others arrive while batches compute and share the
    # next ones (how many share one depends on how fast this driver sends: 3 to 13 here); one batch
    # per text would be no batching at all
    assert after["batches"] - before["batches"] <= len(texts) * 2 // 3, (before, after)
