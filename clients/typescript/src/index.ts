/** @tzpush/client: a typed client for the tzpush HTTP API (see README.md). */
export * from "./client.js";
export { TzpushError, parseRetryAfter, type InvalidField, type Problem } from "./errors.js";
export { Pager, cursorOf, type Page } from "./pages.js";
export { DEFAULT_RETRY, isRetryable, type RetryOptions } from "./retry.js";
export type { components, operations, paths } from "./schema.js";
