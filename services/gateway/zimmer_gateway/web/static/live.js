// Live pages (issue 32 #1, docs/pages.md "Live pages"). A page whose <main> carries data-live
// listens to GET /live?page=<family> (server-sent events fed from JetStream by the gateway). On
// "changed" it re-fetches itself and merges the fresh <main> into the open one: what differs is
// updated in place, rows (keyed by id, data-session or data-key) are moved, added and removed, and
// nothing that holds focus or an edited field is replaced, moved or reset; the notices scripts
// own are kept, and a chart is replaced (charts.js draws it again) only when its data changed.
// "As of" is part of <main>, so it follows each refresh. While the stream is down (or the gateway
// says its feed is), the "Live updates paused" banner shows; when it is back the page re-fetches
// and the banner goes. Without this script the page is an ordinary page.
// A session's page names its session and the sessions its hierarchy panel shows
// ([data-live-session], [data-live-shown]) in the stream's address, so only their events wake it;
// when a refresh changes what it shows (a child came), it listens again under the new address.
(function () {
  "use strict";
  var main = document.querySelector("main[data-live]");
  if (!main || !window.EventSource) return;
  var banner = document.querySelector("[data-live-paused]");
  var KEEP = "[data-toast], [data-refused], [data-live-keep]";
  var CHART = "figure[data-chart]";
  var CONTROLS = { INPUT: 1, TEXTAREA: 1, SELECT: 1, BUTTON: 1 };
  var SPACING_MS = 250;
  var inFlight = null, again = false, everLive = false, source = null, listening = null;

  function address() {
    var url = "/live?page=" + encodeURIComponent(main.dataset.live);
    var scope = main.querySelector("[data-live-session]");
    if (scope) {
      url += "&session=" + encodeURIComponent(scope.dataset.liveSession) +
        "&shown=" + encodeURIComponent(scope.dataset.liveShown || "");
    }
    return url;
  }

  function edited(el) {
    if (el.nodeName === "SELECT") {
      return Array.prototype.some.call(el.options, function (o) { return o.selected !== o.defaultSelected; });
    }
    if (el.type === "checkbox" || el.type === "radio") return el.checked !== el.defaultChecked;
    return el.nodeName !== "BUTTON" && el.value !== el.defaultValue;
  }
  // The elements to leave as they are (the focused one, every edited field) and their ancestors
  // (never replaced or moved, only merged into).
  function guarded(root) {
    var set = new Set();
    var held = Array.prototype.filter.call(root.querySelectorAll("input, textarea, select"), edited);
    if (document.activeElement && document.activeElement !== document.body && root.contains(document.activeElement)) {
      held.push(document.activeElement);
    }
    held.forEach(function (el) { for (var n = el; n && n !== root; n = n.parentNode) set.add(n); });
    set.add(root);
    return set;
  }
  function spec(figure) {
    var s = figure.querySelector("[data-chart-spec]");
    return s ? s.textContent : "";
  }
  function key(n) {
    if (n.nodeType !== 1) return null;
    if (n.id) return "#" + n.id;
    if (n.dataset.session) return "s" + n.dataset.session;
    if (n.dataset.key) return "k" + n.dataset.key;
    return null;
  }
  function syncAttributes(old, neu) {
    Array.prototype.slice.call(old.attributes).forEach(function (a) {
      if (!neu.hasAttribute(a.name) && !(a.name === "open" && old.nodeName === "DETAILS")) old.removeAttribute(a.name);
    });
    Array.prototype.forEach.call(neu.attributes, function (a) {
      if (a.name === "open" && old.nodeName === "DETAILS") return;  // the reader opened or closed it
      if (old.getAttribute(a.name) !== a.value) old.setAttribute(a.name, a.value);
    });
  }
  function morph(old, neu, guard) {
    if (old.nodeType !== neu.nodeType || old.nodeName !== neu.nodeName) {
      if (!guard.has(old)) old.replaceWith(neu);
      return;
    }
    if (old.nodeType !== 1) {
      if (old.nodeValue !== neu.nodeValue) old.nodeValue = neu.nodeValue;
      return;
    }
    if (old.matches(CHART)) {  // redrawn (charts.js) only when its data changed
      if (!guard.has(old) && spec(old) !== spec(neu)) old.replaceWith(neu);
      return;
    }
    if (old.matches(KEEP) || (guard.has(old) && CONTROLS[old.nodeName])) return;
    // A moment already shown in local time (clock.js), or a ticking countdown, for the same instant.
    if (old.hasAttribute("datetime") && old.getAttribute("datetime") === neu.getAttribute("datetime")) return;
    syncAttributes(old, neu);
    if (old.nodeName === "TEXTAREA") { old.defaultValue = neu.defaultValue; old.value = neu.defaultValue; return; }
    morphChildren(old, neu, guard);
    if (old.nodeName === "INPUT") {
      if (old.type === "checkbox" || old.type === "radio") old.checked = old.defaultChecked;
      else old.value = old.defaultValue;
    } else if (old.nodeName === "SELECT") {
      Array.prototype.forEach.call(old.options, function (o) { o.selected = o.defaultSelected; });
    }
  }
  function morphChildren(old, neu, guard) {
    var byKey = new Map(), used = new Set();
    Array.prototype.forEach.call(old.childNodes, function (c) { var k = key(c); if (k) byKey.set(k, c); });
    var cursor = old.firstChild;
    Array.prototype.slice.call(neu.childNodes).forEach(function (n) {
      var k = key(n), match = null;
      if (k) { match = byKey.get(k) || null; if (match && used.has(match)) match = null; }
      else if (cursor && !key(cursor) && sameKind(cursor, n)) match = cursor;
      if (!match) { old.insertBefore(n, cursor); used.add(n); return; }
      used.add(match);
      if (match === cursor) cursor = cursor.nextSibling;
      else if (guard.has(match)) cursor = match.nextSibling;  // a focused row is never moved
      else old.insertBefore(match, cursor);
      morph(match, n, guard);
    });
    Array.prototype.slice.call(old.childNodes).forEach(function (c) {
      if (used.has(c) || guard.has(c) || (c.nodeType === 1 && c.matches(KEEP))) return;
      c.remove();
    });
  }
  function sameKind(a, b) {
    return a.nodeName === b.nodeName && (a.nodeType !== 1 || a.matches(KEEP) === b.matches(KEEP));
  }

  function refresh() {
    if (inFlight) { again = true; return inFlight; }
    inFlight = fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html", "X-Zimmer-Live": "1" }, cache: "no-store" })
      .then(function (r) {
        if (!r.ok || r.redirected) return;
        return r.text().then(function (html) {
          var doc = new DOMParser().parseFromString(html, "text/html");
          var fresh = doc.querySelector("main[data-live]");
          if (!fresh) return;
          morph(main, document.adoptNode(fresh), guarded(main));
          // The queue-recovery banner sits above <main>: shown, changed or gone with the page.
          var was = document.querySelector("[data-queue-recovery]"), now = doc.querySelector("[data-queue-recovery]");
          if (was && now) morph(was, document.adoptNode(now), new Set());
          else if (now) document.querySelector("header").after(document.adoptNode(now));
          else if (was) was.remove();
          if (window.zimmerLocalTimes) window.zimmerLocalTimes();
          if (source && address() !== listening) { source.close(); connect(); }  // what it shows changed
          document.dispatchEvent(new CustomEvent("zimmer:live-updated"));
        });
      })
      .catch(function () { /* the next notice tries again */ })
      .then(function () {  // a burst of notices is one more re-fetch, a quarter second after this one
        return new Promise(function (done) { window.setTimeout(done, again ? SPACING_MS : 0); });
      })
      .then(function () {
        inFlight = null;
        if (again) { again = false; return refresh(); }
      });
    return inFlight;
  }

  function paused(on) {
    if (banner) banner.hidden = !on;
    document.documentElement.dataset.liveState = on ? "paused" : "live";
  }
  function connect() {
    listening = address();
    source = new EventSource(listening);
    source.addEventListener("changed", refresh);
    source.addEventListener("live", function () {
      var wasPaused = banner && !banner.hidden;
      paused(false);
      if (everLive || wasPaused) refresh();  // what changed while it was down
      everLive = true;
    });
    source.addEventListener("paused", function () { paused(true); });
    source.onerror = function () {
      paused(true);
      if (source.readyState === EventSource.CLOSED) {  // refused (signed out?): try again later
        source = null;
        window.setTimeout(connect, 5000);
      }
    };
  }
  connect();
  window.addEventListener("pagehide", function () { if (source) source.close(); });
  window.zimmerLive = { refresh: refresh };
})();
