"""The accessibility pass's three checks on an open page (issue 32, "Done when"):

1. axe-core (vendored under tests/web/vendor/, injected into the page) finds no violation of
   impact serious or critical;
2. every form control has an accessible name, every button and link a name, exactly one h1 and no
   skipped heading level (pageshots.ACCESSIBILITY_PROBLEMS, which the page tests share);
3. keyboard only: Tab from the top of the page reaches every interactive control in DOM order,
   the skip link first, each stop shows a focus indicator (its computed outline or box-shadow
   differs from the same element unfocused), and focus leaves the page at the end (no trap).

Each returns a list of problems in words, empty when the page passes. The context must be made
with `bypass_csp=True`: the pages' Content-Security-Policy refuses an injected script.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pageshots import accessibility_problems

AXE = Path(__file__).parent / "vendor" / "axe-4.14.1.min.js"
FAILING_IMPACTS = ("serious", "critical")


async def axe_violations(page: Any) -> list[str]:
    """axe-core's violations of impact serious or critical, one line each with where."""
    if not await page.evaluate("() => typeof window.axe === 'object'"):
        await page.add_script_tag(path=str(AXE))
    found = await page.evaluate("""async () => {
      const result = await axe.run(document, {resultTypes: ['violations'], rules: {'target-size': {enabled: true}}});
      return result.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
        where: v.nodes.slice(0, 5).map(n => n.target.join(' ') + (n.failureSummary ? ' (' +
          n.failureSummary.replace(/\\s+/g, ' ').slice(0, 200) + ')' : ''))}));
    }""")
    return [f"axe {v['impact']} {v['id']}: {v['help']} at {v['where']}" for v in found
            if v["impact"] in FAILING_IMPACTS]


async def structure_problems(page: Any) -> list[str]:
    """Names on every control, button and link; one h1; no skipped heading level; <html lang>."""
    return await accessibility_problems(page)


# What Tab should reach, in DOM order: the focusable elements that are rendered, not disabled, not
# inert, not tabindex=-1; of a group of radio buttons only the checked one (or the first).
TABBABLE = """() => {
  const describe = el => {
    const name = (el.getAttribute('aria-label') || (el.labels && el.labels[0] && el.labels[0].textContent)
      || el.textContent || el.value || el.name || '').replace(/\\s+/g, ' ').trim().slice(0, 50);
    return `${el.tagName.toLowerCase()}${el.id ? '#' + el.id : ''}${el.name ? '[name=' + el.name + ']' : ''} "${name}"`;
  };
  window.__a11yDescribe = describe;
  const selector = 'a[href], area[href], button, input:not([type=hidden]), select, textarea, iframe, '
    + 'audio[controls], video[controls], [contenteditable]:not([contenteditable=false]), '
    + 'details > summary:first-of-type, [tabindex]';
  const groups = new Map();
  const found = [];
  for (const el of document.querySelectorAll(selector)) {
    if (el.tabIndex < 0 || el.matches(':disabled') || el.closest('[inert]')) continue;
    if (!el.checkVisibility({visibilityProperty: true})) continue;
    if (el.matches('input[type=radio]') && el.name) {
      const key = (el.form ? el.form.id || el.form.action : '') + '|' + el.name;
      const group = groups.get(key);
      if (group === undefined) { groups.set(key, {first: el}); found.push(el); }
      else if (el.checked && !group.first.checked) { found[found.indexOf(group.first)] = el; group.first = el; }
      continue;
    }
    found.push(el);
  }
  window.__a11yExpected = found;
  window.__a11yStops = [];
  // A live page (the pills' poll, server-sent events) may replace a control mid-walk: noted, and
  // the walk is taken again.
  window.__a11yChanged = false;
  window.__a11yObserver?.disconnect();
  window.__a11yObserver = new MutationObserver(records => {
    for (const r of records) for (const gone of r.removedNodes)
      if (found.some(el => gone === el || (gone.contains && gone.contains(el)))) window.__a11yChanged = true;
  });
  window.__a11yObserver.observe(document.body, {childList: true, subtree: true});
  return {expected: found.map(describe),
          positive: found.filter(el => el.tabIndex > 0).map(el => `${describe(el)} (tabindex=${el.tabIndex})`)};
}"""

# Put the sequential-focus starting point at the top of <body> (an autofocused field or a
# fragment would move it), with nothing focused.
FROM_THE_TOP = """() => {
  if (document.activeElement) document.activeElement.blur();
  const start = document.createElement('span');
  start.tabIndex = -1;
  document.body.prepend(start);
  start.focus();
  start.blur();
  start.remove();
}"""

STOP = """() => {
  const el = document.activeElement;
  if (!el || el === document.body || el === document.documentElement) return null;
  const cs = getComputedStyle(el);
  const seen = window.__a11yStops.indexOf(el);
  if (seen < 0) window.__a11yStops.push(el);
  return {expected: window.__a11yExpected.indexOf(el), seen, label: window.__a11yDescribe(el),
          skip: el.matches('a[href="#main"]'),
          style: [cs.outlineStyle, cs.outlineWidth, cs.outlineColor, cs.boxShadow]};
}"""

UNFOCUSED = """() => {
  if (document.activeElement) document.activeElement.blur();
  return window.__a11yStops.map(el => { const cs = getComputedStyle(el);
    return [cs.outlineStyle, cs.outlineWidth, cs.outlineColor, cs.boxShadow]; });
}"""


def shows_focus(focused: list[str], unfocused: list[str]) -> bool:
    """An outline that is drawn and differs from the unfocused one, or a box-shadow that differs."""
    style, width, _, shadow = focused
    outline = style != "none" and width not in ("0px", "") and focused[:3] != unfocused[:3]
    return outline or (shadow != "none" and shadow != unfocused[3])


async def keyboard_problems(page: Any, attempts: int = 3) -> list[str]:
    """Tab from the top to the end of the page: every control reached in DOM order, the skip link
    first, a focus indicator on each stop, and focus leaves the page at the end. Walked again
    (up to `attempts` times) when the page replaced one of its controls during the walk."""
    for _ in range(attempts - 1):
        problems = await walk(page)
        if not await page.evaluate("() => window.__a11yChanged"):
            return problems
    return await walk(page)


async def walk(page: Any) -> list[str]:
    tabbable = await page.evaluate(TABBABLE)
    expected: list[str] = tabbable["expected"]
    await page.evaluate(FROM_THE_TOP)
    # A positive tabindex jumps the queue from the address bar; from any element it comes last.
    problems = [f"Tab order leaves DOM order at {p}" for p in tabbable["positive"]]
    stops: list[dict[str, Any]] = []
    for _ in range(2 * len(expected) + 20):
        await page.keyboard.press("Tab")
        stop = await page.evaluate(STOP)
        if stop is None:
            break  # focus left the page: the end
        if stop["seen"] >= 0:
            if stop["seen"] != 0:
                problems.append(f"focus trap: Tab came back to {stop['label']} after {stops[-1]['label']}")
            break  # back at the first stop: Tab wrapped around the page
        stops.append(stop)
    else:
        problems.append(f"focus trap: still on the page after {2 * len(expected) + 20} Tab presses "
                        f"(at {stops[-1]['label'] if stops else 'nothing'})")
    if expected and (not stops or not stops[0]["skip"]):
        problems.append(f"the first Tab stop is {stops[0]['label'] if stops else 'nothing'}, not the skip link")
    reached = [s["expected"] for s in stops if s["expected"] >= 0]
    missing = sorted(set(range(len(expected))) - set(reached))
    problems += [f"Tab never reaches {expected[i]}" for i in missing]
    in_order = sorted(reached)
    if reached != in_order:
        at = next(i for i, (a, b) in enumerate(zip(reached, in_order, strict=True)) if a != b)
        problems.append(f"Tab order leaves DOM order at {expected[reached[at]]} (DOM order has {expected[in_order[at]]})")
    unfocused = await page.evaluate(UNFOCUSED)
    problems += [f"no visible focus indicator on {s['label']} (focused {s['style']}, unfocused {u})"
                 for s, u in zip(stops, unfocused, strict=True) if not shows_focus(s["style"], u)]
    return problems


async def skip_link_problems(page: Any) -> list[str]:
    """The skip link, followed by the keyboard, puts focus on the content it names."""
    link = page.locator('a[href="#main"]').first
    if await link.count() == 0:
        return []  # said by the walk: the first Tab stop is not the skip link
    await link.focus()
    await page.keyboard.press("Enter")
    if await page.evaluate("() => document.activeElement && document.activeElement.id") != "main":
        return ["Enter on the skip link does not move focus to the page's content (#main)"]
    return []


FOLDS = """() => [...document.querySelectorAll('details')]
  .filter(d => !d.open && d.querySelector(':scope > summary') && d.querySelector(':scope > summary').checkVisibility())
  .map((d, i) => { d.dataset.a11yFold = i; return i; })"""

INSIDE = """fold => {
  const d = document.querySelector(`details[data-a11y-fold="${fold}"]`);
  const el = document.activeElement;
  const controls = [...d.querySelectorAll('a[href], button, input:not([type=hidden]), select, textarea, summary')]
    .filter(c => c.parentElement !== d || c.tagName !== 'SUMMARY');
  return {open: d.open, summary: d.querySelector(':scope > summary').textContent.trim().slice(0, 50),
          controls: controls.length, inside: d.contains(el) && el.tagName !== 'SUMMARY',
          first: controls.length ? window.__a11yDescribe(controls[0]) : ''};
}"""


async def fold_problems(page: Any) -> list[str]:
    """Each closed fold (a `<details>`: a long section's rest, a snippet, a ⋮ menu) opens from the
    keyboard (Enter on its summary) and the next Tab goes into what it shows; closed again after."""
    await page.evaluate(TABBABLE)  # for __a11yDescribe
    problems = []
    for fold in await page.evaluate(FOLDS):
        summary = page.locator(f'details[data-a11y-fold="{fold}"] > summary')
        await summary.focus()
        await page.keyboard.press("Enter")
        opened = await page.evaluate(INSIDE, fold)
        if not opened["open"]:
            problems.append(f"Enter on the fold \"{opened['summary']}\" does not open it")
            continue
        if opened["controls"]:
            await page.keyboard.press("Tab")
            if not (await page.evaluate(INSIDE, fold))["inside"]:
                problems.append(f"Tab after opening the fold \"{opened['summary']}\" does not go into it "
                                f"(its first control: {opened['first']})")
        await page.evaluate("fold => { document.querySelector(`details[data-a11y-fold=\"${fold}\"]`).open = false; }",
                            fold)
    return problems


async def page_problems(page: Any, *, axe: bool = True) -> list[str]:
    """All three checks on the page as it is now (axe-core's can be left out of a second look)."""
    return [*await structure_problems(page), *(await axe_violations(page) if axe else []),
            *await keyboard_problems(page), *await skip_link_problems(page), *await fold_problems(page)]
