/**
 * The server's one error shape: OpenAI's `{ error: { message, type, param, code } }`. Handlers throw an
 * `ApiError`; the app's `onError` turns it (and anything unexpected) into a response in one place.
 *
 * @example
 * ```ts
 * import { ApiError, invalidValue } from "./errors.ts";
 * throw new ApiError(400, "max_tokens: expected an integer >= 1, got \"ten\"", "max_tokens");
 * throw invalidValue("top_p", "a number in (0, 1]", 2); // the same shape, for any field
 * ```
 * @module
 */

/** OpenAI's error body. */
export interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** A refusal with its HTTP status, the request field it concerns, and extra response headers. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = "ApiError";
  }
}

/** The OpenAI error `type` for an HTTP status. */
export function errorType(status: number): string {
  if (status === 401) return "authentication_error";
  if (status === 404) return "not_found_error";
  if (status === 413) return "request_too_large";
  if (status === 429) return "rate_limit_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

/** The body for an error. */
export function errorBody(
  status: number,
  message: string,
  param: string | null = null,
  code: string | null = null,
): ErrorBody {
  return { error: { message, type: errorType(status), param, code } };
}

/**
 * The 400 for a request field of the wrong type or range: `field: expected ..., got ...`, naming the
 * field in `param`. A number is shown as JavaScript prints it, so `1e999` (parsed to Infinity) says
 * `got Infinity` where JSON would say `null`; anything else as JSON, cut to 60 characters.
 *
 * @example
 * ```ts
 * import { invalidValue } from "./errors.ts";
 * invalidValue("temperature", "a number in [0, 100]", Infinity).message; // "temperature: expected a number in [0, 100], got Infinity"
 * ```
 */
export function invalidValue(field: string, expected: string, got: unknown): ApiError {
  const shown = typeof got === "number" ? String(got) : JSON.stringify(got)?.slice(0, 60) ?? String(got);
  return new ApiError(400, `${field}: expected ${expected}, got ${shown}`, field, "invalid_value");
}
