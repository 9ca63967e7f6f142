"""The accessibility pass's checker can fail: on small pages each broken in one way it names the
fault, and on a sound page it finds nothing (tests/web/a11y_checks.py)."""

from __future__ import annotations

from typing import Any

import pytest
from a11y_checks import axe_violations, fold_problems, keyboard_problems, page_problems, skip_link_problems, structure_problems

pytestmark = pytest.mark.network  # Chromium over its DevTools socket

SOUND = """<!doctype html><html lang="en"><head><title>Sound</title>
<style>a:focus-visible, button:focus-visible, input:focus-visible { outline: 3px solid #1f5fa8; }
button { font: inherit; padding: .35rem .8rem; }</style></head>
<body><a href="#main">Skip to the page's content</a>
<main id="main" tabindex="-1"><h1>Sound</h1><h2>A form</h2>
<form><label for="name">Name</label><input id="name" name="name">
<fieldset><legend>Class</legend><label><input type="radio" name="c" value="a" checked> a</label>
<label><input type="radio" name="c" value="b"> b</label></fieldset>
<button type="submit">Save</button></form>
<details><summary>More</summary><a href="/hidden">inside a closed details</a></details>
<h2>Then</h2><h3>A part</h3><p><a href="/x">A link</a></p></main></body></html>"""


async def opened(browser: Any, html: str) -> Any:
    context = await browser.new_context(bypass_csp=True)
    page = await context.new_page()
    await page.set_content(html)
    return page


async def test_a_sound_page_passes(browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    page = await opened(browser, SOUND)
    assert await page_problems(page) == []


async def test_a_missing_label_and_bad_headings_are_found(browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    broken = SOUND.replace('<label for="name">Name</label>', "").replace("<h3>", "<h4>").replace("</h3>", "</h4>") \
        .replace("<h2>Then</h2>", "<h1>Then</h1>")
    page = await opened(browser, broken)
    problems = await structure_problems(page)
    assert "unlabelled input name=name" in problems
    assert "not exactly one h1" in problems
    assert any("H4" in p and "skips a level" in p for p in problems), problems
    axe = await axe_violations(page)
    assert any(" label:" in p for p in axe), axe  # axe-core's own "Form elements must have labels" (critical)


async def test_low_contrast_is_a_serious_axe_violation(browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    page = await opened(browser, SOUND.replace("<p><a", '<p style="color:#bbb">faint <a'))
    assert any("color-contrast" in p for p in await axe_violations(page))


async def test_no_focus_indicator_is_found(browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    page = await opened(browser, SOUND.replace("</style>", "button:focus, button:focus-visible { outline: none; }</style>"))
    problems = await keyboard_problems(page)
    assert [p.split(" (")[0] for p in problems] == ['no visible focus indicator on button "Save"'], problems


async def test_a_missing_skip_link_and_a_positive_tabindex_are_found(browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    broken = SOUND.replace('<a href="#main">Skip to the page\'s content</a>', "") \
        .replace('<a href="/x">', '<a href="/x" tabindex="1">')
    page = await opened(browser, broken)
    problems = await keyboard_problems(page)
    assert any(p.startswith('the first Tab stop is input#name') for p in problems), problems
    assert 'Tab order leaves DOM order at a "A link" (tabindex=1)' in problems, problems


async def test_a_focus_trap_is_found(browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    trap = SOUND.replace("</body>", "<script>document.querySelector('button').addEventListener('keydown', e => {"
                                    " if (e.key === 'Tab') { e.preventDefault(); document.getElementById('name').focus(); }"
                                    " });</script></body>")
    page = await opened(browser, trap)
    problems = await keyboard_problems(page)
    assert any(p.startswith("focus trap: Tab came back to input#name") for p in problems), problems
    assert any(p.startswith('Tab never reaches a "A link"') for p in problems), problems


async def test_a_control_replaced_mid_walk_is_walked_again(browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    live = SOUND.replace("</body>", "<script>let once = true; document.addEventListener('focusin', () => {"
                                    " if (once) { once = false; const a = document.querySelector('a[href=\"/x\"]');"
                                    " a.replaceWith(a.cloneNode(true)); } });</script></body>")
    page = await opened(browser, live)
    assert await keyboard_problems(page, attempts=1) == ['Tab never reaches a "A link"']  # as a live update would
    page = await opened(browser, live)
    assert await keyboard_problems(page) == []


async def test_a_skip_link_that_goes_nowhere_is_found(browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    page = await opened(browser, SOUND.replace('<main id="main" tabindex="-1">', '<main id="content">'))
    assert await skip_link_problems(page) == [
        "Enter on the skip link does not move focus to the page's content (#main)"]


async def test_a_fold_the_keyboard_cannot_open_is_found(browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    page = await opened(browser, SOUND)
    assert await fold_problems(page) == []
    stuck = SOUND.replace("</body>", "<script>document.querySelector('summary').addEventListener('keydown', e => {"
                                     " if (e.key === 'Enter') e.preventDefault(); });</script></body>")
    page = await opened(browser, stuck)
    assert await fold_problems(page) == ['Enter on the fold "More" does not open it']


async def test_targets_too_small_to_tap_are_found(browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    tiny = '<p><button style="width:12px;height:12px;padding:0" aria-label="Up">+</button>' \
           '<button style="width:12px;height:12px;padding:0" aria-label="Down">-</button></p></main>'
    page = await opened(browser, SOUND.replace("</main>", tiny))
    assert any("target-size" in p for p in await axe_violations(page))  # WCAG 2.2's 24 px, on by our choice
