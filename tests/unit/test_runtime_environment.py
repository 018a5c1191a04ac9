"""The local raylet gets WORKER_ENV in its environment for the time of `ray.init`; the driver's
environment is as it was afterwards — values it had come back, values it lacked are gone."""
import os

import pytest

from cluster import runtime


def test_the_environment_is_extended_for_the_block_and_restored_after(monkeypatch):
    monkeypatch.setenv("NB_TEST_HAD", "alt")
    monkeypatch.delenv("NB_TEST_NEW", raising=False)
    with runtime._environment({"NB_TEST_HAD": "neu", "NB_TEST_NEW": "1"}):
        assert os.environ["NB_TEST_HAD"] == "neu" and os.environ["NB_TEST_NEW"] == "1"
    assert os.environ["NB_TEST_HAD"] == "alt" and "NB_TEST_NEW" not in os.environ


def test_the_environment_is_restored_when_the_block_fails(monkeypatch):
    monkeypatch.delenv("NB_TEST_NEW", raising=False)
    with pytest.raises(RuntimeError):
        with runtime._environment({"NB_TEST_NEW": "1"}):
            raise RuntimeError("ray.init failed")
    assert "NB_TEST_NEW" not in os.environ
