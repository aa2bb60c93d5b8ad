/**
 * The transport under openapi-fetch: a timeout per attempt, and bounded retries of the answers
 * that say "send it again later" (429 over the key's rate, 503 unavailable, 409 while the first
 * request under the same Idempotency-Key still runs), honouring `Retry-After`.
 *
 * Each of these is safe to send again as it was: a 429 is refused before its route runs, PUT
 * and DELETE are idempotent, a batch is a list of upserts, and a POST carries its
 * Idempotency-Key (the same on every attempt), so a retry never makes a second reminder.
 */
import { parseRetryAfter } from "./errors.js";

export interface RetryOptions {
  /** Attempts after the first, at most (default 3; 0: never retry). */
  maxRetries: number;
  /** A `Retry-After` longer than this is not waited for: the error is thrown (default 30 s). */
  maxRetryDelayMs: number;
  /** Each attempt's time limit (default 10 s); past it the attempt is aborted (`TimeoutError`). */
  timeoutMs: number;
  /** The wait when the answer names none: 250 ms, doubled each retry, with jitter. */
  baseDelayMs: number;
}

export const DEFAULT_RETRY: RetryOptions = {
  maxRetries: 3,
  maxRetryDelayMs: 30_000,
  timeoutMs: 10_000,
  baseDelayMs: 250,
};

const RETRIED = new Set([429, 503]);

/** Whether `response` asks to be sent again later. */
export function isRetryable(response: Response): boolean {
  if (RETRIED.has(response.status)) return true;
  // The first request under this Idempotency-Key still runs: its answer will be replayed.
  return response.status === 409 && response.headers.has("retry-after");
}

/** How long to wait before retry number `retry` (0-based) after `response`, or null: give up. */
export function retryDelayMs(response: Response, retry: number, options: RetryOptions): number | null {
  const said = parseRetryAfter(response.headers.get("retry-after"));
  const wait = said !== null ? said * 1000 : options.baseDelayMs * 2 ** retry * (0.5 + Math.random() / 2);
  return wait > options.maxRetryDelayMs ? null : wait;
}

/** A `fetch` for openapi-fetch that times out each attempt and retries as above. */
export function retryingFetch(options: RetryOptions, inner: typeof fetch = globalThis.fetch) {
  return async (request: Request, init?: RequestInit): Promise<Response> => {
    for (let retry = 0; ; retry++) {
      const attempt = request.clone(); // a body is read once: every attempt sends a copy
      const signal = AbortSignal.any([request.signal, AbortSignal.timeout(options.timeoutMs)]);
      const response = await inner(attempt, { ...init, signal });
      if (retry >= options.maxRetries || !isRetryable(response)) return response;
      const wait = retryDelayMs(response, retry, options);
      if (wait === null) return response;
      await response.body?.cancel();
      await sleep(wait, request.signal);
    }
  };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}
