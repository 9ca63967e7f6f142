// The Ranked page in place (seed 004 "The Ranked view"): every write is optimistic, the server's
// answer corrects the numbers, and a refused write reloads (the server's order is the only one that
// counts). Status pills update live without re-sorting, re-grouping or inserting rows, and never
// touch a row that holds focus or an unsaved edit. Without this script every control is a form.
(function () {
  "use strict";
  const lists = Array.from(document.querySelectorAll("ol.ranked"));
  if (!lists.length) return;
  const csrf = lists[0].dataset.csrf;
  const toast = document.querySelector("[data-toast]");

  async function post(url, fields) {
    const body = new URLSearchParams({ csrf, ...fields });
    const r = await fetch(url, { method: "POST", body, headers: { Accept: "application/json" }, credentials: "same-origin" });
    if (!r.ok) throw new Error(`${url}: ${r.status}`);
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

  function rollback() { window.location.reload(); }

  // Enter in a precedence field saves it and moves the row now.
  document.querySelectorAll("[data-precedence-form]").forEach((form) => {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const row = form.closest("li");
      const input = form.querySelector("[data-precedence-input]");
      row.dataset.precedence = input.value;
      placeByPrecedence(row);
      try {
        const answer = await post(form.action, { precedence: input.value });
        input.defaultValue = String(answer.session.precedence);
        setPrecedence(answer.session);
      } catch (e) { rollback(); }
    });
  });

  // Drag a row between two others: it takes their midpoint, or they are nudged one apart.
  if (window.Sortable) {
    for (const list of lists) {
      window.Sortable.create(list, {
        handle: ".handle", forceFallback: true, animation: 100,
        onEnd: async (event) => {
          if (event.oldIndex === event.newIndex) return;
          const row = event.item;
          const above = row.previousElementSibling, below = row.nextElementSibling;
          renumber();
          try {
            const answer = await post(`/ranked/${row.dataset.session}/reorder`, {
              above: above ? above.dataset.session : "", below: below ? below.dataset.session : "" });
            setPrecedence(answer.session);
            answer.nudged.forEach(setPrecedence);
          } catch (e) { rollback(); }
        },
      });
    }
  }

  // Trash with a speed bump and an Undo toast.
  document.querySelectorAll("form[data-trash]").forEach((form) => {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const row = form.closest("li");
      const id = row.dataset.session;
      if (!window.confirm(`Trash session ${id}? It is archived and leaves the queue.`)) return;
      try {
        await post(form.action, {});
      } catch (e) { rollback(); return; }
      const list = row.parentElement, next = row.nextElementSibling;
      row.remove();
      renumber();
      toast.querySelector("[data-toast-text]").textContent = `Trashed session ${id}.`;
      toast.hidden = false;
      toast.querySelector("[data-undo]").onclick = async () => {
        try { await post(`/ranked/${id}/untrash`, {}); } catch (e) { rollback(); return; }
        list.insertBefore(row, next);
        renumber();
        toast.hidden = true;
      };
    });
  });

  // Live status pills: never re-sort, re-group or insert; skip a row with focus or an unsaved edit.
  function busy(row) {
    const input = row.querySelector("[data-precedence-input]");
    return row.contains(document.activeElement) || (input && input.value !== input.defaultValue);
  }
  async function refresh() {
    const rows = Array.from(document.querySelectorAll("li[data-session]"));
    if (!rows.length) return;
    try {
      const r = await fetch(`/ranked/statuses?ids=${rows.map((x) => x.dataset.session).join(",")}`,
                            { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (!r.ok) return;
      const statuses = await r.json();
      for (const row of rows) {
        const status = statuses[row.dataset.session];
        if (status && !busy(row)) row.querySelector("[data-status]").textContent = status;
      }
    } catch (e) { /* the next tick tries again */ }
  }
  const every = Number(document.body.dataset.rankedRefreshMs || 5000);
  window.setInterval(refresh, every);
  window.rankedRefresh = refresh;  // for a test to call now rather than wait
})();
