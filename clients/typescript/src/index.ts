// A small fetch wrapper over the types generated from the API's OpenAPI
// document (src/schema.ts): the X-API-Key header on every request, problem
// bodies thrown as ApiError, and retries of 429 and 503 after Retry-After.
import type { components, operations, paths } from "./schema.js";

export type { components, operations, paths };

/** An RFC 9457 problem, the body of every error answer. */
export type Problem = components["schemas"]["ErrorModel"];

/** The body POSTed to a subscription's callback_url when a verdict changes. */
export type VerdictChanged = components["schemas"]["VerdictChanged"];

/** The body POSTed to a subscription's callback_url when one of your alerts fires. */
export type AlertTriggered = components["schemas"]["AlertTriggered"];

/** The body of a test delivery (POST /webhooks/{id}/test). */
export type Ping = components["schemas"]["Ping"];

type Method = "get" | "post" | "delete";

/** The paths that have an operation for method. */
export type PathsWith<M extends Method> = {
  [P in keyof paths]: paths[P][M] extends { responses: unknown } ? P : never;
}[keyof paths];

type Operation<P extends keyof paths, M extends Method> = NonNullable<paths[P][M]>;
type Parameters<O> = O extends { parameters: infer X } ? X : never;
type PathParameters<O> = Parameters<O> extends { path: infer X } ? X : never;
type QueryParameters<O> = Parameters<O> extends { query?: infer X } ? X : never;
type JSONBody<O> = O extends { requestBody: { content: { "application/json": infer B } } } ? B : never;

/** The body of an operation's 200 or 201 answer (undefined for 204). */
export type Success<O> = O extends { responses: { 200: { content: { "application/json": infer B } } } }
  ? B
  : O extends { responses: { 201: { content: { "application/json": infer B } } } }
    ? B
    : undefined;

/** What a request sends besides its method and path. */
export interface RequestOptions<O> {
  /** The values of the path's {placeholders}. */
  path?: PathParameters<O>;
  query?: QueryParameters<O>;
  /** The JSON body of a POST. */
  body?: JSONBody<O>;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

export interface ClientOptions {
  /** The API's root, e.g. "https://api.example.com/api/v1/public". */
  baseUrl: string;
  /** The key issued to your organisation (server-side code only). */
  apiKey: string;
  /** Retries of a 429 or 503 answer (default 2): the limits refuse a request before it runs. */
  maxRetries?: number;
  /**
   * The longest Retry-After waited for, in milliseconds (default 60 000): a
   * longer one (a monthly quota spent) throws at once.
   */
  maxRetryDelayMs?: number;
  /** fetch to use (default: the global one). */
  fetch?: typeof fetch;
  /** How to wait between retries (default: setTimeout); tests pass their own. */
  sleep?: (ms: number) => Promise<void>;
}

/** An error answer: its status, its problem body and, on 429 and 503, Retry-After in seconds. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly problem: Problem | undefined,
    readonly retryAfterSeconds: number | undefined,
  ) {
    super(problem?.detail ?? problem?.title ?? `HTTP ${status}`);
    this.name = "ApiError";
  }
}

export interface Client {
  get<P extends PathsWith<"get">>(path: P, options?: RequestOptions<Operation<P, "get">>): Promise<Success<Operation<P, "get">>>;
  post<P extends PathsWith<"post">>(path: P, options?: RequestOptions<Operation<P, "post">>): Promise<Success<Operation<P, "post">>>;
  delete<P extends PathsWith<"delete">>(path: P, options?: RequestOptions<Operation<P, "delete">>): Promise<Success<Operation<P, "delete">>>;
}

/** Creates a client of the API at options.baseUrl. */
export function createClient(options: ClientOptions): Client {
  const doFetch = options.fetch ?? globalThis.fetch;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const maxRetries = options.maxRetries ?? 2;
  const maxDelay = options.maxRetryDelayMs ?? 60_000;
  const base = options.baseUrl.replace(/\/+$/, "");

  async function request(method: Method, path: string, o: RequestOptions<unknown> = {}): Promise<any> {
    const url = base + fillPath(path, (o.path ?? {}) as Record<string, unknown>) + queryString((o.query ?? {}) as Record<string, unknown>);
    const headers: Record<string, string> = { Accept: "application/json", ...o.headers, "X-API-Key": options.apiKey };
    let body: string | undefined;
    if (o.body !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(o.body);
    }
    for (let attempt = 0; ; attempt++) {
      const resp = await doFetch(url, { method: method.toUpperCase(), headers, body, signal: o.signal });
      if (resp.ok) {
        return resp.status === 204 || resp.status === 304 ? undefined : await resp.json();
      }
      const retryAfter = parseRetryAfter(resp.headers.get("Retry-After"));
      const problem = await readProblem(resp);
      const delay = (retryAfter ?? 2 ** attempt) * 1000;
      if ((resp.status === 429 || resp.status === 503) && attempt < maxRetries && delay <= maxDelay) {
        await sleep(delay);
        continue;
      }
      throw new ApiError(resp.status, problem, retryAfter);
    }
  }

  return {
    get: (path, o) => request("get", path, o),
    post: (path, o) => request("post", path, o),
    delete: (path, o) => request("delete", path, o),
  };
}

function fillPath(path: string, values: Record<string, unknown>): string {
  return path.replace(/\{([^}]+)\}/g, (_, name: string) => {
    if (values[name] === undefined) {
      throw new TypeError(`path parameter ${name} of ${path} is missing`);
    }
    return encodeURIComponent(String(values[name]));
  });
}

function queryString(query: Record<string, unknown>): string {
  const q = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value === undefined) continue;
    q.set(name, Array.isArray(value) ? value.join(",") : String(value));
  }
  const s = q.toString();
  return s === "" ? "" : "?" + s;
}

/** Retry-After in seconds: the API sends whole seconds; an HTTP-date is honoured too. */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now) / 1000));
}

async function readProblem(resp: Response): Promise<Problem | undefined> {
  const type = resp.headers.get("Content-Type") ?? "";
  if (!type.includes("json")) return undefined;
  try {
    return (await resp.json()) as Problem;
  } catch {
    return undefined;
  }
}
