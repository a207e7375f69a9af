"""The pure parts of the browser package: snapshot diffs, key names, error wording, geometry."""

from __future__ import annotations

import pytest

from builtin_tools.keys import normalize_keys
from owrl_sdk.browser.changes import _UNREAD, _unread_as_unchanged
from owrl_sdk.browser.errors import explain
from owrl_sdk.browser.feedback import bounded, diff
from owrl_sdk.browser.geometry import grid_to_pixels, pixels_to_grid

BEFORE = """- generic [active] [ref=e1]:
  - heading "Shop" [level=1] [ref=e2]
  - textbox "Search" [ref=e3]:
    - /placeholder: find a product
  - checkbox "In stock" [ref=e4]
  - status [ref=e5]: 3 results
  - list [ref=e6]:
    - listitem [ref=e7]:
      - link "Lamp" [ref=e8] [cursor=pointer]:
        - /url: /lamp"""


def test_nothing_changed_when_only_refs_and_focus_moved():
    moved = BEFORE.replace("[active] ", "").replace("e8", "e18")
    assert not diff(BEFORE, moved)


def test_a_remembered_parse_gives_the_same_diff_as_a_fresh_one():
    """A call's after-snapshot is the next call's before-snapshot: its parse is remembered,
    and the diffs of a chain of snapshots are the same as each computed alone."""
    from owrl_sdk.browser.feedback import elements

    chain = [BEFORE, BEFORE.replace("3 results", "2 results"), BEFORE.replace('"In stock"', '"In stock" [checked]')]
    alone = []
    for old, new in zip(chain, chain[1:]):
        elements.cache_clear()
        alone.append(diff(old, new).describe())
    elements.cache_clear()
    chained = [diff(old, new).describe() for old, new in zip(chain, chain[1:])]
    assert chained == alone and all(alone), alone
    assert elements.cache_info().hits >= 1
    assert not diff(BEFORE, BEFORE)


def test_appeared_disappeared_and_changed_are_told_apart():
    after = (
        BEFORE.replace('checkbox "In stock" [ref=e4]', 'checkbox "In stock" [checked] [ref=e4]')
        .replace("status [ref=e5]: 3 results", "status [ref=e5]: 1 result")
        .replace('    - /placeholder: find a product', '    - /placeholder: find a product\n    - text: lamp')
        .replace('  - heading "Shop" [level=1] [ref=e2]\n', "")
        + '\n  - button "Add to cart" [ref=e9]\n  - generic [ref=e10]'
    )
    changes = diff(BEFORE, after)
    assert [e.describe() for e in changes.appeared] == ['button "Add to cart"']  # a bare container does not count
    assert [e.describe() for e in changes.disappeared] == ['heading "Shop"']
    text = changes.describe()
    assert 'textbox "Search" now "lamp"' in text
    assert 'checkbox "In stock" [checked]' in text
    assert 'status now "1 result"' in text


def test_an_editor_read_on_one_side_only_is_no_news():
    """An editor whose text could not be read in time (a slowed page) takes the other side's
    text: neither "now empty" nor "now filled" is said of it, and a real change beside it is."""
    read = '- textbox "Message" [ref=e2]: Filled by the page\n- textbox "Name" [ref=e3]: Ada'
    unread = f'- textbox "Message" [ref=e2]: {_UNREAD}\n- textbox "Name" [ref=e3]: Ada'
    for before, after in ((read, unread), (unread, read)):
        assert not diff(*_unread_as_unchanged(before, after)), (before, after)
    renamed = unread.replace("Ada", "Bob")
    assert diff(*_unread_as_unchanged(read, renamed)).describe() == 'changed: textbox "Name" now "Bob"'
    # read on neither side: the line shows no text on either, and nothing is said of it
    both = _unread_as_unchanged(unread, unread)
    assert both[0] == both[1] == '- textbox "Message" [ref=e2]\n- textbox "Name" [ref=e3]: Ada'
    # no marker: both texts are returned as they are
    assert _unread_as_unchanged(read, read.replace("Ada", "Bob")) == (read, read.replace("Ada", "Bob"))


def test_bounded_cuts_with_an_ellipsis():
    assert bounded(["a" * 30, "b" * 30], 40).endswith("…")
    assert len(bounded(["a" * 30, "b" * 30], 40)) == 40
    assert bounded(["", "short"], 40) == "short"


@pytest.mark.parametrize(
    "keys, hotkey, expected",
    [
        ("enter", False, (["Enter"], False)),
        (["ctrl", "C"], True, (["Control", "c"], True)),
        ("ctrl+shift+t", False, (["Control", "Shift", "t"], True)),
        (["esc", "pgdn", "up", "F5", "a"], False, (["Escape", "PageDown", "ArrowUp", "F5", "a"], False)),
        ("+", False, (["+"], False)),
    ],
)
def test_key_names(keys, hotkey, expected):
    assert normalize_keys(keys, hotkey) == expected


def test_unknown_keys_are_refused_with_examples():
    with pytest.raises(ValueError, match="unknown key 'submit'.*Enter"):
        normalize_keys(["submit"], False)


def test_explain_reads_playwright_errors():
    class FakeError(Exception):  # Playwright's message format, without a browser
        pass

    covered = FakeError(
        'Locator.click: Timeout 5000ms exceeded.\nCall log:\n  - waiting for locator("#buy")\n'
        '    - locator resolved to <button id="buy">Buy</button>\n  - attempting click action\n'
        '      - <div class="cookie-banner">…</div> intercepts pointer events\n'
    )
    assert "another element covers the target" in explain(covered, "click on selector #buy")
    assert "cookie-banner" in explain(covered, "click on selector #buy")
    missing = FakeError('Locator.click: Timeout 5000ms exceeded.\nCall log:\n  - waiting for locator("#buy")\n')
    assert explain(missing, "click on selector #buy") == (
        "click on selector #buy failed: no element matches it (waited 5 s). "
        "Find its ref or name in the page snapshot (the run folder's report.html, or `owrl inspect URL`)."
    )
    net = FakeError("Page.goto: net::ERR_NAME_NOT_RESOLVED at https://nowhere.invalid/")
    assert "ERR_NAME_NOT_RESOLVED: the host name does not resolve" in explain(net, "goto_url")


def test_grid_and_pixels():
    assert grid_to_pixels([500, 500], 1280, 1000) == (640.0, 500.0)
    assert grid_to_pixels([1000, 1000], 1280, 1000) == (1279.0, 999.0)  # kept inside the viewport
    assert pixels_to_grid(640, 500, 1280, 1000) == [500.0, 500.0]
