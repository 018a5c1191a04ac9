"""Client text where it leaves as a line (core/logsafe.py): a log record of the project's loggers
is written on one line whatever its arguments hold, and a header made of client strings is ASCII."""
import io
import logging

import pytest

from core import logsafe


@pytest.fixture()
def installed():
    before = logging.getLogRecordFactory()
    logsafe.install()
    logsafe.install()  # once is enough: a second install wraps nothing more
    yield
    logging.setLogRecordFactory(before)


def _written(logger: str, *args) -> str:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    log = logging.getLogger(logger)
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        log.info(*args)
    finally:
        log.removeHandler(handler)
    return out.getvalue()


def test_a_record_with_line_breaks_in_its_arguments_is_written_escaped_on_one_line(installed):
    forged = "a\r\nINFO novaberg.ingress: forged\x1b[2J\u2028"
    text = _written("novaberg.ingress", "ingress: turn %s; ignored: %s", "t1", forged)
    assert text == ("INFO novaberg.ingress: ingress: turn t1; ignored: "
                    "a\\r\\nINFO novaberg.ingress: forged\\x1b[2J\\u2028\n")
    assert text.count("\n") == 1
    # non-ASCII letters are no danger in a log line: kept as they are
    assert _written("novaberg.ingress", "name %s", "Jürgen 名前") == "INFO novaberg.ingress: name Jürgen 名前\n"
    # a record whose arguments do not fit its format is left to the handler, as without the escaping
    assert logging.getLogger("novaberg.ingress").makeRecord("novaberg.ingress", logging.INFO, "f", 1, "%s %s",
                                                            ("eins",), None).args == ("eins",)


def test_other_loggers_records_are_left_as_they_are(installed):
    assert _written("ray.serve", "line\nnext") == "INFO ray.serve: line\nnext\n"


def test_a_factory_set_before_stays_in_effect():
    before = logging.getLogRecordFactory()

    def tagging(*args, **kwargs):
        record = before(*args, **kwargs)
        record.tag = "da"
        return record

    logging.setLogRecordFactory(tagging)
    try:
        logsafe.install()
        record = logging.getLogger("novaberg.x").makeRecord("novaberg.x", logging.INFO, "f", 1, "a%s", ("\n",), None)
        assert record.tag == "da" and record.getMessage() == "a\\n"
    finally:
        logging.setLogRecordFactory(before)


def test_escapes():
    assert logsafe.ohne_steuerzeichen("a\tb\x00c\x7f\x85") == "a\\tb\\x00c\\x7f\\x85"
    assert logsafe.nur_ascii("naïve 名前 \U0001f600 ok\r\n") == "na\\xefve \\u540d\\u524d \\U0001f600 ok\\r\\n"


def test_a_header_of_client_field_names_is_ascii_and_bounded():
    from serve.routes.common import HEADER_MAX_CHARS, header_value

    value = header_value(["naïve", "名前", "a\r\nInjected: x"])
    assert value == "na\\xefve, \\u540d\\u524d, a\\r\\nInjected: x"
    value.encode("ascii")
    long = header_value([f"feld{i}" for i in range(10_000)])
    assert len(long) == HEADER_MAX_CHARS and long.endswith("...")
