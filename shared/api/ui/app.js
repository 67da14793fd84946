// mirrorfleet status page: polls the read API and redraws. No framework, no build step.
// Data is only ever inserted as text (textContent), never as HTML: repo URLs and worker
// ids come from outside.
"use strict";

const params = new URLSearchParams(location.search);
// ?refresh=N sets the poll period in seconds (tests use 1).
const REFRESH_S = Math.min(60, Math.max(1, Number(params.get("refresh")) || 5));
const SVG = "http://www.w3.org/2000/svg";
const $ = (sel) => document.querySelector(sel);

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : String(k));
  return e;
}

function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

// Colours follow the worker's slot, so a worker keeps its colour across refreshes and in
// both the ring and the table: a categorical palette first (no pure red or green, which
// the page uses for health), then golden-angle hues.
const PALETTE = ["#4e79a7", "#f28e2b", "#76b7b2", "#b07aa1", "#edc948", "#9c755f", "#ff9da7", "#59a14f", "#bab0ac", "#e15759"];
const colourCache = new Map();
function colour(id, slot) {
  if (!colourCache.has(id)) {
    const n = Number.isInteger(slot) ? slot : colourCache.size;
    colourCache.set(id, n < PALETTE.length ? PALETTE[n] : `hsl(${(n * 137.508) % 360} 55% 55%)`);
  }
  return colourCache.get(id);
}

// States in lifecycle order; any state the page does not know yet goes last.
const REPO_STATES = ["pending", "cloning", "ok", "failing", "gone", "overflow", "deleting"];
const WORKER_STATES = ["joining", "active", "suspect", "draining", "dead"];
function ordered(byState, order) {
  const rank = (s) => (order.includes(s) ? order.indexOf(s) : order.length);
  return Object.entries(byState).sort((a, b) => rank(a[0]) - rank(b[0]) || a[0].localeCompare(b[0]));
}

function fmtAge(s) {
  if (s == null) return "never";
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${Math.floor(s % 60)}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

function fmtBytes(n) {
  const u = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${u[i]}`;
}

function fmtTime(t) { return t ? new Date(t).toLocaleString() : "never"; }

function badge(state) { return el("span", { class: `badge s-${state}` }, state); }

// ---- fetching ----

class HTTPError extends Error {
  constructor(status, body) {
    super((body && body.error && body.error.message) || `HTTP ${status}`);
    this.status = status;
  }
}

async function getJSON(path) {
  const headers = { Accept: "application/json" };
  const tok = sessionStorage.getItem("mirrorfleet-token");
  if (tok) headers.Authorization = `Bearer ${tok}`;
  const resp = await fetch(path, { headers, cache: "no-store" });
  let body = null;
  try { body = await resp.json(); } catch (_) { /* not JSON: reported by status */ }
  if (!resp.ok) throw new HTTPError(resp.status, body);
  return body;
}

// ---- rendering ----

function renderCounts(ul, byState, order) {
  ul.replaceChildren(...ordered(byState, order).map(([st, n]) =>
    el("li", { class: n ? "" : "zero", "data-state": st }, badge(st), el("b", {}, n))));
}

function renderStatus(st) {
  $("#repos-total").textContent = st.repos_total;
  renderCounts($("#repo-counts"), st.repos_by_state, REPO_STATES);
  $("#workers-total").textContent = Object.values(st.workers_by_state).reduce((a, b) => a + b, 0);
  renderCounts($("#worker-counts"), st.workers_by_state, WORKER_STATES);
  const l = st.leader;
  $("#leader").textContent = l
    ? `leader: ${l.id} · term ${l.term} · lease until ${fmtTime(l.lease_until)} · ring v${st.ring_version}`
    : "leader: none yet (no coordinator has campaigned)";
  $("#stalest tbody").replaceChildren(...(st.stalest.length ? st.stalest.map((r) => el("tr", {},
    el("td", { class: "url" }, r.url),
    el("td", {}, badge(r.state)),
    el("td", {}, r.owner || "—"),
    el("td", {}, fmtTime(r.last_success_at)),
    el("td", {}, fmtAge(r.age_seconds)),
    el("td", { class: "wrap", title: r.last_error }, r.last_error ? r.last_error.split(":")[0] : "—"))) :
    [el("tr", {}, el("td", { colspan: 6, class: "muted" }, "no repos"))]));
}

// CLONES_SHOWN repos are listed with their clone URL; /git/ lists them all.
const CLONES_SHOWN = 20;

// copyButton copies text to the clipboard and says so on the button.
function copyButton(text) {
  const b = el("button", { type: "button", class: "copy", title: "copy the clone URL" }, "copy");
  b.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text);
      b.textContent = "copied";
      b.dataset.copied = "1";
    } catch (_) {
      b.textContent = "select it";
    }
    setTimeout(() => { b.textContent = "copy"; delete b.dataset.copied; }, 1500);
  });
  return b;
}

function renderClones(repos) {
  $("#clones tbody").replaceChildren(...(repos.length ? repos.map((r) => el("tr", {},
    el("td", { class: "url" }, r.url),
    el("td", {}, badge(r.state)),
    el("td", { class: "url clone" }, r.clone_url || "—"),
    el("td", {}, r.clone_url ? copyButton(r.clone_url) : ""))) : [el("tr", {}, el("td", { colspan: 4, class: "muted" }, "no repos"))]));
}

function heartbeatClass(age) {
  if (age == null) return "age-bad";
  if (age < 30) return "age-ok";
  if (age < 120) return "age-warn";
  return "age-bad";
}

function renderWorkers(ws) {
  const rows = ws.map((w) => {
    const used = w.disk_total ? w.disk_used / w.disk_total : 0;
    const fill = el("span", { class: used > 0.85 ? "full" : "" });
    fill.style.width = `${Math.round(used * 100)}%`;
    const sw = el("span", { class: "swatch" });
    sw.style.background = colour(w.id, w.slot);
    return el("tr", { "data-worker": w.id },
      el("td", {}, sw),
      el("td", {}, w.id),
      el("td", {}, w.slot),
      el("td", {}, badge(w.state)),
      el("td", { class: heartbeatClass(w.heartbeat_age_seconds) }, w.heartbeat_age_seconds == null ? "never" : `${fmtAge(w.heartbeat_age_seconds)} ago`),
      el("td", {}, fmtTime(w.started_at)),
      el("td", {}, el("span", { class: "bar" }, fill), w.disk_total ? `${fmtBytes(w.disk_used)} / ${fmtBytes(w.disk_total)}` : "—"),
      el("td", {}, w.fetching),
      el("td", {}, w.queue_len));
  });
  $("#workers tbody").replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: 9, class: "muted" }, "no workers have joined"))]));
}

// arcPath draws the ring segment between fractions a and b of the circle, clockwise
// from the top.
function arcPath(a, b, R, r) {
  const ang = (f) => f * 2 * Math.PI - Math.PI / 2;
  const pt = (f, rad) => `${(rad * Math.cos(ang(f))).toFixed(3)} ${(rad * Math.sin(ang(f))).toFixed(3)}`;
  const large = b - a > 0.5 ? 1 : 0;
  return `M ${pt(a, R)} A ${R} ${R} 0 ${large} 1 ${pt(b, R)} L ${pt(b, r)} A ${r} ${r} 0 ${large} 0 ${pt(a, r)} Z`;
}

function renderRing(rg) {
  const g = $("#ring");
  const R = 100, r = 64;
  const slots = new Map(rg.members.map((m) => [m.id, m.slot]));
  const kids = [];
  for (const [a, b, m] of rg.arcs) {
    // A full circle cannot be one SVG arc (start = end): draw it as two halves.
    const parts = b - a >= 0.999 ? [[a, a + (b - a) / 2], [a + (b - a) / 2, b]] : [[a, b]];
    for (const [x, y] of parts) {
      const p = svg("path", { class: "arc", d: arcPath(x, y, R, r), fill: colour(m, slots.get(m)), "data-member": m });
      const title = svg("title");
      title.textContent = `${m}: ${((y - x) * 100).toFixed(2)}% of the circle`;
      p.append(title);
      kids.push(p);
    }
  }
  if (!kids.length) kids.push(svg("circle", { r: (R + r) / 2, fill: "none", stroke: "#d1d5db", "stroke-width": R - r }));
  const label = svg("text", { y: 4 });
  label.textContent = rg.members.length ? `${rg.members.length} members` : "empty ring";
  kids.push(label);
  g.replaceChildren(...kids);
  $("#ring-meta").textContent = `v${rg.version} · ${rg.tokens} tokens${rg.arcs_exact ? "" : " · drawn approximately"}` +
    (rg.warmup_until && new Date(rg.warmup_until) > Date.now() ? ` · warm-up until ${fmtTime(rg.warmup_until)}` : "");
  $("#legend").replaceChildren(...rg.members.map((m) => {
    const sw = el("span", { class: "swatch" });
    sw.style.background = colour(m.id, m.slot);
    return el("li", { "data-member": m.id }, sw, `${m.id} `, el("span", { class: "muted" }, `${(m.share * 100).toFixed(1)}%`));
  }));
}

// renderList draws the repo-list panel from /v1/list. The list is optional: its panel
// says so rather than failing the page.
function renderList(ls) {
  $("#list-message").textContent = ls.message;
  $("#list-meta").textContent = ls.configured ? `${ls.entries} URLs` : "not configured";
  const facts = [];
  const fact = (k, v, cls) => facts.push(el("dt", {}, k), el("dd", cls ? { class: cls } : {}, v));
  if (ls.configured) {
    fact("repository", ls.repo);
    fact("branch", ls.branch || "HEAD");
    fact("paths", ls.paths.join(", "));
    fact("commit", ls.commit ? el("code", {}, ls.commit) : "none yet");
    fact("applied", fmtTime(ls.applied_at));
    if (ls.last_change) fact("last change", `${ls.last_change.mode}: +${ls.last_change.added} −${ls.last_change.removed}`);
    fact("purge threshold", `${ls.purge_threshold_percent}%`);
    if (ls.pending.length) fact("waiting to be re-added", ls.pending.join(" "));
    if (ls.last_error) fact("last error", ls.last_error, "bad");
  }
  $("#list-facts").replaceChildren(...facts);

  const held = $("#list-held");
  const h = ls.held_purge;
  if (h) {
    const cmd = `mirrorfleet list confirm ${h.commit}`;
    held.replaceChildren(
      el("b", {}, h.confirmed ? "Purge confirmed — applied at the next sync. " : "Purge held. "),
      `Commit `, el("code", {}, h.commit.slice(0, 12)), ` would delete ${h.remove} of ${h.of} list repos ` +
        `(${h.percent.toFixed(1)}%, threshold ${h.threshold_percent}%). `,
      h.confirmed ? "" : el("span", {}, "Confirm with ", el("code", {}, cmd), " or raise --list-purge-threshold."),
      el("ul", {}, ...h.sample.map((u) => el("li", { class: "url" }, u))));
    held.hidden = false;
  } else {
    held.hidden = true;
  }

  const bad = $("#list-bad");
  bad.hidden = !ls.bad_lines.length;
  $("#list-bad tbody").replaceChildren(...ls.bad_lines.map((b) => el("tr", {},
    el("td", {}, `${b.file}:${b.line}`), el("td", { class: "wrap" }, b.reason), el("td", { class: "url" }, b.text))));
  if (ls.bad_lines_total > ls.bad_lines.length) {
    $("#list-bad tbody").append(el("tr", {}, el("td", { colspan: 3, class: "muted" }, `and ${ls.bad_lines_total - ls.bad_lines.length} more`)));
  }
}

// ---- loop ----

function showProblem(err) {
  const banner = $("#banner");
  if (err instanceof HTTPError && err.status === 401) {
    banner.hidden = true;
    $("#auth").hidden = false;
  } else {
    banner.textContent = err instanceof HTTPError
      ? `The API answered with an error (${err.status}): ${err.message}. Retrying every ${REFRESH_S}s.`
      : `The mirrorfleet API is unreachable (${err.message}). Showing the last data received; retrying every ${REFRESH_S}s.`;
    banner.hidden = false;
  }
  $("main").classList.add("stale");
  document.body.dataset.state = "error";
}

let timer = 0;
let inFlight = false;

async function refresh() {
  if (inFlight) return;
  inFlight = true;
  clearTimeout(timer);
  try {
    const [st, ws, rg, rp] = await Promise.all([getJSON("/v1/status"), getJSON("/v1/workers"), getJSON("/v1/ring"),
      getJSON(`/v1/repos?limit=${CLONES_SHOWN}`)]);
    renderStatus(st);
    renderClones(rp.repos);
    renderWorkers(ws.workers);
    renderRing(rg);
    try {
      renderList(await getJSON("/v1/list"));
    } catch (err) {
      if (err instanceof HTTPError && err.status === 401) throw err;
      $("#list-message").textContent = `The list status is unavailable: ${err.message}`;
    }
    $("#banner").hidden = true;
    $("#auth").hidden = true;
    $("main").classList.remove("stale");
    $("#updated").textContent = `updated ${new Date().toLocaleTimeString()} · every ${REFRESH_S}s`;
    document.body.dataset.state = "ok";
    document.body.dataset.loaded = "1";
  } catch (err) {
    showProblem(err);
  } finally {
    inFlight = false;
    timer = setTimeout(refresh, REFRESH_S * 1000);
  }
}

$("#auth").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem("mirrorfleet-token", $("#token").value.trim());
  $("#token").value = "";
  $("#auth").hidden = true;
  refresh();
});

refresh();
