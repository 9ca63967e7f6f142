// The chat-bubble Quick Router (seed 004, web/quick_bubble.py). Without this script the bubble and
// the joystick's Quick Router petal are links to /quick, the same form on a page. With it they open
// the panel: a modal <dialog> drawn once from the layout's <template>, focus in the prompt, back on
// the control that opened it when it closes (Escape, the backdrop, the X, a submit). Closing clears
// Run as spot (a choice per submission: a tick left from an hour ago would park the next prompt
// behind the gate) and keeps a half-typed prompt.
(function () {
  "use strict";
  var template = document.getElementById("quick-bubble-template");
  if (!template || !window.HTMLDialogElement) return;
  var dialog = null, opener = null;

  function spot() { return dialog.querySelector("[data-bubble-spot]"); }
  function closed() {
    spot().checked = false;
    if (opener && opener.isConnected) opener.focus();
  }
  function draw() {
    document.body.appendChild(template.content.cloneNode(true));
    dialog = document.getElementById("quick-panel");
    dialog.addEventListener("close", closed);
    dialog.addEventListener("click", function (event) {  // the backdrop: outside the panel's body
      if (event.target === dialog) dialog.close();
    });
    dialog.querySelector("[data-quick-close]").addEventListener("click", function () { dialog.close(); });
    dialog.querySelector("form").addEventListener("submit", function () {
      // The form's entries are taken once this event is over: the tick is sent, then cleared.
      setTimeout(function () { dialog.close(); }, 0);
    });
  }
  function open(event) {
    event.preventDefault();
    if (!dialog) draw();
    opener = event.currentTarget;
    if (!dialog.open) dialog.showModal();
    dialog.querySelector("textarea").focus();
  }
  Array.prototype.forEach.call(document.querySelectorAll("[data-quick-open]"), function (el) {
    el.addEventListener("click", open);
  });
  // A page brought back from the back-forward cache is not a fresh surface: no tick carried over.
  window.addEventListener("pageshow", function (event) {
    if (event.persisted && dialog) { spot().checked = false; if (dialog.open) dialog.close(); }
  });
})();
