"""Prompt files render with exactly their declared variables; overrides follow the model."""
import pytest

from prompts import PromptError, PromptLibrary, fields_of


def test_every_prompt_renders_with_its_variables():
    lib = PromptLibrary()
    files = lib.all_files()
    assert files, "no prompt files found"
    for path in files:
        node, part, _ = path.name.split(".")
        variables = {f: f"<{f}>" for f in fields_of(path.read_text())}
        out = lib.render(node, part, **variables)
        for f in variables:
            assert f"<{f}>" in out


def test_missing_and_unused_variables_fail():
    lib = PromptLibrary()
    fields = fields_of(lib.path("responder", "identity")[0].read_text())
    some = {f: "x" for f in fields}
    missing = dict(some)
    missing.pop(next(iter(fields)))
    with pytest.raises(PromptError, match="missing"):
        lib.render("responder", "identity", **missing)
    with pytest.raises(PromptError, match="unused"):
        lib.render("responder", "identity", extra="y", **some)


def test_model_override_folder_is_chosen_by_the_answering_model(tmp_path):
    (tmp_path / "default").mkdir()
    (tmp_path / "default" / "n.rules.txt").write_text("default {a}")
    (tmp_path / "some_model_7b").mkdir()
    (tmp_path / "some_model_7b" / "n.rules.txt").write_text("override {a}")
    lib = PromptLibrary(tmp_path)
    assert lib.render("n", "rules", "Some-Model 7B", a=1) == "override 1"
    assert lib.variant("n", "rules", "Some-Model 7B") == "some_model_7b"
    assert lib.render("n", "rules", "other", a=1) == "default 1"
    assert lib.variant("n", "rules", None) == "default"
