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

// A live run's page follows /runs/RUN/events (server-sent events). EventSource reconnects by
// itself after a dropped connection, sending the last event id: the server resumes from there.
(function () {
  "use strict";
  function follow() {
    const part = document.getElementById("live-part");
    const run = document.body.dataset.run;
    if (!part || !run || part.dataset.live !== "1" || !window.EventSource) return;
    const state = document.getElementById("live-state");
    const tokens = document.getElementById("tokens");
    const section = document.getElementById("tokens-section");
    const base = "/runs/" + encodeURIComponent(run);
    const source = new EventSource(base + "/events?from=" + part.dataset.position + "&events_from=0");
    let pending = null;
    function say(text) { if (state) state.textContent = text; }
    function refresh() {
      if (pending) return;
      pending = setTimeout(function () {
        pending = null;
        fetch(base + "?partial=live&from=" + part.dataset.from, { credentials: "same-origin" })
          .then(function (r) { return r.ok ? r.text() : null; })
          .then(function (html) {
            if (html === null) return;
            part.innerHTML = html;  // rendered and escaped by the server: this page's own markup
            part.dispatchEvent(new CustomEvent("actorflow:updated"));
          });
      }, 50);
    }
    source.onopen = function () { say("live"); };
    source.onerror = function () { say("reconnecting…"); };
    source.addEventListener("record", refresh);
    source.addEventListener("checkpoint", refresh);
    source.addEventListener("token", function (event) {
      const data = JSON.parse(event.data);
      if (section) section.hidden = false;
      if (tokens) {
        tokens.append(document.createTextNode(data.text));  // text, never markup
        tokens.scrollTop = tokens.scrollHeight;
      }
    });
    source.addEventListener("status", function (event) {
      const data = JSON.parse(event.data);
      const badge = document.getElementById("run-status");
      if (badge) {
        badge.textContent = data.status;
        badge.className = "status status-" + data.status;
      }
    });
    source.addEventListener("end", function () {
      source.close();
      say("stopped");
      refresh();
      setTimeout(function () { window.location.reload(); }, 400);
    });
    window.actorflowUi = Object.assign(window.actorflowUi || {}, { source: source });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", follow);
  else follow();
})();

// The runs page's rows follow the store: re-read every few seconds while the page is shown.
(function () {
  "use strict";
  const table = document.getElementById("runs");
  if (!table || !table.dataset.refresh) return;
  const body = table.querySelector("tbody");
  setInterval(function () {
    if (document.hidden) return;
    const url = new URL(window.location.href);
    url.searchParams.set("partial", "rows");
    fetch(url, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) { if (html !== null) body.innerHTML = html; });  // the server's own markup
  }, Number(table.dataset.refresh));
})();
