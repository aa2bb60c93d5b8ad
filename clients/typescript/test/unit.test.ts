// The client's own rules, without a server: Retry-After, retries, Idempotency-Key, problems.
import assert from "node:assert/strict";
import { test } from "node:test";

import { TzpushClient, TzpushError, cursorOf, parseRetryAfter } from "../src/index.js";

function problem(status: number, type: string, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify({ type, title: "t", status, detail: "d", instance: "/x" }), {
    status,
    headers: { "Content-Type": "application/problem+json", ...headers },
  });
}

function fake(answers: Response[]) {
  const seen: Request[] = [];
  const fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    seen.push(new Request(input, init));
    const next = answers.shift();
    assert.ok(next, "more requests than answers");
    return next;
  };
  return { seen, fetch: fetch as typeof globalThis.fetch };
}

const reminder = { category: "meal", label: "lunch", at: "12:30" } as const;

test("Retry-After is read in seconds or as an HTTP date", () => {
  assert.equal(parseRetryAfter("3"), 3);
  assert.equal(parseRetryAfter(null), null);
  assert.equal(parseRetryAfter("soon"), null);
  const now = Date.parse("2026-12-04T10:00:00Z");
  assert.equal(parseRetryAfter("Fri, 04 Dec 2026 10:00:05 GMT", now), 5);
});

test("a next link gives its cursor and the last page none", () => {
  assert.equal(cursorOf("/v1/users/u/reminders?limit=3&after=abc_-"), "abc_-");
  assert.equal(cursorOf(null), undefined);
});

test("a 503 is retried with the same Idempotency-Key and the body sent again", async () => {
  const ok = new Response(JSON.stringify({ id: "r1" }), {
    status: 201,
    headers: { "Content-Type": "application/json" },
  });
  const { seen, fetch } = fake([problem(503, "/problems/unavailable", { "Retry-After": "0" }), ok]);
  const api = new TzpushClient({ baseUrl: "http://api.invalid/", apiKey: "k", fetch });
  const out = await api.reminders.create("u", reminder);
  assert.equal(out.id, "r1");
  assert.equal(seen.length, 2);
  const keys = seen.map((r) => r.headers.get("Idempotency-Key"));
  assert.ok(keys[0] && keys[0] === keys[1], "each attempt carries the same key");
  for (const r of seen) assert.deepEqual(await r.json(), reminder);
  assert.equal(seen[0]?.headers.get("Authorization"), "Bearer k");
  assert.equal(seen[0]?.url, "http://api.invalid/v1/users/u/reminders");
});

test("retries are bounded: the last answer's problem is thrown", async () => {
  const answers = [0, 1, 2].map(() => problem(429, "/problems/too-many-requests", { "Retry-After": "0" }));
  const { seen, fetch } = fake(answers);
  const api = new TzpushClient({ baseUrl: "http://api.invalid", apiKey: "k", fetch, maxRetries: 2 });
  const err = await api.users.get("u").catch((e: unknown) => e);
  assert.ok(err instanceof TzpushError);
  assert.equal(err.status, 429);
  assert.equal(err.type, "/problems/too-many-requests");
  assert.equal(err.retryAfter, 0);
  assert.equal(seen.length, 3);
});

test("a Retry-After longer than the client waits is not waited for", async () => {
  const { seen, fetch } = fake([problem(503, "/problems/unavailable", { "Retry-After": "120" })]);
  const api = new TzpushClient({ baseUrl: "http://api.invalid", apiKey: "k", fetch });
  const err = await api.users.get("u").catch((e: unknown) => e);
  assert.ok(err instanceof TzpushError && err.status === 503 && err.retryAfter === 120);
  assert.equal(seen.length, 1);
});

test("a given Idempotency-Key is sent as given, and a 4xx is not retried", async () => {
  const { seen, fetch } = fake([problem(422, "/problems/idempotency-key-reused")]);
  const api = new TzpushClient({ baseUrl: "http://api.invalid", apiKey: "k", fetch });
  const err = await api.reminders.create("u", reminder, { idempotencyKey: "mine-1" }).catch((e: unknown) => e);
  assert.ok(err instanceof TzpushError && err.type === "/problems/idempotency-key-reused");
  assert.equal(seen.length, 1);
  assert.equal(seen[0]?.headers.get("Idempotency-Key"), "mine-1");
});

test("an answer that is not a problem document is still a TzpushError with its status", async () => {
  const { fetch } = fake([new Response("<html>bad gateway</html>", { status: 502, statusText: "Bad Gateway" })]);
  const api = new TzpushClient({ baseUrl: "http://api.invalid", apiKey: "k", fetch });
  const err = await api.users.get("u").catch((e: unknown) => e);
  assert.ok(err instanceof TzpushError);
  assert.equal(err.status, 502);
  assert.equal(err.type, "about:blank");
  assert.deepEqual(err.invalid, []);
});

test("an attempt past the timeout is aborted", async () => {
  const hang = (_: RequestInfo | URL, init?: RequestInit) =>
    new Promise<Response>((_resolve, reject) => {
      init?.signal?.addEventListener("abort", () => reject(init.signal?.reason));
    });
  const api = new TzpushClient({ baseUrl: "http://api.invalid", apiKey: "k", fetch: hang, timeoutMs: 50 });
  const alive = setInterval(() => {}, 1000); // a socket would keep the process alive meanwhile
  try {
    await assert.rejects(api.users.get("u"), { name: "TimeoutError" });
  } finally {
    clearInterval(alive);
  }
});
