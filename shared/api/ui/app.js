// mirrorfleet status page. The server renders the whole page; this script only makes it
// live: it fetches the same page again every few seconds and swaps in the regions
// (elements with data-live) whose HTML changed, adds the copy buttons, sends the token
// when reads need one, and says so when the API cannot be reached. No framework, no
// build step; it never builds HTML from data itself.
"use strict";

const params = new URLSearchParams(location.search);
// ?refresh=N sets the period in seconds (tests use 1).
const REFRESH_S = Math.min(60, Math.max(1, Number(params.get("refresh")) || 5));
const TOKEN_KEY = "mirrorfleet-token";
const $ = (sel) => document.querySelector(sel);

document.documentElement.classList.add("js"); // shows the copy buttons

// lastHTML is each region's HTML as the server last sent it: a region is replaced only
// when that changes, so what the page did to it meanwhile (a "copied" button) stays.
const lastHTML = new Map();
for (const r of document.querySelectorAll("[data-live]")) lastHTML.set(r.id, r.outerHTML);

class HTTPError extends Error {
  constructor(status, message) {
    super(message || `HTTP ${status}`);
    this.status = status;
  }
}

async function fetchPage() {
  const headers = { Accept: "text/html" };
  const tok = sessionStorage.getItem(TOKEN_KEY);
  if (tok) headers.Authorization = `Bearer ${tok}`;
  const resp = await fetch(location.pathname + location.search, { headers, cache: "no-store" });
  const doc = new DOMParser().parseFromString(await resp.text(), "text/html");
  if (!resp.ok) {
    const p = doc.querySelector("#problem p");
    throw new HTTPError(resp.status, p && p.textContent);
  }
  if (doc.body.dataset.locked) throw new HTTPError(401, "this API needs a token to read");
  return doc;
}

// swap puts the fresh page's regions in place of the shown ones. When the shown page
// has none (it asked for the token), its main is replaced whole.
function swap(doc) {
  const fresh = doc.querySelectorAll("[data-live]");
  if (!document.querySelector("main [data-live]")) {
    $("main").replaceWith(document.importNode(doc.querySelector("main"), true));
  }
  for (const r of fresh) {
    const html = r.outerHTML;
    const cur = document.getElementById(r.id);
    if (cur && lastHTML.get(r.id) !== html) cur.replaceWith(document.importNode(r, true));
    lastHTML.set(r.id, html);
  }
}

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
    swap(await fetchPage());
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
  sessionStorage.setItem(TOKEN_KEY, $("#token").value.trim());
  $("#token").value = "";
  $("#auth").hidden = true;
  refresh();
});

// The copy buttons are swapped with their tables, so one listener serves them all.
document.addEventListener("click", async (ev) => {
  const b = ev.target.closest("button.copy");
  if (!b) return;
  try {
    await navigator.clipboard.writeText(b.dataset.copy);
    b.textContent = "copied";
    b.dataset.copied = "1";
  } catch (_) {
    b.textContent = "select it";
  }
  setTimeout(() => { b.textContent = "copy"; delete b.dataset.copied; }, 1500);
});

// A page that says what was wrong with its query (a 400) is not refreshed.
if (!$("#problem")) {
  if (document.body.dataset.loaded) timer = setTimeout(refresh, REFRESH_S * 1000);
  else refresh();
}
