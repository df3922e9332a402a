// actorflow ui: small helpers over server-rendered pages. No framework, no network beyond this server.
"use strict";
(function () {
  // Clicking a step on the timeline or in the steps table shows its record without leaving the page.
  function showRecord(link, event) {
    const panel = document.getElementById("record");
    const position = link.dataset.position;
    const run = document.body.dataset.run;
    if (!panel || position === undefined || !run) return;
    event.preventDefault();
    fetch("/runs/" + encodeURIComponent(run) + "/records/" + position + "?partial=1", { credentials: "same-origin" })
      .then(function (r) { return r.text().then(function (t) { return [r.ok, t]; }); })
      .then(function (res) {
        // the server renders the panel (escaped); it is this page's own markup
        panel.innerHTML = res[1];
        document.querySelectorAll(".bar.on").forEach(function (b) { b.classList.remove("on"); });
        document.querySelectorAll('.bar[data-position="' + position + '"]').forEach(function (b) { b.classList.add("on"); });
        history.replaceState(null, "", link.getAttribute("href"));
        panel.scrollIntoView({ block: "nearest" });
      });
  }
  document.addEventListener("click", function (event) {
    const link = event.target.closest("a.bar[data-position], a.step-link[data-position]");
    if (link) showRecord(link, event);
  });
  window.actorflowUi = { showRecord: showRecord };
})();
