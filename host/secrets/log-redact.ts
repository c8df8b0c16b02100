/**
 * Fields pino replaces with `[Redacted]` wherever a log call puts them (top level or one level
 * down). Output text is scrubbed by value before it reaches a logger; these catch the fields that
 * hold a secret by their nature.
 */
export const LOG_REDACT_PATHS = [
  'apiKey', '*.apiKey', 'secret', '*.secret', 'secrets', '*.secrets', 'password', '*.password',
  'token', '*.token', 'authorization', '*.authorization', 'headers.authorization', '*.headers.authorization',
  'env', '*.env', '*.secretValue',
];
