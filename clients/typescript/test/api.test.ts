// The client against a live `tzpush api` on the local test stack. `make test` runs these from
// tests/integration/test_client_typescript.py, which starts the API(s) and sets:
//   TZPUSH_URL, TZPUSH_KEY (scope app), TZPUSH_OPS_KEY (scope ops),
//   TZPUSH_THROTTLED_URL, TZPUSH_THROTTLED_KEY (an API allowing 1 request every 4 s per key).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, test } from "node:test";

import { TzpushClient, TzpushError, type BatchItem } from "../src/index.js";

const env = process.env;
const live = env.TZPUSH_URL !== undefined && env.TZPUSH_KEY !== undefined;
const skip = live ? false : "TZPUSH_URL and TZPUSH_KEY are not set (make test sets them)";

const app = () => new TzpushClient({ baseUrl: env.TZPUSH_URL!, apiKey: env.TZPUSH_KEY! });
const ops = () => new TzpushClient({ baseUrl: env.TZPUSH_URL!, apiKey: env.TZPUSH_OPS_KEY! });
const uid = (what: string) => `${what}-${randomUUID().slice(0, 8)}`;
const token = () => `ExponentPushToken[${randomUUID().replaceAll("-", "")}]`;

/** The TzpushError `promise` rejects with (fails the test when it resolves). */
async function refusal(promise: Promise<unknown>): Promise<TzpushError> {
  const err = await promise.then(
    () => assert.fail("expected a TzpushError"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof TzpushError, `not a TzpushError: ${String(err)}`);
  return err;
}

/** A local time of day `minutes` from now in UTC (a reminder due soon, planned at once). */
function soon(minutes: number): string {
  return new Date(Date.now() + minutes * 60_000).toISOString().slice(11, 16);
}

describe("the client against a live tzpush api", { skip }, () => {
  test("a user is put, read back and erased", async () => {
    const api = app();
    const id = uid("user");
    const put = await api.users.put(id, { timezone: "Asia/Tashkent", dailyCap: 10, categories: { mood: false } });
    assert.equal(put.timezone, "Asia/Tashkent");
    assert.equal(put.categories.mood, false);
    assert.equal(put.categories.meal, true);
    assert.deepEqual(await api.users.get(id), put);
    await api.users.erase(id);
    assert.equal((await refusal(api.users.get(id))).status, 404);
  });

  test("a device logs in, is listed, passes to another user and logs out", async () => {
    const api = app();
    const [alice, bob, device, tok] = [uid("alice"), uid("bob"), uid("phone"), token()];
    await api.users.put(alice, { timezone: "Europe/Berlin" });
    await api.users.put(bob, { timezone: "Europe/Berlin" });
    const login = await api.devices.login(alice, device, tok);
    assert.equal(login.deviceId, device);
    assert.deepEqual((await api.devices.list(alice).all()).map((d) => d.deviceId), [device]);
    await api.devices.login(bob, device, tok);
    assert.deepEqual(await api.devices.list(alice).all(), []);
    await api.devices.logout(bob, device);
    await api.devices.logout(bob, device); // twice is fine
    assert.deepEqual(await api.devices.list(bob).all(), []);
  });

  test("reminders are put, created once per Idempotency-Key, patched, read and removed", async () => {
    const api = app();
    const user = uid("carol");
    await api.users.put(user, { timezone: "America/New_York" });
    const rid = uid("carol-mood");
    const put = await api.reminders.put(user, rid, { category: "mood", label: "check-in", at: "20:00" });
    assert.equal(put.version, 1);
    assert.ok(put.nextOccurrenceAt, "an active reminder has a next occurrence");
    const again = await api.reminders.put(user, rid, { category: "mood", label: "check-in", at: "20:00" });
    assert.equal(again.version, 1, "the same body again changes nothing");
    const body = { category: "meal", label: "lunch", at: "12:30", weekdays: ["mon", "fri"] } as const;
    const key = randomUUID();
    const first = await api.reminders.create(user, { ...body, weekdays: [...body.weekdays] }, { idempotencyKey: key });
    const retry = await api.reminders.create(user, { ...body, weekdays: [...body.weekdays] }, { idempotencyKey: key });
    assert.equal(retry.id, first.id, "a retry under the same key makes no second reminder");
    const other = await api.reminders.create(user, { ...body, weekdays: [...body.weekdays] });
    assert.notEqual(other.id, first.id, "a key is made for every POST");
    const patched = await api.reminders.patch(user, first.id, { at: "13:00", weekdays: null });
    assert.equal(patched.at, "13:00");
    assert.equal(patched.weekdays, null);
    assert.equal(patched.version, 2);
    assert.deepEqual((await api.reminders.get(user, first.id)).at, "13:00");
    await api.reminders.remove(user, first.id);
    const left = (await api.reminders.list(user).all()).map((r) => r.id).sort();
    assert.deepEqual(left, [rid, other.id].sort());
  });

  test("a batch answers each item on its own", async () => {
    const api = app();
    const user = uid("batch");
    const items: BatchItem[] = [
      { op: "user", userId: user, user: { timezone: "Asia/Tashkent" } },
      { op: "device", userId: user, deviceId: uid("d"), device: { token: token() } },
      { op: "reminder", userId: user, reminderId: uid("r"), reminder: { category: "meal", label: "lunch", at: "12:30" } },
      { op: "user", userId: uid("bad"), user: { timezone: "Europe/Berln" } },
    ];
    const out = await api.batch(items);
    assert.deepEqual(out.results.map((r) => r.status), [200, 200, 201, 422]);
    assert.equal(out.failed, 1);
    assert.equal(out.results[3]?.problem?.errors?.[0]?.name, "user.timezone");
  });

  test("a user's messages are listed and one is read by id", async () => {
    const api = app();
    const user = uid("msgs");
    await api.users.put(user, { timezone: "UTC" });
    await api.devices.login(user, uid("d"), token());
    await api.reminders.put(user, uid("soon"), { category: "meal", label: "soon", at: soon(120) });
    const messages = await api.messages.list(user, { status: "pending" }).all();
    assert.equal(messages.length, 1, "the reminder due in two hours is planned at once");
    const [m] = messages;
    assert.equal(m?.status, "pending");
    const one = await api.messages.get(m!.id);
    assert.equal(one.scheduledAt, m?.scheduledAt);
    assert.deepEqual(await api.messages.list(user, { status: "success" }).all(), []);
  });

  test("a page walk visits every reminder once, a page at a time", async () => {
    const api = app();
    const user = uid("pages");
    await api.users.put(user, { timezone: "UTC" });
    const ids = Array.from({ length: 7 }, (_, i) => `${user}-r${i}`);
    await api.batch(ids.map((reminderId) => ({
      op: "reminder" as const,
      userId: user,
      reminderId,
      reminder: { category: "meal", label: reminderId, at: "09:00" },
    })));
    const sizes: number[] = [];
    const seen: string[] = [];
    for await (const page of api.reminders.list(user, { limit: 3 }).pages()) {
      sizes.push(page.length);
      seen.push(...page.map((r) => r.id));
    }
    assert.deepEqual(sizes, [3, 3, 1]);
    assert.deepEqual(seen, ids);
    const walked: string[] = [];
    for await (const r of api.reminders.list(user, { limit: 2 })) walked.push(r.id);
    assert.deepEqual(walked, ids);
  });

  test("each kind of refusal is a TzpushError with its type, status and fields", async () => {
    const api = app();
    const user = uid("errs");
    await api.users.put(user, { timezone: "UTC" });

    const invalid = await refusal(api.users.put(user, { timezone: "Europe/Berln", dailyCap: 0 }));
    assert.equal(invalid.status, 422);
    assert.equal(invalid.type, "/problems/invalid-input");
    assert.deepEqual(invalid.invalid.map((f) => f.name).sort(), ["dailyCap", "timezone"]);
    assert.equal(invalid.field("timezone"), "unknown time zone 'Europe/Berln'");

    const missing = await refusal(api.users.get(uid("nobody")));
    assert.deepEqual([missing.status, missing.type], [404, "/problems/not-found"]);

    const bad = new TzpushClient({ baseUrl: env.TZPUSH_URL!, apiKey: "tzp_not-a-key" });
    const unauthorized = await refusal(bad.users.get(user));
    assert.deepEqual([unauthorized.status, unauthorized.type], [401, "/problems/unauthorized"]);

    const forbidden = await refusal(api.stats());
    assert.deepEqual([forbidden.status, forbidden.type], [403, "/problems/forbidden"]);

    const rid = uid("held");
    await api.reminders.put(user, rid, { category: "meal", label: "x", at: "08:00" });
    const other = uid("other");
    await api.users.put(other, { timezone: "UTC" });
    const conflict = await refusal(api.reminders.put(other, rid, { category: "meal", label: "x", at: "08:00" }));
    assert.deepEqual([conflict.status, conflict.type], [409, "/problems/conflict"]);

    const key = randomUUID();
    await api.reminders.create(user, { category: "meal", label: "a", at: "08:00" }, { idempotencyKey: key });
    const reused = await refusal(api.reminders.create(user, { category: "meal", label: "b", at: "08:00" }, { idempotencyKey: key }));
    assert.deepEqual([reused.status, reused.type], [422, "/problems/idempotency-key-reused"]);

    const big = await refusal(api.reminders.put(user, uid("big"), {
      category: "meal", label: "x", at: "08:00", data: { blob: "x".repeat(5 * 1024 * 1024) },
    }));
    assert.deepEqual([big.status, big.type], [413, "/problems/too-large"]);
  });

  test("an ops key reads the stats", async () => {
    const stats = await ops().stats();
    assert.equal(typeof stats, "object");
  });

  test("a 429 is retried after its Retry-After and then answered", async () => {
    assert.ok(env.TZPUSH_THROTTLED_URL && env.TZPUSH_THROTTLED_KEY, "the throttled API is set");
    const statuses: number[] = [];
    const keys: (string | null)[] = [];
    const waits: (string | null)[] = [];
    const counting: typeof fetch = async (input, init) => {
      const request = new Request(input, init);
      keys.push(request.headers.get("Idempotency-Key"));
      const response = await fetch(request);
      statuses.push(response.status);
      waits.push(response.headers.get("Retry-After"));
      return response;
    };
    const api = new TzpushClient({ baseUrl: env.TZPUSH_THROTTLED_URL, apiKey: env.TZPUSH_THROTTLED_KEY, fetch: counting });
    const user = uid("throttled");
    await api.users.put(user, { timezone: "UTC" }); // the one request the bucket holds
    const t0 = Date.now();
    const created = await api.reminders.create(user, { category: "meal", label: "x", at: "08:00" });
    assert.ok(created.id);
    assert.deepEqual(statuses, [200, 429, 201]);
    const said = Number(waits[1]);
    assert.ok(said >= 1, `Retry-After ${waits[1]}`);
    assert.ok(Date.now() - t0 >= said * 1000 - 50, "it waited for Retry-After before sending again");
    assert.ok(keys[1] && keys[1] === keys[2], "the retry carried the same Idempotency-Key");
    const once = new TzpushClient({ baseUrl: env.TZPUSH_THROTTLED_URL, apiKey: env.TZPUSH_THROTTLED_KEY, maxRetries: 0 });
    const refused = await refusal(once.users.get(user)); // the retry took the bucket's one
    assert.deepEqual([refused.status, refused.type], [429, "/problems/too-many-requests"]);
    assert.ok(refused.retryAfter !== null && refused.retryAfter >= 1);
  });
});
