// The fetch wrapper's behaviour against a fake fetch: run by `npm test`
// after tsc has compiled src/ into .build/.
import assert from "node:assert/strict";
import { test } from "node:test";

import { ApiError, createClient, parseRetryAfter } from "../.build/src/index.js";

function fakeFetch(answers) {
  const calls = [];
  const fetch = async (url, init) => {
    calls.push({ url, init });
    const [status, body, headers = {}] = answers[Math.min(calls.length - 1, answers.length - 1)];
    return new Response(status === 204 ? null : JSON.stringify(body), { status, headers: { "Content-Type": "application/json", ...headers } });
  };
  return { fetch, calls };
}

const problem = (status, type, detail) => ({ type, title: "t", status, detail });

test("sends the key, fills the path and the query", async () => {
  const { fetch, calls } = fakeFetch([[200, { symbol: "BTC_USDT" }]]);
  const api = createClient({ baseUrl: "http://api.test/api/v1/public/", apiKey: "msk_live_x", fetch });
  const report = await api.get("/analytics/{market}/{symbol}", { path: { market: "crypto", symbol: "BTC/USDT" }, query: { lang: "en" } });
  assert.equal(report.symbol, "BTC_USDT");
  assert.equal(calls[0].url, "http://api.test/api/v1/public/analytics/crypto/BTC%2FUSDT?lang=en");
  assert.equal(calls[0].init.headers["X-API-Key"], "msk_live_x");
});

test("retries 429 and 503 after Retry-After", async () => {
  const { fetch, calls } = fakeFetch([
    [429, problem(429, "/docs#errors-too-many-requests", "Too Many Requests, retry later"), { "Retry-After": "3" }],
    [503, problem(503, "/docs#errors-unavailable", "starting"), { "Retry-After": "1" }],
    [200, { tier: "starter" }],
  ]);
  const slept = [];
  const api = createClient({ baseUrl: "http://api.test", apiKey: "k", fetch, sleep: async (ms) => void slept.push(ms) });
  assert.deepEqual(await api.get("/usage"), { tier: "starter" });
  assert.equal(calls.length, 3);
  assert.deepEqual(slept, [3000, 1000]);
});

test("a Retry-After beyond the longest wait throws at once", async () => {
  const { fetch, calls } = fakeFetch([[429, problem(429, "/docs#errors-too-many-requests", "Monthly quota exceeded"), { "Retry-After": "86400" }]]);
  const api = createClient({ baseUrl: "http://api.test", apiKey: "k", fetch, sleep: async () => assert.fail("slept") });
  await assert.rejects(api.get("/usage"), (e) => e instanceof ApiError && e.status === 429 && e.retryAfterSeconds === 86400);
  assert.equal(calls.length, 1);
});

test("an error answer is an ApiError with its problem body", async () => {
  const { fetch } = fakeFetch([[401, problem(401, "/docs#errors-unauthorized", "missing X-API-Key header")]]);
  const api = createClient({ baseUrl: "http://api.test", apiKey: "", fetch });
  await assert.rejects(api.get("/usage"), (e) =>
    e instanceof ApiError && e.status === 401 && e.problem.type === "/docs#errors-unauthorized" && e.message === "missing X-API-Key header");
});

test("gives up after maxRetries", async () => {
  const { fetch, calls } = fakeFetch([[503, problem(503, "/docs#errors-unavailable", "starting"), { "Retry-After": "1" }]]);
  const api = createClient({ baseUrl: "http://api.test", apiKey: "k", fetch, maxRetries: 2, sleep: async () => {} });
  await assert.rejects(api.get("/usage"), (e) => e instanceof ApiError && e.status === 503);
  assert.equal(calls.length, 3);
});

test("Retry-After as seconds or an HTTP-date", () => {
  const now = Date.parse("2026-11-26T12:00:00Z");
  assert.equal(parseRetryAfter("7", now), 7);
  assert.equal(parseRetryAfter("Thu, 26 Nov 2026 12:00:30 GMT", now), 30);
  assert.equal(parseRetryAfter(null, now), undefined);
  assert.equal(parseRetryAfter("soon", now), undefined);
});

test("posts a screen query as JSON", async () => {
  const page = { items: [{ market: "crypto", exchange: "binance", instrument: "spot", symbol: "SOL_USDT", overall_score: 55, verdict: "growth", "scalp.overall_score": 47 }], next_cursor: null };
  const { fetch, calls } = fakeFetch([[200, page]]);
  const api = createClient({ baseUrl: "http://api.test", apiKey: "k", fetch });
  const got = await api.post("/screener/query", { body: { market: "crypto", where: 'swing.verdict == "growth" && scalp.overall_score > 40', limit: 50 } });
  assert.equal(got.items[0]["scalp.overall_score"], 47);
  assert.equal(calls[0].url, "http://api.test/screener/query");
  assert.equal(calls[0].init.method, "POST");
  assert.deepEqual(JSON.parse(calls[0].init.body), { market: "crypto", where: 'swing.verdict == "growth" && scalp.overall_score > 40', limit: 50 });
});

test("creates, lists and deletes an alert", async () => {
  const alert = { id: "0b7e5a59-61c4-4a4c-9f0c-2f3c3a0d9e11", name: "oversold growth", market: "crypto", where: 'verdict == "growth"', symbols: null, cooldown_seconds: 3600, variables: ["verdict"], created_at: "2026-11-22T10:15:00Z" };
  const { fetch, calls } = fakeFetch([[201, alert], [200, [alert]], [204, null]]);
  const api = createClient({ baseUrl: "http://api.test", apiKey: "k", fetch });
  const created = await api.post("/alerts", { body: { name: "oversold growth", market: "crypto", where: 'verdict == "growth"', cooldown_seconds: 3600 } });
  assert.equal(created.id, alert.id);
  const list = await api.get("/alerts");
  assert.equal(list[0].variables[0], "verdict");
  await api.delete("/alerts/{id}", { path: { id: alert.id } });
  assert.equal(calls[0].init.method, "POST");
  assert.equal(calls[2].url, `http://api.test/alerts/${alert.id}`);
  assert.equal(calls[2].init.method, "DELETE");
});
