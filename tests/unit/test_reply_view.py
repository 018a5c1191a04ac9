"""`novaberg chat` on a terminal: the draft is drawn while it comes, then erased for the kept
reply — played on a terminal emulator (pyte), what stays on the screen is the stored reply."""
import io

import pyte
import pytest

from cluster.reply_view import ReplyView, rows


class Terminal(io.StringIO):
    def isatty(self):
        return True


def _screen(text: str, columns: int, lines: int = 30) -> list[str]:
    screen = pyte.Screen(columns, lines)
    pyte.Stream(screen).feed(text.replace("\n", "\r\n"))
    return [line.rstrip() for line in screen.display if line.strip()]


def test_rows_count_wrapped_and_wide_characters():
    assert rows("abc", 10) == 1 and rows("a" * 10, 10) == 1 and rows("a" * 11, 10) == 2
    assert rows("ab\ncd", 10) == 2 and rows("\u4e2d" * 6, 10) == 2  # six wide characters: 12 cells


@pytest.mark.parametrize("width", [12, 20, 80])
@pytest.mark.parametrize("draft, kept", [
    ("Gern! [REGELN] Du antwortest auf Deutsch und erfindest keine Details.", "Gern!"),
    ("Kurz.", "Das erzaehle ich dir gern genauer, weil es mir wichtig ist."),
    ("Zeile eins\nZeile zwei ist laenger", "Eine Zeile."),
    ("Schoen, dass du da bist.", "Schoen, dass du da bist."),
])
def test_the_screen_ends_with_the_kept_reply_alone(width, draft, kept):
    out = Terminal()
    out.write("Talking to Nova (nova) as me.\ndu> Hallo\n")
    view = ReplyView(out, width=width)
    view.begin("nova> ")
    for word in draft.split(" "):
        view.draft(word + " ")
    view.kept(kept)
    out.write("du> ")
    screen = _screen(out.getvalue(), width)
    text = "".join(screen).replace(" ", "")
    assert text.endswith(f"nova> {kept}du>".replace(" ", ""))
    assert "du>Hallo" in text, "what stood above the reply is untouched"
    if kept not in draft:
        assert draft.replace(" ", "")[:12] not in text


def test_a_failed_turn_erases_the_draft():
    out = Terminal()
    view = ReplyView(out, width=16)
    view.begin("nova> ")
    view.draft("Ein Entwurf, der nie gespeichert wurde.")
    view.failed("no reply: your message is kept")
    screen = "".join(_screen(out.getvalue(), 16)).replace(" ", "")
    assert "Entwurf" not in screen and screen.startswith("nova>[noreply:")


def test_piped_output_carries_the_kept_reply_only():
    out = io.StringIO()
    view = ReplyView(out)
    view.begin("nova> ")
    view.draft("Gern! [REGELN] Du antwortest")
    view.kept("Gern!")
    assert out.getvalue() == "nova> Gern!\n"


@pytest.mark.parametrize("width", [8, 80])
def test_the_writing_state_is_erased_for_the_kept_reply(width):
    out = Terminal()
    view = ReplyView(out, terminal=True, width=width)
    view.begin("nova> ")
    view.writing()
    view.writing()  # shown once, however often the stream says so
    assert out.getvalue().count("schreibt") == 1
    view.kept("Hallo du.")
    assert "".join(_screen(out.getvalue(), width)).replace(" ", "") == "nova>Hallodu."


def test_piped_output_gets_no_writing_state():
    out = io.StringIO()
    view = ReplyView(out, terminal=False)
    view.begin("nova> ")
    view.writing()
    view.kept("Hallo du.")
    assert out.getvalue() == "nova> Hallo du.\n"
