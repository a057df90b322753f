/**
 * A refusal from the API, read from its error envelope
 * (`{"error":{"type","message","details"},"request_id"}`), or a transport
 * failure (`type: "transport"`, `status: 0`) when no answer came.
 *
 * Branch on `type` (`permission.denied`, `validation.conflict`,
 * `rate_limited`, ...), never on `message`: the message is for people and
 * may change. Quote `requestId` when asking an operator what happened.
 */
export class CheckfuError extends Error {
  override readonly name = "CheckfuError";
  /** The HTTP status; 0 when the server never answered. */
  readonly status: number;
  /** The dotted error type, e.g. `permission.denied`. */
  readonly type: string;
  /** Structured detail the server attached (a field name, the blocking checks, ...). */
  readonly details: Record<string, unknown>;
  /** The server's `request_id` for this call (also its `request-id` header). */
  readonly requestId: string | null;

  constructor(init: { status: number; type: string; message: string; details?: Record<string, unknown>; requestId?: string | null; cause?: unknown }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.status = init.status;
    this.type = init.type;
    this.details = init.details ?? {};
    this.requestId = init.requestId ?? null;
  }

  /** Reads a non-2xx response into an error (its body is consumed). */
  static async fromResponse(response: Response): Promise<CheckfuError> {
    const headerId = response.headers.get("request-id");
    let body: unknown = null;
    const text = await response.text().catch(() => "");
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = null;
    }
    const envelope = isObject(body) && isObject(body["error"]) ? body["error"] : null;
    const requestId = isObject(body) && typeof body["request_id"] === "string" ? body["request_id"] : headerId;
    if (!envelope) {
      return new CheckfuError({
        status: response.status,
        type: response.status >= 500 ? "internal" : "http.unexpected",
        message: `HTTP ${response.status}${text ? `: ${text.slice(0, 200)}` : ""}`,
        requestId,
      });
    }
    return new CheckfuError({
      status: response.status,
      type: typeof envelope["type"] === "string" ? envelope["type"] : "unknown",
      message: typeof envelope["message"] === "string" ? envelope["message"] : `HTTP ${response.status}`,
      details: isObject(envelope["details"]) ? envelope["details"] : {},
      requestId,
    });
  }
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
