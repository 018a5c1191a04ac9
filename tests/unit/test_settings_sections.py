"""Each process receives its settings as a typed object, never as a dict it rebuilds: the flat
`Settings` offers each section as an object of its own (`settings.llm`), the app builder binds each
deployment the section it reads (the LLM deployment and its engine `LLMSettings`, as Ray Serve LLM
hands its engine an `LLMConfig`) or the whole `Settings`, and the pair actors, the outbox workers
and the pixie are started with the `Settings` object itself."""
import pickle

import pytest
from pydantic import ValidationError

from core.settings import SECTION_NAMES, SECTIONS, EmbedderSettings, LLMSettings, Settings, WebSettings


def test_every_section_is_an_object_of_its_own_with_the_flat_values():
    s = Settings(llm_seed=7, embed_batch=8, web_timeout_s=3.0, session_max_turns=10, session_keep_turns=60)
    assert set(SECTION_NAMES.values()) == set(SECTIONS)
    for name, cls in SECTION_NAMES.items():
        part = getattr(s, name)
        assert type(part) is cls, name  # the section, not the whole Settings
        assert part.model_dump() == {f: getattr(s, f) for f in cls.model_fields}, name
    assert (s.llm.llm_seed, s.embedder.embed_batch, s.web.web_timeout_s) == (7, 8, 3.0)
    assert s.llm.model_fields_set == {"llm_seed"}  # what was set stays marked as set
    assert s.pair.session_max_turns == 10 and s.store.logs_dir == s.logs_dir
    with pytest.raises(TypeError, match="no section"):
        s.section(Settings)


def test_a_section_is_frozen_and_travels_by_pickle_as_itself():
    s = Settings(llm_seed=7)
    with pytest.raises(ValidationError):
        s.llm.llm_seed = 8
    assert pickle.loads(pickle.dumps(s.llm)) == s.llm
    assert pickle.loads(pickle.dumps(s)) == s


def _bound(settings: Settings) -> dict:
    """Each deployment's constructor arguments, as the app builder binds them (no Ray started)."""
    from ray.serve._private.build_app import build_app as serve_build

    from serve.app import build_app

    built = serve_build(build_app(settings, hintergrund=True), name="novaberg")
    return {d.name: (d.init_args, d.init_kwargs) for d in built.deployments}


def test_each_deployment_is_bound_the_typed_settings_it_reads():
    s = Settings(database_url="postgresql://db/x", redis_url="redis://r", remote_nodes=["gv"], llm_seed=3)
    bound = _bound(s)
    first = {name: args[0] for name, (args, _) in bound.items()}
    assert type(first["LLM"]) is LLMSettings and first["LLM"] == s.llm
    assert type(first["Embedder"]) is EmbedderSettings and first["Embedder"] == s.embedder
    assert type(first["Web"]) is WebSettings and first["Web"] == s.web
    assert all(type(first[n]) is Settings and first[n] == s for n in ("Store", "Nodes", "Ingress"))
    dicts = [(n, a) for n, (args, kw) in bound.items() for a in (*args, *kw.values()) if isinstance(a, dict)]
    assert dicts == []  # no untyped dict crosses into a replica


class _Recorder:
    """Stands in for a Ray actor class: records what its constructor would have been given."""

    def __init__(self):
        self.args: list[tuple] = []

    def options(self, **_):
        return self

    def remote(self, *args):
        self.args.append(args)
        return self


def test_the_actors_are_started_with_the_settings_object(monkeypatch):
    from actors import activation, pixie, worker

    s = Settings(outbox_workers=2)
    pairs, pixies, workers = _Recorder(), _Recorder(), _Recorder()
    monkeypatch.setattr(activation, "PairActorRemote", pairs)
    monkeypatch.setattr(pixie, "PixieRemote", pixies)
    monkeypatch.setattr(worker, "BackgroundWorkerRemote", workers)
    monkeypatch.setattr(workers, "wait_ready", _Recorder(), raising=False)
    monkeypatch.setattr(worker.ray, "get", lambda refs, **_: [True] * len(refs))
    activation.host_starten(s, "pairhost:t")
    pixie.start_pixie(s)
    worker.start_workers(s)
    assert pairs.args == [(s, "pairhost:t")]
    assert pixies.args == [(s, s.pixie_interval_s)]
    assert workers.args == [(0, s), (1, s)]
