"""docs/SETTINGS.md is what `python -m core.settings_doc` writes from core/settings.py, so the
reference cannot drift from the settings; and the settings are the same flat `Settings` they
were before the sections: every field in exactly one section, read from its `NOVABERG_*` name."""
from core import settings_doc
from core.settings import SECTIONS, Settings


def test_the_reference_is_what_the_generator_writes():
    assert settings_doc.PATH.read_text() == settings_doc.render(), (
        "docs/SETTINGS.md is stale: run `python -m core.settings_doc` and commit the file")


def test_every_setting_sits_in_one_section_with_a_description():
    names = [n for section in SECTIONS for n in section.model_fields]
    assert sorted(names) == sorted(Settings.model_fields)  # each once, none outside a section
    assert [n for n in names if not Settings.model_fields[n].description] == []
    assert all(section.title and section.__doc__ for section in SECTIONS)


def test_sections_keep_the_flat_names_of_the_environment_and_the_code(monkeypatch):
    monkeypatch.setenv("NOVABERG_LLM_BACKEND", "openai")
    monkeypatch.setenv("NOVABERG_NODE_MAX_TOKENS", '{"*": 24}')
    monkeypatch.setenv("DATABASE_URL", "postgresql://db/x")
    s = Settings()
    assert (s.llm_backend, s.node_max_tokens, s.database_url) == ("openai", {"*": 24}, "postgresql://db/x")
    assert Settings(**s.model_dump(mode="json")) == s  # a process edge
    assert settings_doc.env_name("database_url", Settings.model_fields["database_url"]) == "DATABASE_URL"
    assert settings_doc.env_name("llm_backend", Settings.model_fields["llm_backend"]) == "NOVABERG_LLM_BACKEND"
