// Actions (admin tokens only): each asks for confirmation first, then calls the API and says what
// happened. Every action is a <button>, so the keyboard reaches it like any other control.

import { api, canAct } from "./api.js";
import { h } from "./ui.js";

/** The un-suspend call (auto-suspend, retry.suspend_after): one place to change if the API moves. */
export const unsuspendPath = (table, service) =>
  `/v1/tables/${encodeURIComponent(table)}/services/${encodeURIComponent(service)}/resume`;

let refresh = () => {};

export function onActed(callback) {
  refresh = callback;
}

export function notify(message, kind = "info") {
  const el = document.getElementById("notice");
  el.className = `notice ${kind}`;
  el.textContent = message;
}

/** Ask with the confirmation dialog; resolves true only when confirmed. */
export function confirmAction(text) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.returnValue = "cancel";
    dialog.showModal();
    document.getElementById("confirm-cancel").focus();
  });
}

async function act(question, method, path, body, done) {
  if (!(await confirmAction(question))) {
    notify("Nothing done.");
    return;
  }
  try {
    const result = await api(path, { method, body });
    notify(done(result), "good");
  } catch (e) {
    notify(`Refused: ${e.message}`, "bad");
  }
  await refresh();
}

/** A button doing ``run`` (admin only; null for a read-only token). */
export function actionButton(label, run, attrs = {}) {
  if (!canAct()) return null;
  return h("button", { type: "button", class: "action", onclick: run, ...attrs }, label);
}

const tablePath = (table) => `/v1/tables/${encodeURIComponent(table)}`;

export function trigger(table, service, options = {}, instant = null) {
  const body = { options };
  if (instant) body.instant = instant;
  const what = instant ? `${service} of plan ${instant}` : service;
  return act(
    `Run ${what} on table ${table} now?`,
    "POST",
    `${tablePath(table)}/${service}`,
    body,
    (run) => `Run ${run.id} (${service} on ${table}) is ${run.state}.`,
  );
}

export function retry(run) {
  return trigger(run.table, run.service, {}, run.instant && ["execute", "trigger"].includes(run.kind) ? run.instant : null);
}

export function cancel(run) {
  return act(
    `Cancel run ${run.id} (${run.service} on ${run.table})? Its attempt is rolled back.`,
    "POST",
    `/v1/runs/${run.id}/cancel`,
    undefined,
    (r) => `Run ${r.id} is ${r.state}.`,
  );
}

export function pauseTable(table, paused) {
  const verb = paused ? "Pause" : "Resume";
  return act(
    `${verb} table ${table}? ${paused ? "Nothing new starts on it until it is resumed." : "Its services run again."}`,
    "POST",
    `${tablePath(table)}/${paused ? "pause" : "resume"}`,
    undefined,
    () => `Table ${table} ${paused ? "paused" : "resumed"}.`,
  );
}

export function pauseAll(paused) {
  return act(
    paused ? "Pause the whole daemon? No new work starts on any table." : "Resume the whole daemon?",
    "POST",
    paused ? "/v1/pause" : "/v1/resume",
    undefined,
    () => (paused ? "The daemon is paused." : "The daemon is resumed."),
  );
}

export function unsuspend(table, service) {
  return act(
    `Resume ${service} on table ${table}? It was suspended after repeated failures.`,
    "POST",
    unsuspendPath(table, service),
    undefined,
    () => `${service} on ${table} resumed.`,
  );
}

/** ``key=value`` lines as an options map; throws naming the first bad line. */
export function parseOptions(text) {
  const options = {};
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line) continue;
    const eq = line.indexOf("=");
    if (eq <= 0) throw new Error(`not key=value: ${line}`);
    options[line.slice(0, eq).trim()] = line.slice(eq + 1).trim();
  }
  return options;
}
