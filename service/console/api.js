// The REST API with the same bearer tokens: entered once, kept in sessionStorage (this tab only).

const KEY = "hts.token";

export const session = { scope: null, name: null, auth: false, triggerable: [] };

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function token() {
  return sessionStorage.getItem(KEY);
}

export function setToken(value) {
  if (value) sessionStorage.setItem(KEY, value);
  else sessionStorage.removeItem(KEY);
}

export async function api(path, { method = "GET", body } = {}) {
  const headers = { Accept: "application/json" };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { error: text };
  }
  if (!response.ok) {
    throw new ApiError(response.status, (data && data.error) || `${method} ${path}: HTTP ${response.status}`);
  }
  return data;
}

/** Who the token is: fills ``session``; throws ApiError(401) when a token is needed. */
export async function whoami() {
  const me = await api("/v1/whoami");
  Object.assign(session, me);
  return me;
}

export function canAct() {
  return session.scope === "admin";
}
