// A table: its state, actions, shape and refusals, pending and running work with plans decoded,
// timeline, file groups and slices, metadata-table partitions, run history and settings.

import { actionButton, cancel, notify, parseOptions, pauseTable, trigger, unsuspend } from "./actions.js";
import { api, canAct, session } from "./api.js";
import { runsTable } from "./runs.js";
import {
  age, badge, bytes, costFacts, facts, h, healthReasons, healthScore, instant, link, pre, progress, runHref,
  section, suspendedOf, table,
} from "./ui.js";

const PLANS_SHOWN = 5;
const TIMELINE_SHOWN = 100;

async function optional(path) {
  try {
    return { data: await api(path) };
  } catch (e) {
    return { error: e.message };
  }
}

function triggerForm(id) {
  const services = session.triggerable || [];
  const submit = (event) => {
    event.preventDefault();
    const form = event.target;
    let options;
    try {
      options = parseOptions(form.options.value);
    } catch (e) {
      notify(`Options: ${e.message}`, "bad");
      return;
    }
    trigger(id, form.service.value, options);
  };
  return h(
    "form",
    { class: "trigger", onsubmit: submit },
    h("label", { for: "trigger-service" }, "Service"),
    h("select", { id: "trigger-service", name: "service" }, services.map((s) => h("option", { value: s }, s))),
    h("label", { for: "trigger-options" }, "Hudi options (key=value per line, optional)"),
    h("textarea", { id: "trigger-options", name: "options", rows: 2, cols: 40 }),
    h("button", { type: "submit", class: "action primary", id: "trigger-run" }, "Run now"),
  );
}

/** What a decoded plan holds, in a line (the whole plan is below it). */
function planSummary(plan) {
  const p = plan.plan || {};
  if (Array.isArray(p.operations)) {
    const logs = p.operations.reduce((n, op) => n + (op.deltaFilePaths || []).length, 0);
    return `${p.operations.length} file group(s) to compact, ${logs} log file(s)`;
  }
  if (p.clusteringPlan && Array.isArray(p.clusteringPlan.inputGroups)) {
    const slices = p.clusteringPlan.inputGroups.reduce((n, g) => n + (g.slices || []).length, 0);
    return `${p.clusteringPlan.inputGroups.length} clustering group(s), ${slices} file slice(s)`;
  }
  if (p.filePathsToBeDeletedPerPartition) {
    const parts = Object.values(p.filePathsToBeDeletedPerPartition);
    return `${parts.reduce((n, files) => n + files.length, 0)} file(s) to delete in ${parts.length} partition(s)`;
  }
  if (Array.isArray(p.indexPartitionInfos)) return `${p.indexPartitionInfos.length} index partition(s) to build`;
  return `${plan.kind} plan`;
}

function headerFacts(d) {
  const reasons = healthReasons(d);
  return facts([
    ["Path", d.path],
    ["Type", d.type],
    ["Table version", d.version === null ? null : String(d.version)],
    ["State", badge(d.health)],
    ["Health score", healthScore(d)],
    ["Score reasons", reasons.length ? h("ul", {}, reasons.map((r) => h("li", {}, r))) : null],
    ["Paused", d.paused ? "yes" : "no"],
    ["Lock", d.lock && d.lock.provider ? [d.lock.provider, " ", badge(d.lock.state || "none")] : null],
    ["Source", d.source],
    ["Error", d.error ? pre(d.error) : null],
  ]);
}

export async function tablePage(main, id) {
  const path = `/v1/tables/${encodeURIComponent(id)}`;
  const d = await api(path);
  const [timeline, storage, runs] = await Promise.all([
    optional(`${path}/timeline`),
    optional(`${path}/storage`),
    optional(`/v1/runs?table=${encodeURIComponent(id)}&limit=20`),
  ]);
  const plannable = d.pending.filter((p) => p.service !== "rollback" || p.action === "rollback").slice(0, PLANS_SHOWN);
  const plans = await Promise.all(plannable.map((p) => optional(`${path}/plans/${p.instant}`)));

  main.append(h("h1", {}, `Table ${id}`), headerFacts(d));

  if (canAct()) {
    main.append(
      section(
        "Actions",
        h("p", { class: "actions" }, actionButton(d.paused ? "Resume table" : "Pause table", () => pauseTable(id, !d.paused))),
        triggerForm(id),
      ),
    );
  } else {
    main.append(h("p", { class: "readonly" }, "Read-only token: actions are not available."));
  }

  const suspended = suspendedOf(d);
  if (suspended.length) {
    main.append(
      section(
        "Suspended services",
        table(
          "Suspended after repeated failures",
          ["Service", "Last error", ...(canAct() ? ["Action"] : [])],
          suspended.map((s) => [
            s.service,
            pre(s.why),
            ...(canAct() ? [actionButton(`Resume ${s.service}`, () => unsuspend(id, s.service))] : []),
          ]),
        ),
      ),
    );
  }

  const shape = storage.data ? storage.data.shape : [];
  const refused = Object.entries(d.refused || {});
  main.append(
    section(
      "Shape and refusals",
      shape.length
        ? table("Shape", ["Shape", "Evidence"], shape.map((f) => [f.shape, h("code", {}, f.evidence)]))
        : h("p", {}, "No special shape: every service runs as Apache Hudi runs it."),
      table("Refused services", ["Service", "Why"], refused.map(([s, why]) => [badge(s, "bad"), why])),
    ),
  );

  main.append(
    section(
      "Pending services",
      table(
        "Pending instants",
        ["Service", "Instant", "Action", "State", "Age", "Notes"],
        d.pending.map((p) => [
          p.service,
          h("code", {}, p.instant),
          p.action,
          badge(p.state),
          age(p.age_seconds),
          [p.running_elsewhere ? "running elsewhere " : "", p.abandoned ? badge("abandoned", "warn") : "", p.blocked || ""],
        ]),
      ),
      plans.length
        ? h(
            "div",
            { class: "plans" },
            h("h3", {}, "Pending plans"),
            plannable.map((p, i) =>
              plans[i].data
                ? h(
                    "details",
                    {},
                    h("summary", {}, `${p.service} ${p.instant}: ${planSummary(plans[i].data)}`),
                    h("pre", { tabindex: 0 }, JSON.stringify(plans[i].data.plan, null, 2)),
                  )
                : h("p", {}, `${p.service} ${p.instant}: ${plans[i].error}`),
            ),
          )
        : null,
    ),
  );

  main.append(
    section(
      "Running",
      table(
        "Running work",
        ["Run", "Service", "Instant", "Progress", ...(canAct() ? ["Action"] : [])],
        d.running.map((r) => [
          r.run ? link(runHref(r.run), `#${r.run}`) : "",
          r.service,
          r.instant ? h("code", {}, r.instant) : "",
          progress(r.tasks_done, r.tasks_total, `${r.service}: file groups done`),
          ...(canAct() ? [r.run ? actionButton(`Cancel run ${r.run}`, () => cancel({ id: r.run, service: r.service, table: id })) : ""] : []),
        ]),
      ),
    ),
  );

  const failing = Object.entries(d.failures || {});
  if (failing.length) {
    main.append(
      section(
        "Failing services",
        table(
          "Consecutive failed runs",
          ["Service", "Failures in a row", "Suspended", "Last failed run", "Last error"],
          failing.map(([s, f]) => [
            s,
            String(f.consecutive_failures),
            f.suspended ? badge("suspended") : "no",
            f.last_run ? link(runHref(f.last_run), `#${f.last_run}`) : "",
            f.last_error ? pre(f.last_error) : "",
          ]),
        ),
      ),
    );
  }

  main.append(section("Run history", runs.data ? runsTable(runs.data, "Latest runs of this table") : pre(runs.error)));
  if (d.cost) main.append(section("Cost of its runs", costFacts(d.cost)));

  main.append(section("Timeline", timeline.data ? timelineTable(timeline.data.instants) : pre(timeline.error)));

  main.append(section("File groups and slices", storage.data ? storageView(storage.data) : pre(storage.error)));

  main.append(
    section(
      "Metadata table",
      storage.data
        ? [
            h("p", {}, storage.data.metadata_table ? "The table has a metadata table." : "The table has no metadata table."),
            table(
              "Metadata-table partitions",
              ["Partition", "State"],
              storage.data.metadata_partitions.map((p) => [p.name, badge(p.state === "completed" ? "COMPLETED" : "INFLIGHT")]),
            ),
          ]
        : pre(storage.error),
    ),
  );

  main.append(
    section(
      "Settings",
      table("Table properties", ["Key", "Value"], Object.entries(d.config.properties).map(([k, v]) => [h("code", {}, k), v])),
      table("Options", ["Key", "Value"], Object.entries(d.config.options).map(([k, v]) => [h("code", {}, k), v])),
      table(
        "Policies",
        ["Service", "Enabled", "Interval"],
        Object.entries(d.config.policies).map(([s, p]) => [s, p.enabled ? "yes" : "no", age(p.interval_s)]),
      ),
    ),
  );
}

function timelineTable(instants) {
  const shown = instants.slice(-TIMELINE_SHOWN).reverse();
  return table(
    `Active timeline (newest first, ${shown.length} of ${instants.length})`,
    ["Requested", "Action", "State", "Completed"],
    shown.map((i) => [
      h("code", { title: instant(i.requested_time) }, i.requested_time),
      i.action,
      badge(i.state),
      i.completion_time ? h("code", { title: instant(i.completion_time) }, i.completion_time) : "",
    ]),
    { id: "timeline" },
  );
}

function storageView(s) {
  return [
    facts([
      ["File groups", String(s.file_groups)],
      ["File slices", String(s.file_slices)],
      ["Base files", String(s.base_files)],
      ["Log files (latest slices)", String(s.log_files)],
      ["Size (latest slices)", bytes(s.bytes)],
      ["Partitions", String(s.partitions_total)],
    ]),
    table(
      `Partitions (${s.partitions.length} of ${s.partitions_total})`,
      ["Partition", "File groups", "Log files", "Most logs in a slice", "Size"],
      s.partitions.map((p) => [p.partition || "(root)", String(p.file_groups), String(p.log_files), String(p.max_log_files), bytes(p.bytes)]),
    ),
  ];
}
