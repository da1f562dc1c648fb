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

// The live debugger: every event kept (the newest 500), the list showing those that match the
// filters (type, event, user, search); paused, new events wait and the list stays still.
function startLive(list) {
  const detail = document.getElementById("event-detail");
  const status = document.getElementById("live-status");
  const count = document.getElementById("live-count");
  const controls = document.getElementById("live-controls");
  const pause = document.getElementById("live-pause");
  const field = (id) => document.getElementById(id) || { value: "" };
  const keep = 500;
  let events = []; // newest first
  let waiting = []; // arrived while paused, newest first
  let paused = false;
  let live = "Connecting…";

  const user = (ev) => {
    const m = ev.message && typeof ev.message === "object" ? ev.message : {};
    return String(m.userId || m.anonymousId || "");
  };
  const name = (ev) => {
    const m = ev.message && typeof ev.message === "object" ? ev.message : {};
    return String(m.event || m.name || "");
  };
  const matches = (ev) => {
    const type = field("live-type").value;
    if (type === "rejected" ? ev.status !== "rejected" : type && ev.type !== type) return false;
    const event = field("live-event").value.trim().toLowerCase();
    if (event && !name(ev).toLowerCase().includes(event)) return false;
    const u = field("live-user").value.trim();
    if (u && !user(ev).includes(u)) return false;
    const q = field("live-search").value.trim().toLowerCase();
    if (q && !JSON.stringify(ev.message === undefined ? "" : ev.message).toLowerCase().includes(q)) return false;
    return true;
  };
  const row = (ev) => {
    const li = document.createElement("li");
    const b = document.createElement("button");
    b.type = "button";
    const badge = document.createElement("span");
    badge.className = "badge " + (ev.status === "rejected" ? "bad" : "ok");
    badge.textContent = ev.status;
    const what = document.createElement("span");
    what.textContent = ((ev.type || "") + " " + name(ev)).trim() || "(not JSON)";
    const who = document.createElement("span");
    who.className = "live-user";
    who.textContent = user(ev) ? "user " + user(ev) : "no user";
    const when = document.createElement("span");
    when.className = "muted when";
    when.textContent = new Date(ev.receivedAt).toISOString().replace("T", " ").slice(0, 19) + " UTC";
    b.append(badge, what, who, when);
    if (ev.reason) { const r = document.createElement("span"); r.className = "error"; r.textContent = ev.reason; b.append(r); }
    b.addEventListener("click", () => {
      detail.textContent = JSON.stringify(ev.message, null, 2);
      detail.dataset.id = ev.id;
      detail.hidden = false;
      detail.focus();
    });
    li.dataset.id = ev.id;
    li.append(b);
    return li;
  };
  const say = () => {
    const shown = list.querySelectorAll("li[data-id]").length;
    let text = shown === events.length ? "" : `${shown} of ${events.length} events match the filters.`;
    if (paused) text = `Paused: ${waiting.length} new ${waiting.length === 1 ? "event waits" : "events wait"}. ` + text;
    count.textContent = text;
    status.textContent = paused ? "Paused." : live;
  };
  const render = () => {
    list.replaceChildren(...events.filter(matches).slice(0, 200).map(row));
    if (!list.children.length) {
      const li = document.createElement("li");
      li.className = "empty";
      li.textContent = events.length ? "No event matches the filters." : "No event yet.";
      list.append(li);
    }
    say();
  };
  const show = (ev) => {
    if (paused) { waiting.unshift(ev); say(); return; }
    events.unshift(ev);
    if (events.length > keep) events.length = keep;
    const empty = list.querySelector("li.empty");
    if (matches(ev)) {
      if (empty) empty.remove();
      list.prepend(row(ev));
      while (list.children.length > 200) list.lastChild.remove();
    }
    say();
  };
  for (const s of document.querySelectorAll("script[type='application/json'].recent-event")) {
    try { show(JSON.parse(s.textContent)); } catch (e) { /* ignore */ }
  }
  if (controls) {
    controls.hidden = false;
    controls.addEventListener("submit", (ev) => ev.preventDefault());
    controls.addEventListener("input", render);
    controls.addEventListener("change", render);
  }
  if (pause) {
    pause.addEventListener("click", () => {
      paused = !paused;
      pause.textContent = paused ? "Resume" : "Pause";
      pause.setAttribute("aria-pressed", String(paused));
      if (!paused) {
        events = waiting.concat(events).slice(0, keep);
        waiting = [];
        render();
      } else say();
    });
  }
  const es = new EventSource(list.dataset.stream);
  es.addEventListener("open", () => { live = "Live: new events appear at the top."; say(); });
  es.addEventListener("error", () => { if (es.readyState !== EventSource.CLOSED) { live = "Reconnecting…"; say(); } });
  // Beyond the console's stream limits (docs/console.md#live-stream-limits) the stream is one
  // "refused" event: show why and stop reconnecting.
  es.addEventListener("refused", (m) => {
    es.close();
    let msg = "The console refused the live stream.";
    try { msg = JSON.parse(m.data).message || msg; } catch (e) { /* keep the default */ }
    live = "Not live: " + msg + " Reload the page to try again.";
    status.className = "error";
    say();
  });
  for (const kind of ["accepted", "rejected"]) {
    es.addEventListener(kind, (m) => { try { show(JSON.parse(m.data)); } catch (e) { /* ignore */ } });
  }
  // An event of a user the console forgot (docs/console.md#what-the-console-forgets) leaves the
  // list, and the detail if it is shown.
  es.addEventListener("forgotten", (m) => {
    let id;
    try { id = String(JSON.parse(m.data).id); } catch (e) { return; }
    events = events.filter((ev) => String(ev.id) !== id);
    waiting = waiting.filter((ev) => String(ev.id) !== id);
    for (const li of list.querySelectorAll("li")) if (li.dataset.id === id) li.remove();
    if (detail.dataset.id === id) { detail.textContent = ""; detail.hidden = true; delete detail.dataset.id; }
    say();
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
