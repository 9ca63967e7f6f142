// The Ranked page in place (seed 004 "The Ranked view"): every write is optimistic, the server's
// answer corrects the numbers, and a refused write reloads (the server's order is the only one that
// counts) and then says why. The page follows the server live (live.js: pills, order, rows), never
// touching a row that holds focus or an unsaved edit. One ⋮ menu is open at a time
// (Escape or a click outside closes it); Promote asks first on a touch screen; a row's handle moves
// it with the arrow keys as a drag does. Without this script every control is a form.
(function () {
  "use strict";
  const lists = Array.from(document.querySelectorAll("ol.ranked"));
  if (!lists.length) return;
  const csrf = lists[0].dataset.csrf;
  const toast = document.querySelector("[data-toast]");
  const REFUSED = "zimmer-ranked-refused";

  async function post(url, fields) {
    const body = new URLSearchParams({ csrf, ...fields });
    const r = await fetch(url, { method: "POST", body, headers: { Accept: "application/json" }, credentials: "same-origin" });
    if (!r.ok) {
      let reason = `The server answered ${r.status}.`;
      try { reason = (await r.json()).error || reason; } catch (e) { /* not JSON: the status says enough */ }
      throw new Error(reason);
    }
    if (!(r.headers.get("content-type") || "").includes("application/json")) {
      throw new Error("The answer was a page, not this page's answer: the sign-in may have expired.");
    }
    return r.json();
  }

  function rowOf(id) { return document.querySelector(`li[data-session="${id}"]`); }

  function setPrecedence(view) {
    const row = rowOf(view.id);
    if (!row) return;
    row.dataset.precedence = view.precedence;
    const input = row.querySelector("[data-precedence-input]");
    if (input && document.activeElement !== input) { input.value = view.precedence; input.defaultValue = String(view.precedence); }
  }

  function renumber() {
    for (const list of lists) {
      Array.from(list.children).forEach((row, i) => { const rank = row.querySelector("[data-rank]"); if (rank) rank.textContent = i + 1; });
      const empty = list.parentElement.querySelector("[data-empty]");
      if (empty) empty.hidden = list.children.length > 0;
      const count = list.parentElement.querySelector("[data-count]");
      if (count) count.textContent = list.children.length;
    }
  }

  function placeByPrecedence(row) {  // the row moves to where its number puts it (ties: it goes last among equals)
    const list = row.parentElement;
    const value = Number(row.dataset.precedence);
    const after = Array.from(list.children).find((r) => r !== row && Number(r.dataset.precedence) < value);
    list.insertBefore(row, after || null);
    renumber();
  }

  // A refused write: reload the server's order, and say why on the reloaded page (never silently).
  function rollback(error) {
    try { window.sessionStorage.setItem(REFUSED, (error && error.message) || "The change was refused."); } catch (e) { /* storage off */ }
    window.location.reload();
  }
  (function sayWhyTheLastWriteWasRefused() {
    let reason = null;
    try { reason = window.sessionStorage.getItem(REFUSED); window.sessionStorage.removeItem(REFUSED); } catch (e) { return; }
    const alert = document.querySelector("[data-refused]");
    if (!reason || !alert) return;
    alert.textContent = `Not done: ${reason} The page shows the server's order again.`;
    alert.hidden = false;
  })();

  // Every handler below listens on the document (event delegation), never on a row: a row the
  // live update inserted (live.js) behaves exactly as one the page loaded with.
  function within(event, selector) {
    return event.target instanceof Element ? event.target.closest(selector) : null;
  }

  // Enter in a precedence field saves it and moves the row now.
  async function savePrecedence(form) {
    const row = form.closest("li");
    const input = form.querySelector("[data-precedence-input]");
    row.dataset.precedence = input.value;
    placeByPrecedence(row);
    try {
      const answer = await post(form.action, { precedence: input.value });
      input.defaultValue = String(answer.session.precedence);
      setPrecedence(answer.session);
    } catch (e) { rollback(e); }
  }

  // A row moved between two others (a drag, or its handle's arrow keys): it takes their midpoint,
  // or they are nudged one apart.
  async function moved(row) {
    const above = row.previousElementSibling, below = row.nextElementSibling;
    renumber();
    try {
      const answer = await post(`/ranked/${row.dataset.session}/reorder`, {
        above: above ? above.dataset.session : "", below: below ? below.dataset.session : "" });
      setPrecedence(answer.session);
      answer.nudged.forEach(setPrecedence);
    } catch (e) { rollback(e); }
  }
  if (window.Sortable) {  // Sortable listens on the list and finds the handle when a drag starts
    for (const list of lists) {
      window.Sortable.create(list, {
        handle: ".handle", forceFallback: true, animation: 100,
        onEnd: async (event) => { if (event.oldIndex !== event.newIndex) await moved(event.item); },
      });
    }
  }
  async function keyMove(handle, event) {
    if (event.key !== "ArrowUp" && event.key !== "ArrowDown") return;
    event.preventDefault();
    const row = handle.closest("li");
    const sibling = event.key === "ArrowUp" ? row.previousElementSibling : row.nextElementSibling;
    if (!sibling) return;
    row.parentElement.insertBefore(row, event.key === "ArrowUp" ? sibling : sibling.nextElementSibling);
    handle.focus();
    await moved(row);
  }

  // One ⋮ menu at a time; Escape or a click outside closes it (an open menu on a phone covered the
  // next row, where a mis-tap promoted and started a session). The menus are looked up when asked:
  // the live update adds and removes rows.
  function menus() { return Array.from(document.querySelectorAll("ol.ranked details.menu")); }
  document.addEventListener("toggle", (event) => {  // toggle does not bubble: heard while it is captured
    const menu = event.target;
    if (!(menu instanceof HTMLDetailsElement) || !menu.matches("ol.ranked details.menu") || !menu.open) return;
    menus().forEach((other) => { if (other !== menu) other.open = false; });
  }, true);
  document.addEventListener("keydown", (event) => {
    const handle = within(event, "ol.ranked .handle");
    if (handle) { keyMove(handle, event); return; }
    const open = menus().find((menu) => menu.open);
    if (event.key !== "Escape" || !open) return;
    open.open = false;
    open.querySelector("summary").focus();
  });
  document.addEventListener("click", (event) => {
    menus().forEach((menu) => { if (menu.open && !menu.contains(event.target)) menu.open = false; });
  });

  // Promote starts the session: on a touch screen it asks first.
  function confirmPromote(form, event) {
    const id = form.closest("li").dataset.session;
    if (window.matchMedia("(pointer: coarse)").matches
        && !window.confirm(`Promote session ${id} to priority and start it now?`)) event.preventDefault();
  }

  // Trash with a speed bump and an Undo toast.
  async function trash(form) {
    const row = form.closest("li");
    const id = row.dataset.session;
    if (!window.confirm(`Trash session ${id}? It is archived and leaves the queue.`)) return;
    try {
      await post(form.action, {});
    } catch (e) { rollback(e); return; }
    const list = row.parentElement, next = row.nextElementSibling;
    row.remove();
    renumber();
    toast.querySelector("[data-toast-text]").textContent = `Trashed session ${id}.`;
    toast.hidden = false;
    toast.querySelector("[data-undo]").onclick = async () => {
      try { await post(`/ranked/${id}/untrash`, {}); } catch (e) { rollback(e); return; }
      list.insertBefore(row, next);
      renumber();
      toast.hidden = true;
    };
  }

  document.addEventListener("submit", (event) => {
    const form = within(event, "ol.ranked form");
    if (!form) return;
    if (form.matches("[data-precedence-form]")) { event.preventDefault(); savePrecedence(form); }
    else if (form.matches("[data-promote]")) confirmPromote(form, event);
    else if (form.matches("[data-trash]")) { event.preventDefault(); trash(form); }
  });

  // Live: the page follows the server over its event stream (live.js), rows and pills merged in
  // place, a focused row or an unsaved edit left alone. No polling. A test may ask for a refresh now.
  window.rankedRefresh = function () { return window.zimmerLive ? window.zimmerLive.refresh() : Promise.resolve(); };
})();
