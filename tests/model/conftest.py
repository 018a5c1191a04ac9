"""The model tier: the whole system end to end with the real embedded model (SmolLM2 on
llama.cpp) — the small set of tests that is about what a real engine does in the chain."""
import pytest

from tests.conftest import make_keys, start_system


@pytest.fixture(scope="package")
def system(settings, migrated):
    yield from start_system(settings)


@pytest.fixture(scope="package")
def keys(system):
    return make_keys()
