/**
 * Every answer of 400 or more from tzpush is `application/problem+json` (RFC 9457); the client
 * turns each into one error class, `TzpushError`, whatever its status.
 */
import type { components } from "./schema.js";

export type InvalidField = components["schemas"]["InvalidField"];
export type Problem = components["schemas"]["Problem"];

/** A refused or failed request: the problem document the API answered, as fields. */
export class TzpushError extends Error {
  /** The problem's kind, a URI reference such as `/problems/invalid-input`. */
  readonly type: string;
  readonly title: string;
  /** The HTTP status (422, 404, 429...). */
  readonly status: number;
  readonly detail: string;
  /** The request's path, as the API saw it. */
  readonly instance: string | null;
  /** For a 422: every invalid field (`name` its dotted path, `in`, `message`); else empty. */
  readonly invalid: InvalidField[];
  /** Seconds the API asked to wait (`Retry-After`), when it said. */
  readonly retryAfter: number | null;
  /** The whole problem document, with any member the API adds. */
  readonly problem: Problem & Record<string, unknown>;

  constructor(problem: Problem & Record<string, unknown>, retryAfter: number | null = null) {
    super(`${problem.status} ${problem.title}: ${problem.detail}`);
    this.name = "TzpushError";
    this.type = problem.type;
    this.title = problem.title;
    this.status = problem.status;
    this.detail = problem.detail;
    this.instance = problem.instance ?? null;
    this.invalid = problem.errors ?? [];
    this.retryAfter = retryAfter;
    this.problem = problem;
  }

  /** The message for the invalid field `name` (`timezone`, `quietHours.start`), if refused. */
  field(name: string): string | undefined {
    return this.invalid.find((f) => f.name === name)?.message;
  }

  /**
   * The error for `response`, from the problem document openapi-fetch parsed (`body`); an
   * answer that is not a problem (a proxy's HTML page) becomes `about:blank` with its status.
   */
  static from(response: Response, body: unknown): TzpushError {
    const retryAfter = parseRetryAfter(response.headers.get("retry-after"));
    if (isProblem(body)) return new TzpushError(body, retryAfter);
    return new TzpushError(
      {
        type: "about:blank",
        title: response.statusText || `HTTP ${response.status}`,
        status: response.status,
        detail: typeof body === "string" ? body.slice(0, 500) : "the answer was not a problem document",
        errors: null,
        instance: new URL(response.url || "http://x/").pathname,
      },
      retryAfter,
    );
  }
}

function isProblem(body: unknown): body is Problem & Record<string, unknown> {
  if (typeof body !== "object" || body === null) return false;
  const b = body as Record<string, unknown>;
  return typeof b.type === "string" && typeof b.status === "number" && typeof b.title === "string";
}

/** `Retry-After` in seconds (either form: delta-seconds or an HTTP date), or null. */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | null {
  if (value === null || value.trim() === "") return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, (at - now) / 1000);
}
