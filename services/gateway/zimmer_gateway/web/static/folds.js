// Folded panels (issue 32 #6; templates/panel.html `fold`). The server sends every long panel open
// (a wide screen never waits on this script to show a table: a CI run once read a closed one at
// 1280 px); on a screen 640 px wide or less this folds the ok ones, so only a phone reads the page
// folded. A link to a panel (the Health index, the skip link, a fragment in the address) opens
// the panel it goes to. A panel the reader opened or closed stays as they left it: live updates
// (live.js keeps a details' open attribute and says "zimmer:live-updated") re-apply the rule only to
// the panels nobody touched, so one that turns not ok opens by itself. Without script the details are
// native and open.
(function () {
  "use strict";
  var FOLD = "details[data-panel-fold]";
  var wide = window.matchMedia("(min-width: 641px)");

  function set(d, open) {
    d.zimmerOpen = open;  // what this script last set: a toggle to anything else is the reader's
    if (d.open !== open) d.open = open;
  }
  function apply() {
    document.querySelectorAll(FOLD).forEach(function (d) {
      if (d.zimmerToggled) return;
      set(d, d.dataset.foldVerdict !== "ok" || wide.matches);
    });
  }
  function openTarget() {
    var id = window.location.hash.slice(1);
    var target = id && document.getElementById(decodeURIComponent(id));
    if (!target) return;
    var d = target.matches(FOLD) ? target : (target.querySelector(FOLD) || target.closest(FOLD));
    if (d && !d.open) { d.zimmerToggled = true; set(d, true); }
  }
  document.addEventListener("toggle", function (e) {
    var d = e.target;
    if (d.matches && d.matches(FOLD) && d.open !== d.zimmerOpen) { d.zimmerToggled = true; d.zimmerOpen = d.open; }
  }, true);
  document.addEventListener("click", function (e) {  // the same fragment again: no hashchange
    var a = e.target.closest && e.target.closest('a[href^="#"]');
    if (a && a.getAttribute("href") === window.location.hash) openTarget();
  });
  window.addEventListener("hashchange", openTarget);
  wide.addEventListener("change", apply);
  document.addEventListener("zimmer:live-updated", apply);
  apply();
  openTarget();
  window.zimmerFolds = { apply: apply };
})();
