// Tributary console: the little the pages do live. No framework; CSP allows this file only.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  // Copy buttons: data-copy names the element whose text is copied.
  for (const b of document.querySelectorAll("button[data-copy]")) {
    b.addEventListener("click", async () => {
      const el = document.getElementById(b.dataset.copy);
      if (!el) return;
      try {
        await navigator.clipboard.writeText(el.textContent.trim());
        b.textContent = "Copied";
      } catch (e) {
        const r = document.createRange(); r.selectNodeContents(el);
        const s = window.getSelection(); s.removeAllRanges(); s.addRange(r);
        b.textContent = "Selected: press Ctrl+C";
      }
    });
  }

  // Confirm buttons: data-confirm asks before the form is sent.
  for (const f of document.querySelectorAll("form[data-confirm]")) {
    f.addEventListener("submit", (ev) => { if (!window.confirm(f.dataset.confirm)) ev.preventDefault(); });
  }

  // Select-all checkboxes: data-select-all names the checkboxes' name.
  for (const all of document.querySelectorAll("input[data-select-all]")) {
    all.addEventListener("change", () => {
      for (const c of document.querySelectorAll(`input[name="${all.dataset.selectAll}"]`)) c.checked = all.checked;
    });
  }

  // The live debugger: a list fed by the page's Server-Sent Events stream.
  const live = document.getElementById("live-events");
  if (live) startLive(live);

  // Auto-refresh: data-refresh (seconds) reloads a page that waits for something (a regulation).
  const refresh = document.querySelector("[data-refresh]");
  if (refresh) setTimeout(() => window.location.reload(), 1000 * Number(refresh.dataset.refresh));

  // Member-count preview: a form with data-preview posts its rule and shows the count.
  for (const f of document.querySelectorAll("form[data-preview]")) startPreview(f);
});

function startLive(list) {
  const detail = document.getElementById("event-detail");
  const status = document.getElementById("live-status");
  const show = (ev) => {
    const li = document.createElement("li");
    const b = document.createElement("button");
    b.type = "button";
    const badge = document.createElement("span");
    badge.className = "badge " + (ev.status === "rejected" ? "bad" : "ok");
    badge.textContent = ev.status;
    const what = document.createElement("span");
    let name = ev.type || "";
    if (ev.message && typeof ev.message === "object") name += " " + (ev.message.event || ev.message.name || "");
    what.textContent = name.trim() || "(not JSON)";
    const when = document.createElement("span");
    when.className = "muted";
    when.textContent = new Date(ev.receivedAt).toLocaleTimeString();
    b.append(badge, what, when);
    if (ev.reason) { const r = document.createElement("span"); r.className = "error"; r.textContent = ev.reason; b.append(r); }
    b.addEventListener("click", () => {
      detail.textContent = JSON.stringify(ev.message, null, 2);
      detail.dataset.id = ev.id;
      detail.hidden = false;
      detail.focus();
    });
    li.dataset.id = ev.id;
    li.append(b);
    list.prepend(li);
    while (list.children.length > 200) list.lastChild.remove();
    const empty = document.getElementById("live-empty");
    if (empty) empty.remove();
  };
  for (const s of document.querySelectorAll("script[type='application/json'].recent-event")) {
    try { show(JSON.parse(s.textContent)); } catch (e) { /* ignore */ }
  }
  const es = new EventSource(list.dataset.stream);
  es.addEventListener("open", () => { status.textContent = "Live: new events appear at the top."; });
  es.addEventListener("error", () => { if (es.readyState !== EventSource.CLOSED) status.textContent = "Reconnecting…"; });
  // Beyond the console's stream limits (docs/console.md#live-stream-limits) the stream is one
  // "refused" event: show why and stop reconnecting.
  es.addEventListener("refused", (m) => {
    es.close();
    let msg = "The console refused the live stream.";
    try { msg = JSON.parse(m.data).message || msg; } catch (e) { /* keep the default */ }
    status.textContent = "Not live: " + msg + " Reload the page to try again.";
    status.className = "error";
  });
  for (const kind of ["accepted", "rejected"]) {
    es.addEventListener(kind, (m) => { try { show(JSON.parse(m.data)); } catch (e) { /* ignore */ } });
  }
  // An event of a user the console forgot (docs/console.md#what-the-console-forgets) leaves the
  // list, and the detail if it is shown.
  es.addEventListener("forgotten", (m) => {
    let id;
    try { id = String(JSON.parse(m.data).id); } catch (e) { return; }
    for (const li of list.querySelectorAll("li")) if (li.dataset.id === id) li.remove();
    if (detail.dataset.id === id) { detail.textContent = ""; detail.hidden = true; delete detail.dataset.id; }
  });
}

function startPreview(form) {
  const out = document.getElementById(form.dataset.preview);
  let timer;
  const run = async () => {
    // URL-encoded, as the form itself posts (the server reads no multipart bodies).
    const body = new URLSearchParams(new FormData(form));
    body.set("preview", "1");
    try {
      const res = await fetch(form.dataset.previewUrl, { method: "POST", body, credentials: "same-origin" });
      out.textContent = await res.text();
    } catch (e) { out.textContent = "Preview unavailable."; }
  };
  form.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(run, 400); });
  run();
}
