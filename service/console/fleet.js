// The fleet page: every table from GET /v1/fleet, problems first when asked.

import { actionButton, pauseAll } from "./actions.js";
import { api, canAct } from "./api.js";
import { age, badge, h, healthScore, link, progress, runHref, section, stats, suspendedOf, table, tableHref } from "./ui.js";

const TYPES = { MERGE_ON_READ: "MOR", COPY_ON_WRITE: "COW" };

function late(p) {
  return p.limit_s !== null && p.limit_s !== undefined && p.oldest_s > p.limit_s;
}

const SCORE_NEEDS_ATTENTION = 80;

function troubled(t) {
  return (
    t.health !== "ok" ||
    !!t.failures ||
    suspendedOf(t).length > 0 ||
    (t.health_score !== undefined && t.health_score < SCORE_NEEDS_ATTENTION) ||
    (t.pending || []).some((p) => late(p) || p.abandoned || p.blocked)
  );
}

function pendingCell(t) {
  return (t.pending || []).map((p) =>
    h(
      "div",
      { class: "pending" },
      `${p.service}: ${p.count} pending, oldest ${age(p.oldest_s)}`,
      p.limit_s !== null && p.limit_s !== undefined ? ` (limit ${age(p.limit_s)})` : "",
      late(p) ? [" ", badge("late")] : "",
      p.abandoned ? [" ", badge(`${p.abandoned} abandoned`, "warn")] : "",
      p.blocked ? [" ", badge(`${p.blocked} blocked`, "warn")] : "",
    ),
  );
}

function runningCell(t) {
  const running = (t.running || []).map((r) =>
    h(
      "div",
      {},
      r.run ? link(runHref(r.run), `${r.service} #${r.run}`) : r.service,
      " ",
      progress(r.done, r.total, `${r.service} on ${t.id}: file groups done`),
    ),
  );
  if (t.queued) running.push(h("div", {}, `${t.queued} queued`));
  return running;
}

function failuresCell(t) {
  const f = t.failures;
  if (!f) return "";
  return h(
    "div",
    {},
    link(runHref(f.run), `${f.count} failed`),
    ` (last: ${f.service}) `,
    h("span", { class: "why" }, f.error || ""),
  );
}

/** The worst reason under the score, unless it is the table's error (shown under Notes). */
function scoreReason(t) {
  return t.health_reason && t.health_reason !== t.error ? h("div", { class: "why" }, t.health_reason) : "";
}

function notesCell(t) {
  const notes = [];
  if (t.paused) notes.push(badge("paused"));
  for (const s of suspendedOf(t)) notes.push(h("div", {}, badge("suspended"), ` ${s.service}`));
  if ((t.refused || []).length) notes.push(h("div", {}, `refused: ${t.refused.join(", ")}`));
  if (t.error) notes.push(h("div", { class: "why" }, t.error));
  return notes;
}

export async function fleetPage(main, params) {
  const data = await api("/v1/fleet");
  const tables = data.tables;
  const onlyTrouble = params.get("trouble") === "1";
  const filter = (params.get("q") || "").toLowerCase();
  const shown = tables.filter((t) => (!onlyTrouble || troubled(t)) && t.id.toLowerCase().includes(filter));
  const count = (pred) => tables.filter(pred).length;
  const scored = tables.some((t) => t.health_score !== undefined);

  const headers = ["Table", "Type", "State", ...(scored ? ["Health score"] : []), "Pending", "Running", "Recent failures", "Notes"];
  const rows = shown.map((t) => [
    link(tableHref(t.id), t.id),
    TYPES[t.type] || "",
    badge(t.health),
    ...(scored ? [[healthScore(t) || "", scoreReason(t)]] : []),
    pendingCell(t),
    runningCell(t),
    failuresCell(t),
    notesCell(t),
  ]);

  const form = h(
    "form",
    { class: "filters", role: "search", onsubmit: (e) => filterTo(e) },
    h("label", { for: "fleet-q" }, "Table id contains"),
    h("input", { id: "fleet-q", name: "q", type: "search", value: params.get("q") || "" }),
    h("label", { class: "check" }, h("input", { type: "checkbox", name: "trouble", checked: onlyTrouble }), " only tables needing attention"),
    h("button", { type: "submit" }, "Filter"),
  );

  main.append(
    h("h1", {}, "Fleet"),
    stats([
      ["Tables", String(tables.length)],
      ["OK", String(count((t) => t.health === "ok"))],
      ["Errors", String(count((t) => t.health === "error"))],
      ["Paused", String(count((t) => t.paused))],
      ["With pending work", String(count((t) => (t.pending || []).length > 0))],
      ["Running", String(count((t) => (t.running || []).length > 0))],
      [`Failed (last ${age(data.failure_window_s)})`, String(count((t) => !!t.failures))],
      ["Suspended", String(count((t) => suspendedOf(t).length > 0))],
      ["Daemon", data.paused ? badge("paused") : badge("ok", "good")],
    ]),
    canAct()
      ? h("p", { class: "actions" }, actionButton(data.paused ? "Resume the daemon" : "Pause the daemon", () => pauseAll(!data.paused)))
      : null,
    section("Tables", form, table(`Tables (${shown.length} of ${tables.length})`, headers, rows, { id: "fleet" })),
  );
}

function filterTo(event) {
  event.preventDefault();
  const form = event.target;
  const query = new URLSearchParams();
  if (form.q.value) query.set("q", form.q.value);
  if (form.trouble.checked) query.set("trouble", "1");
  location.hash = `#/?${query}`;
}
