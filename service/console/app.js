// The console: sign-in with an API token, then the page the location's hash names.
//   #/                 fleet          #/tables/<id>   a table
//   #/runs?filters     runs           #/runs/<id>     a run

import { notify, onActed } from "./actions.js";
import { ApiError, session, setToken, token, whoami } from "./api.js";
import { fleetPage } from "./fleet.js";
import { runPage, runsPage } from "./runs.js";
import { tablePage } from "./table.js";
import { clear, h } from "./ui.js";

function route() {
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query] = hash.split("?");
  const params = new URLSearchParams(query || "");
  let m;
  if ((m = /^\/tables\/([^/]+)$/.exec(path))) return { name: "table", title: `Table ${decodeURIComponent(m[1])}`, render: (main) => tablePage(main, decodeURIComponent(m[1])) };
  if ((m = /^\/runs\/(\d+)$/.exec(path))) return { name: "run", title: `Run ${m[1]}`, render: (main) => runPage(main, m[1]) };
  if (path === "/runs") return { name: "runs", title: "Runs", render: (main) => runsPage(main, params) };
  return { name: "fleet", title: "Fleet", render: (main) => fleetPage(main, params) };
}

function showSession() {
  const el = document.getElementById("session");
  clear(el);
  if (!session.scope) return;
  const who = session.auth ? `${session.name} (${session.scope})` : "no tokens configured (admin on loopback)";
  el.append(
    h("span", { id: "scope", "data-scope": session.scope }, `Signed in: ${who}`),
    session.auth ? h("button", { type: "button", onclick: signOut }, "Sign out") : null,
    h("button", { type: "button", id: "refresh", onclick: () => render(false) }, "Refresh"),
    h(
      "label",
      { class: "check" },
      h("input", { type: "checkbox", id: "auto-refresh", checked: autoRefresh(), onchange: (e) => autoRefresh(e.target.checked) }),
      ` every ${AUTO_REFRESH_S} s`,
    ),
  );
}

// Opt-in refresh: skipped while a dialog is open or a form field has the focus (no lost input).
const AUTO_REFRESH_S = 10;
const AUTO_KEY = "hts.autoRefresh";

function autoRefresh(on) {
  if (on !== undefined) sessionStorage.setItem(AUTO_KEY, on ? "1" : "");
  return sessionStorage.getItem(AUTO_KEY) === "1";
}

setInterval(() => {
  const busy = document.querySelector("dialog[open]") || document.activeElement.closest("form");
  if (autoRefresh() && session.scope && !busy) render(false);
}, AUTO_REFRESH_S * 1000);

function signOut() {
  setToken(null);
  session.scope = null;
  notify("Signed out.");
  render(true);
}

function signIn(main, problem) {
  document.title = "Sign in · hts console";
  const submit = async (event) => {
    event.preventDefault();
    setToken(event.target.token.value.trim());
    await render(true);
  };
  main.append(
    h("h1", {}, "Sign in"),
    h("p", {}, "Enter an API token (a read token shows; an admin token can also act). It is kept for this browser tab only."),
    problem ? h("p", { class: "notice bad", role: "alert" }, problem) : null,
    h(
      "form",
      { class: "signin", onsubmit: submit },
      h("label", { for: "token" }, "API token"),
      h("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true }),
      h("button", { type: "submit", class: "primary" }, "Sign in"),
    ),
  );
  document.getElementById("token").focus();
}

let rendering = 0;

async function render(moveFocus = true) {
  const main = document.getElementById("main");
  const mine = ++rendering;
  const page = route();
  const fresh = h("div", { class: "page", "aria-busy": "true" });
  try {
    if (!session.scope) await whoami();
    showSession();
    await page.render(fresh);
  } catch (e) {
    if (mine !== rendering) return;
    clear(main);
    if (e instanceof ApiError && e.status === 401) {
      const had = token() !== null;
      setToken(null);
      session.scope = null;
      showSession();
      signIn(main, had ? `Not signed in: ${e.message}` : null);
      return;
    }
    main.append(h("h1", {}, page.title), h("p", { class: "notice bad", role: "alert" }, e.message));
    return;
  }
  if (mine !== rendering) return;
  fresh.removeAttribute("aria-busy");
  clear(main);
  main.append(fresh);
  document.title = `${page.title} · hts console`;
  for (const a of document.querySelectorAll("nav a")) {
    if (a.id === `nav-${page.name === "run" ? "runs" : page.name}`) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (moveFocus) main.focus();
}

onActed(() => render(false));
window.addEventListener("hashchange", () => {
  notify("");
  render(true);
});
render(false);
