// Zimmer operator pages: the unblock countdown and local times (seed 004, "When the pool comes back").
// The server renders both from the same absolute instants, so the page tells the truth without
// this script; with it, the countdown ticks from the ISO-8601 instant in the markup (never from a
// duration), stops at now and says the reading is stale once the deadline passes, and times are
// rewritten to the reader's clock naming its zone, the UTC reading kept on hover.
(function () {
  "use strict";
  function pad(n) { return String(n).padStart(2, "0"); }
  function clock(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    return (h >= 24 ? Math.floor(h / 24) + "d " + pad(h % 24) : pad(h)) + ":" + pad(m) + ":" + pad(s % 60);
  }
  function tick() {
    document.querySelectorAll("[data-countdown]").forEach(function (el) {
      var left = Date.parse(el.getAttribute("datetime")) - Date.now();
      if (isNaN(left)) { return; }
      el.textContent = clock(left);
      var stale = el.parentElement.querySelector("[data-stale]");
      if (left <= 0 && stale) { stale.hidden = false; }
    });
  }
  // Every <time data-local> (words.time_element) in the reader's zone, named; the UTC reading stays
  // on hover. Idempotent: a time already rewritten is left alone, so a script that adds rows
  // (ranked.js's live pills) may call window.zimmerLocalTimes() again.
  function localTimes() {
    var zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";
    document.querySelectorAll("time[data-local]:not([data-localized])").forEach(function (el) {
      var at = new Date(el.getAttribute("datetime"));
      if (isNaN(at)) { return; }
      if (!el.title) { el.title = el.textContent; }  // the UTC reading, on hover
      el.textContent = at.toLocaleString(undefined, {dateStyle: "medium", timeStyle: "short"}) + " (" + zone + ")";
      el.setAttribute("data-localized", "");
    });
  }
  window.zimmerLocalTimes = localTimes;
  document.addEventListener("DOMContentLoaded", function () {
    localTimes();
    tick();
    setInterval(tick, 1000);
  });
})();
