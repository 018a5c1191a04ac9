"""What the Thinker may fetch in one turn (pipeline/thinker/tools.FetchRules): the URLs of the
turn's search results and of the human's message, or a configured host; never a URL whose path
or query carries a memory it was shown; at most the turn's budget."""
from pipeline.thinker.tools import FetchRules, traegt_erinnerung


def test_only_listed_urls_and_hosts():
    r = FetchRules("Schau mal: https://example.org/beagle#fell, was meinst du?", ["wikipedia.org"], 3)
    r.urls.add("https://news.example/artikel")
    assert r.refusal("https://example.org/beagle/") is None  # the human's own link
    assert r.refusal("https://news.example/artikel") is None  # a search result
    assert r.refusal("https://de.wikipedia.org/wiki/Beagle") is None  # a configured host and its subdomains
    assert r.refusal("https://evil-wikipedia.org/x")[0] == "web_fetch.fremde_url"
    assert r.refusal("https://news.example/artikel?d=1")[0] == "web_fetch.fremde_url"
    assert r.refusal("http://169.254.169.254/latest/meta-data")[0] == "web_fetch.fremde_url"


def test_a_memory_in_the_url_is_refused_even_on_an_allowed_host():
    r = FetchRules("", ["wikipedia.org"], 3)
    r.erinnerungen.append("Anna wohnt seit Mai in Leipzig am Markt.")
    assert r.refusal("https://de.wikipedia.org/wiki/Leipzig") is None
    assert r.refusal("https://de.wikipedia.org/w?q=anna+wohnt+seit")[0] == "web_fetch.erinnerung_in_url"
    assert traegt_erinnerung("https://x.org/Mai%20in%20Leipzig%20am%20Markt", r.erinnerungen)
    assert not traegt_erinnerung("https://x.org/Markt/Leipzig", r.erinnerungen)


def test_the_budget():
    r = FetchRules("https://a.org/1", [], 1)
    assert r.refusal("https://a.org/1") is None
    r.left -= 1
    assert r.refusal("https://a.org/1")[0] == "web_fetch.budget"
