// One error type for the gateway, mapped to the OpenAI error body in one place. Messages say what
// was wrong and what to do about it; anything that is not a GatewayError is a 500 whose details
// go to the log, not to the client.

export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'rate_limit_error'
  | 'server_error';

export interface OpenAIErrorBody {
  error: { message: string; type: ErrorType; param: string | null; code: string | null };
}

export class GatewayError extends Error {
  readonly type: ErrorType;
  readonly param: string | null;
  readonly code: string | null;
  readonly headers: Record<string, string>;

  constructor(
    readonly status: number,
    message: string,
    opts: { type?: ErrorType; param?: string | null; code?: string | null; headers?: Record<string, string> } = {},
  ) {
    super(message);
    this.name = 'GatewayError';
    this.type = opts.type ?? defaultType(status);
    this.param = opts.param ?? null;
    this.code = opts.code ?? null;
    this.headers = opts.headers ?? {};
  }

  toBody(): OpenAIErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

function defaultType(status: number): ErrorType {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  return status >= 500 ? 'server_error' : 'invalid_request_error';
}

/** A 400 about one request field. */
export function invalid(param: string | null, message: string, code: string | null = 'invalid_value'): GatewayError {
  return new GatewayError(400, message, { param, code });
}

/** Anything thrown maps to a GatewayError; unknown errors become a 500 that names no internals. */
export function asGatewayError(error: unknown, requestId: string): GatewayError {
  if (error instanceof GatewayError) return error;
  return new GatewayError(500, `internal error (request ${requestId}); the server log has the details`, {
    code: 'internal_error',
  });
}
