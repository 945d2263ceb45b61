// DOM helpers and formatting. Text always goes in as text (never as HTML).

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** A table with a caption, header cells with scope, and one row per item. */
export function table(caption, headers, rows, attrs = {}) {
  if (!rows.length) return h("p", { class: "empty" }, `${caption}: none.`);
  return h(
    "div",
    { class: "scroll", role: "region", "aria-label": caption, tabindex: 0 },
    h(
      "table",
      attrs,
      h("caption", {}, caption),
      h("thead", {}, h("tr", {}, headers.map((name) => h("th", { scope: "col" }, name)))),
      h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((c) => h("td", {}, c))))),
    ),
  );
}

/** A definition list from [term, value] pairs (values null/undefined are left out). */
export function facts(pairs) {
  return h(
    "dl",
    { class: "facts" },
    pairs.filter(([, v]) => v !== null && v !== undefined && v !== "").map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]),
  );
}

/** Figures in a row of boxes: [label, value] pairs. */
export function stats(pairs) {
  return h("dl", { class: "stats" }, pairs.map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, v))));
}

export function section(title, ...children) {
  const id = "s-" + title.toLowerCase().replace(/[^a-z0-9]+/g, "-");
  return h("section", { "aria-labelledby": id }, h("h2", { id }, title), ...children);
}

const STATE_CLASS = {
  ok: "good", succeeded: "good", COMPLETED: "good", connected: "good",
  paused: "warn", opening: "info", queued: "info", running: "info", REQUESTED: "info", INFLIGHT: "warn",
  skipped: "muted", cancelled: "muted", interrupted: "warn", suspended: "bad", lost: "bad",
  error: "bad", failed: "bad", removed: "muted", refused: "bad", late: "bad",
};

export function badge(text, kind) {
  return h("span", { class: `badge ${kind || STATE_CLASS[text] || "muted"}` }, text);
}

export function link(href, text) {
  return h("a", { href }, text);
}

export function tableHref(id) {
  return `#/tables/${encodeURIComponent(id)}`;
}

export function runHref(id) {
  return `#/runs/${id}`;
}

export function age(seconds) {
  if (seconds === null || seconds === undefined) return "";
  const s = Math.max(0, Math.round(seconds));
  const two = (big, bigUnit, small, smallUnit) => (small ? `${big} ${bigUnit} ${small} ${smallUnit}` : `${big} ${bigUnit}`);
  if (s < 60) return `${s} s`;
  if (s < 3600) return two(Math.floor(s / 60), "min", s % 60, "s");
  if (s < 86400) return two(Math.floor(s / 3600), "h", Math.floor((s % 3600) / 60), "min");
  return two(Math.floor(s / 86400), "d", Math.floor((s % 86400) / 3600), "h");
}

export function when(epochSeconds) {
  if (epochSeconds === null || epochSeconds === undefined) return "";
  return new Date(epochSeconds * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

/** An instant time (yyyyMMddHHmmss[SSS]) as a readable time in the table's timezone. */
export function instant(ts) {
  if (!ts) return "";
  const m = /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})(\d{3})?$/.exec(ts);
  if (!m) return ts;
  return `${m[1]}-${m[2]}-${m[3]} ${m[4]}:${m[5]}:${m[6]}${m[7] ? "." + m[7] : ""}`;
}

export function bytes(n) {
  if (n === null || n === undefined) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${n} B` : `${value.toFixed(1)} ${units[unit]}`;
}

export function progress(done, total, label) {
  if (!total) return h("span", {}, "starting");
  return h(
    "span",
    { class: "progress" },
    h("progress", { max: total, value: done, "aria-label": label }),
    ` ${done} of ${total}`,
  );
}

/** A number with its reasons, from whatever health score the API gives (absent: nothing). */
export function healthScore(obj) {
  const score = obj.health_score;
  if (score === null || score === undefined) return null;
  const value = typeof score === "object" ? score.score : score;
  return h("span", { class: "score" }, String(value));
}

/** Reasons behind a health score: strings or objects, as the API gives them. */
export function healthReasons(obj) {
  const score = obj.health_score;
  const reasons = obj.health_reasons || (score && typeof score === "object" ? score.reasons : null);
  if (!reasons || !reasons.length) return [];
  return reasons.map((r) => {
    if (typeof r === "string") return r;
    const text = r.message || r.reason || JSON.stringify(r);
    return r.penalty ? `−${r.penalty}: ${text}` : text;
  });
}

/** Suspended services from a table's detail or fleet entry: [{service, why}]. */
export function suspendedOf(obj) {
  const s = obj.suspended;
  if (!s) return [];
  if (Array.isArray(s)) {
    return s.map((x) => (typeof x === "string" ? { service: x, why: "" } : { service: x.service, why: x.last_error || x.error || x.reason || "" }));
  }
  return Object.entries(s)
    .filter(([, v]) => v !== false && v !== null && !(typeof v === "object" && v.suspended === false))
    .map(([service, v]) => ({ service, why: typeof v === "string" ? v : (v && (v.last_error || v.error || v.reason)) || "" }));
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
}

export function pre(text) {
  return h("pre", { class: "error", tabindex: 0 }, text);
}

/** A cost record (core-seconds, bytes and files, storage requests) as facts; null when absent. */
export function costFacts(cost) {
  if (!cost || typeof cost !== "object") return null;
  const label = (k) => k.replace(/_/g, " ");
  const show = (k, v) => (k.startsWith("bytes") && typeof v === "number" ? bytes(v) : typeof v === "object" ? JSON.stringify(v) : String(v));
  return facts(Object.entries(cost).filter(([, v]) => v !== null && v !== undefined).map(([k, v]) => [label(k), show(k, v)]));
}
