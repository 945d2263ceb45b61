// Runs: the history with filters, and one run's details and error.

import { actionButton, cancel, retry } from "./actions.js";
import { api, canAct, session } from "./api.js";
import { age, badge, costFacts, facts, h, link, pre, runHref, section, table, tableHref, when } from "./ui.js";

const STATES = ["queued", "running", "succeeded", "failed", "cancelled", "skipped", "interrupted"];
const RETRYABLE = new Set(["failed", "cancelled", "interrupted"]);

function actionsOf(run) {
  if (run.state === "queued" || run.state === "running") {
    return actionButton(`Cancel run ${run.id}`, () => cancel(run));
  }
  if (RETRYABLE.has(run.state) && (session.triggerable || []).includes(run.service)) {
    return actionButton(`Retry run ${run.id}`, () => retry(run));
  }
  return "";
}

export function runsTable(runs, caption) {
  return table(
    caption,
    ["Run", "Table", "Service", "Kind", "Instant", "Trigger", "State", "Created", "Took", "Error", ...(canAct() ? ["Action"] : [])],
    runs.map((r) => [
      link(runHref(r.id), `#${r.id}`),
      link(tableHref(r.table), r.table),
      r.service,
      r.kind,
      r.instant ? h("code", {}, r.instant) : "",
      r.trigger,
      badge(r.state),
      when(r.created_at),
      r.duration_s === null ? "" : age(r.duration_s),
      r.error ? h("span", { class: "why" }, r.error.length > 160 ? r.error.slice(0, 159) + "…" : r.error) : "",
      ...(canAct() ? [actionsOf(r)] : []),
    ]),
    { class: "runs" },
  );
}

export async function runsPage(main, params) {
  const query = new URLSearchParams();
  for (const key of ["table", "state", "service", "limit"]) if (params.get(key)) query.set(key, params.get(key));
  const runs = await api(`/v1/runs?${query}`);
  const submit = (event) => {
    event.preventDefault();
    const form = event.target;
    const next = new URLSearchParams();
    for (const key of ["table", "state", "service", "limit"]) if (form[key].value) next.set(key, form[key].value);
    location.hash = `#/runs?${next}`;
  };
  const select = (name, label, values) => [
    h("label", { for: `runs-${name}` }, label),
    h(
      "select",
      { id: `runs-${name}`, name },
      h("option", { value: "" }, "any"),
      values.map((v) => h("option", { value: v, selected: params.get(name) === v }, v)),
    ),
  ];
  main.append(
    h("h1", {}, "Runs"),
    h(
      "form",
      { class: "filters", role: "search", onsubmit: submit },
      h("label", { for: "runs-table" }, "Table"),
      h("input", { id: "runs-table", name: "table", value: params.get("table") || "" }),
      select("state", "State", STATES),
      select("service", "Service", session.triggerable.concat(["rollback"])),
      h("label", { for: "runs-limit" }, "At most"),
      h("input", { id: "runs-limit", name: "limit", type: "number", min: 1, max: 1000, value: params.get("limit") || "100" }),
      h("button", { type: "submit" }, "Show runs"),
    ),
    section("History", runsTable(runs, `Runs, newest first (${runs.length})`)),
  );
}

export async function runPage(main, id) {
  const run = await api(`/v1/runs/${id}`);
  const actions = actionsOf(run);
  main.append(
    h("h1", {}, `Run ${run.id}`),
    facts([
      ["Table", link(tableHref(run.table), run.table)],
      ["Service", run.service],
      ["Kind", run.kind],
      ["Instant", run.instant ? h("code", {}, run.instant) : null],
      ["Trigger", run.trigger],
      ["State", badge(run.state)],
      ["Attempts", String(run.attempts)],
      ["Created", when(run.created_at)],
      ["Started", when(run.started_at)],
      ["Finished", when(run.finished_at)],
      ["Took", run.duration_s === null ? null : age(run.duration_s)],
      ["Replica", run.replica],
      ["Idempotency key", run.idempotency_key],
    ]),
    actions ? h("p", { class: "actions" }, actions) : null,
    run.error ? section("Error", pre(run.error)) : null,
    run.cost ? section("Cost", costFacts(run.cost)) : null,
    section("Details", h("pre", { tabindex: 0, id: "run-details" }, JSON.stringify(run.details, null, 2))),
  );
}
