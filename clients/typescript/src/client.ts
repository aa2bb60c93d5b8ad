/**
 * `TzpushClient`: every resource of the tzpush HTTP API as typed methods, over openapi-fetch
 * and the types generated from the API's own OpenAPI document (`src/schema.ts`).
 */
import { randomUUID } from "node:crypto";
import createClient, { type Client, type Middleware } from "openapi-fetch";

import { TzpushError } from "./errors.js";
import { Pager } from "./pages.js";
import { DEFAULT_RETRY, type RetryOptions, retryingFetch } from "./retry.js";
import type { components, operations, paths } from "./schema.js";

type Schemas = components["schemas"];
export type UserIn = Schemas["UserIn"];
export type UserOut = Schemas["UserOut"];
export type DeviceOut = Schemas["DeviceOut"];
export type ReminderIn = Schemas["ReminderIn"];
export type ReminderPatch = Schemas["ReminderPatch"];
export type ReminderOut = Schemas["ReminderOut"];
export type MessageOut = Schemas["MessageOut"];
export type BatchItem = Schemas["BatchIn"]["items"][number];
export type BatchOut = Schemas["BatchOut"];
export type ReplayIn = Schemas["ReplayIn"];
export type ReplayOut = Schemas["ReplayOut"];
export type MessageQuery = Omit<
  NonNullable<operations["list_messages_v1_users__userId__messages_get"]["parameters"]["query"]>,
  "after"
>;
export type Stats = operations["stats_v1_stats_get"]["responses"][200]["content"]["application/json"];

export interface TzpushOptions extends Partial<RetryOptions> {
  /** The API's address, e.g. `https://tzpush.internal` (no trailing `/v1`). */
  baseUrl: string;
  /** A key of scope `app` (or `ops` for stats and replays): sent as `Authorization: Bearer`. */
  apiKey: string;
  /** Makes the Idempotency-Key of a POST that was given none (default: a random UUID). */
  idempotencyKey?: () => string;
  /** The fetch to send with (default: the global one); for tests and proxies. */
  fetch?: typeof fetch;
}

/** Options of one call that creates something. */
export interface PostOptions {
  /** The same key and body within 24 h answer the first answer again: no second reminder. */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

/** Options of a list: page size (1 to 200, default 50). */
export interface ListOptions {
  limit?: number;
}

/** The `{data, error, response}` openapi-fetch answers: the data, or the problem thrown. */
async function unwrap<T>(
  call: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<T> {
  const { data, error, response } = await call;
  if (!response.ok) throw TzpushError.from(response, error);
  return data as T;
}

/**
 * A tzpush API client. Every method resolves to the answer's JSON (typed from the OpenAPI
 * document) or rejects with a `TzpushError` carrying the problem's `type`, `status` and
 * `invalid` fields; 429 and 503 are retried (bounded, after `Retry-After`) before that.
 */
export class TzpushClient {
  /** The openapi-fetch client underneath, typed over every path, for what has no method here. */
  readonly raw: Client<paths>;

  constructor(options: TzpushOptions) {
    if (!options.apiKey) throw new TypeError("TzpushClient: apiKey is required");
    const retry: RetryOptions = {
      maxRetries: options.maxRetries ?? DEFAULT_RETRY.maxRetries,
      maxRetryDelayMs: options.maxRetryDelayMs ?? DEFAULT_RETRY.maxRetryDelayMs,
      timeoutMs: options.timeoutMs ?? DEFAULT_RETRY.timeoutMs,
      baseDelayMs: options.baseDelayMs ?? DEFAULT_RETRY.baseDelayMs,
    };
    this.raw = createClient<paths>({
      baseUrl: options.baseUrl.replace(/\/+$/, ""),
      headers: { Authorization: `Bearer ${options.apiKey}` },
      fetch: retryingFetch(retry, options.fetch) as (input: Request) => Promise<Response>,
    });
    this.raw.use(idempotencyKeys(options.idempotencyKey ?? randomUUID));
  }

  readonly users = {
    /** Create or replace the whole user (a category left out is on). */
    put: (userId: string, user: UserIn): Promise<UserOut> =>
      unwrap(this.raw.PUT("/v1/users/{userId}", { params: { path: { userId } }, body: user })),
    get: (userId: string): Promise<UserOut> =>
      unwrap(this.raw.GET("/v1/users/{userId}", { params: { path: { userId } } })),
    /** Erasure: messages ended, devices and reminders removed, history anonymised. */
    erase: (userId: string): Promise<void> =>
      unwrap(this.raw.DELETE("/v1/users/{userId}", { params: { path: { userId } } })),
  };

  readonly devices = {
    /** A login: this device's Expo push token now belongs to this user (and no one else). */
    login: (userId: string, deviceId: string, token: string): Promise<DeviceOut> =>
      unwrap(
        this.raw.PUT("/v1/users/{userId}/devices/{deviceId}", {
          params: { path: { userId, deviceId } },
          body: { token },
        }),
      ),
    /** A logout of this user's registration of the device (204 whether or not there was one). */
    logout: (userId: string, deviceId: string): Promise<void> =>
      unwrap(
        this.raw.DELETE("/v1/users/{userId}/devices/{deviceId}", {
          params: { path: { userId, deviceId } },
        }),
      ),
    /** The user's active registrations, every page. */
    list: (userId: string, options: ListOptions = {}): Pager<DeviceOut> =>
      new Pager((after) =>
        unwrap(
          this.raw.GET("/v1/users/{userId}/devices", {
            params: { path: { userId }, query: { ...options, after } },
          }),
        ),
      ),
  };

  readonly reminders = {
    /** Create (201) or replace under your own id; the same body again changes nothing. */
    put: (userId: string, reminderId: string, reminder: ReminderIn): Promise<ReminderOut> =>
      unwrap(
        this.raw.PUT("/v1/users/{userId}/reminders/{reminderId}", {
          params: { path: { userId, reminderId } },
          body: reminder,
        }),
      ),
    /** Create under an id the server picks; retried under the same Idempotency-Key. */
    create: (userId: string, reminder: ReminderIn, options: PostOptions = {}): Promise<ReminderOut> =>
      unwrap(
        this.raw.POST("/v1/users/{userId}/reminders", {
          params: {
            path: { userId },
            header: options.idempotencyKey ? { "Idempotency-Key": options.idempotencyKey } : undefined,
          },
          body: reminder,
          signal: options.signal,
        }),
      ),
    /** Change only the fields given (`null` clears `weekdays`, `title`, `body`, `data`). */
    patch: (userId: string, reminderId: string, patch: ReminderPatch): Promise<ReminderOut> =>
      unwrap(
        this.raw.PATCH("/v1/users/{userId}/reminders/{reminderId}", {
          params: { path: { userId, reminderId } },
          body: patch,
        }),
      ),
    get: (userId: string, reminderId: string): Promise<ReminderOut> =>
      unwrap(
        this.raw.GET("/v1/users/{userId}/reminders/{reminderId}", {
          params: { path: { userId, reminderId } },
        }),
      ),
    /** Remove it: its pending messages end cancelled. Removing it again is fine. */
    remove: (userId: string, reminderId: string): Promise<void> =>
      unwrap(
        this.raw.DELETE("/v1/users/{userId}/reminders/{reminderId}", {
          params: { path: { userId, reminderId } },
        }),
      ),
    /** The user's reminders by id, every page. */
    list: (userId: string, options: ListOptions = {}): Pager<ReminderOut> =>
      new Pager((after) =>
        unwrap(
          this.raw.GET("/v1/users/{userId}/reminders", {
            params: { path: { userId }, query: { ...options, after } },
          }),
        ),
      ),
  };

  readonly messages = {
    /** The user's messages due in `[since, until)`, oldest first, every page. */
    list: (userId: string, query: MessageQuery = {}): Pager<MessageOut> =>
      new Pager((after) =>
        unwrap(
          this.raw.GET("/v1/users/{userId}/messages", {
            params: { path: { userId }, query: { ...query, after } },
          }),
        ),
      ),
    get: (messageId: string): Promise<MessageOut> =>
      unwrap(this.raw.GET("/v1/messages/{messageId}", { params: { path: { messageId } } })),
  };

  /** Users, devices and reminders in one request (1 to 1,000 items), answered item by item. */
  batch(items: BatchItem[], options: PostOptions = {}): Promise<BatchOut> {
    return unwrap(
      this.raw.POST("/v1/batch", {
        body: { items },
        headers: options.idempotencyKey ? { "Idempotency-Key": options.idempotencyKey } : {},
        signal: options.signal,
      }),
    );
  }

  /** `tzpush stats --json` (an `ops` key). */
  stats(since?: string): Promise<Stats> {
    return unwrap(this.raw.GET("/v1/stats", { params: { query: { since } } }));
  }

  /** `tzpush replay` of `is_missed` or `failed` messages (an `ops` key); `dryRun` first. A real
   * replay answers 202 with `counts.queued`: the consumers send it. */
  replay(selection: ReplayIn, options: PostOptions = {}): Promise<ReplayOut> {
    return unwrap(
      this.raw.POST("/v1/replays", {
        body: selection,
        headers: options.idempotencyKey ? { "Idempotency-Key": options.idempotencyKey } : {},
        signal: options.signal,
      }),
    );
  }
}

/** Gives every POST an Idempotency-Key (one per call: each retry of it sends the same). */
function idempotencyKeys(make: () => string): Middleware {
  return {
    onRequest({ request }) {
      if (request.method === "POST" && !request.headers.has("Idempotency-Key")) {
        request.headers.set("Idempotency-Key", make());
      }
      return request;
    },
  };
}
