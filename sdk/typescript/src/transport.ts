// HTTP for the client: the base URL, the credential, and the retry rule.

import { CheckfuError } from "./errors.js";

export interface ClientOptions {
  /** The server, e.g. `http://127.0.0.1:7420` (a trailing `/v1` is accepted). */
  baseUrl: string;
  /** An API key (`ck_...`), sent as `Authorization: Bearer`. */
  apiKey?: string;
  /**
   * The fetch to use (default: the global one). With no `apiKey`, it is
   * expected to authenticate requests itself (the console's cookie, say).
   */
  fetch?: typeof fetch;
  /** Retries of a call safe to repeat, after a 429/503 or a lost connection (default 3). */
  maxRetries?: number;
  /** The longest wait between retries the client accepts, in ms (default 30,000). */
  maxRetryDelayMs?: number;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
}

export interface RawInit {
  headers?: Record<string, string>;
  body?: BodyInit | null;
  signal?: AbortSignal;
}

export interface SendInit extends RawInit {
  /** Whether the call may be repeated: GET/DELETE, or a POST whose Idempotency-Key the server honours. */
  retryable: boolean;
  maxRetries?: number;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", abort);
      resolve();
    }, ms);
    function abort() {
      clearTimeout(timer);
      reject(signal?.reason);
    }
    signal?.addEventListener("abort", abort, { once: true });
  });
}

/** The wait a `Retry-After` header asks for, in ms (seconds or an HTTP date). */
function retryAfterMs(response: Response): number | null {
  const h = response.headers.get("retry-after");
  if (!h) return null;
  const seconds = Number(h);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(h);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}

export class Transport {
  readonly baseUrl: string;
  readonly #apiKey: string | undefined;
  readonly #fetch: typeof fetch;
  readonly #maxRetries: number;
  readonly #maxDelay: number;
  readonly #headers: Record<string, string>;

  constructor(options: ClientOptions) {
    if (!options.baseUrl) throw new TypeError("Checkfu: baseUrl is required");
    if (!options.apiKey && !options.fetch) throw new TypeError("Checkfu: give an apiKey, or a fetch that authenticates");
    this.baseUrl = options.baseUrl.replace(/\/+$/, "").replace(/\/v1$/, "");
    this.#apiKey = options.apiKey;
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.#maxRetries = options.maxRetries ?? 3;
    this.#maxDelay = options.maxRetryDelayMs ?? 30_000;
    this.#headers = options.headers ?? {};
  }

  /** One request, as is: no retry, any status returned. */
  raw(method: string, path: string, init: RawInit = {}): Promise<Response> {
    const headers: Record<string, string> = { ...this.#headers, ...init.headers };
    if (this.#apiKey) headers["authorization"] = `Bearer ${this.#apiKey}`;
    const request: RequestInit & { duplex?: "half" } = { method, headers };
    if (init.body !== undefined && init.body !== null) {
      request.body = init.body;
      // A streamed body (an upload with progress) must say so to fetch.
      if (typeof ReadableStream !== "undefined" && init.body instanceof ReadableStream) request.duplex = "half";
    }
    if (init.signal) request.signal = init.signal;
    return this.#fetch(this.baseUrl + path, request);
  }

  /**
   * A request with the retry rule: a call safe to repeat is tried again
   * after a 429 or 503 (waiting what `Retry-After` asks, plus jitter) or a
   * lost connection (exponential backoff with full jitter), at most
   * `maxRetries` times; any other call is sent once. A wait longer than
   * `maxRetryDelayMs` is not waited for: the refusal is returned.
   */
  async send(method: string, path: string, init: SendInit): Promise<Response> {
    const max = init.retryable ? (init.maxRetries ?? this.#maxRetries) : 0;
    for (let attempt = 0; ; attempt++) {
      const backoff = Math.random() * Math.min(this.#maxDelay, 250 * 2 ** attempt);
      let response: Response;
      try {
        response = await this.raw(method, path, init);
      } catch (error) {
        if (init.signal?.aborted) throw error;
        if (attempt < max) {
          await sleep(backoff, init.signal);
          continue;
        }
        throw new CheckfuError({
          status: 0,
          type: "transport",
          message: `${method} ${path}: the server did not answer (${error instanceof Error ? error.message : String(error)})`,
          cause: error,
        });
      }
      if ((response.status === 429 || response.status === 503) && attempt < max) {
        const asked = retryAfterMs(response);
        const wait = asked === null ? backoff : asked * (1 + Math.random() * 0.25);
        if (wait <= this.#maxDelay) {
          await response.body?.cancel().catch(() => undefined);
          await sleep(wait, init.signal);
          continue;
        }
      }
      return response;
    }
  }
}
