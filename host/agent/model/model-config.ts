import { z } from 'zod';

/**
 * Which model to call and how. The API key is never part of it: only the name of the environment
 * variable that holds the key (`apiKeyEnv`), read at request time, so the key never reaches the
 * store, the logs or an entry.
 */
export const ModelConfigSchema = z.strictObject({
  baseUrl: z
    .string()
    .url()
    .refine((u) => !carriesCredentials(u), 'an endpoint without credentials: no user:password@ and no key, token, secret or password in its query (the key is read from the variable apiKeyEnv names, so it never reaches the store)')
    .describe('OpenAI-compatible endpoint, e.g. https://api.openai.com/v1'),
  model: z.string().min(1),
  apiKeyEnv: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name').default('OPENAI_API_KEY'),
  stream: z.boolean().default(true),
  /** One request's limit, from sending to the last streamed byte. */
  timeoutMs: z.number().int().positive().default(120_000),
  /** Requests per generation before it gives up (first try included). */
  maxAttempts: z.number().int().min(1).default(5),
  /** First retry delay; doubles per attempt, capped at `maxBackoffMs`, unless the server says when. */
  backoffMs: z.number().int().min(0).default(1_000),
  maxBackoffMs: z.number().int().min(0).default(30_000),
  temperature: z.number().min(0).max(2).optional(),
  maxTokens: z.number().int().positive().optional(),
  /**
   * The model's context window in tokens (prompt and answer together). Set, every request is kept
   * within it by durable compaction (host/agent/context-budget.ts); unset, only a window the
   * server states in a context-overflow refusal is known.
   */
  contextTokens: z.number().int().positive().optional(),
});
/** Whether a URL holds what looks like a credential: a user part, or a query parameter named like one. */
export function carriesCredentials(url: string): boolean {
  try {
    const u = new URL(url);
    return u.username !== '' || u.password !== '' || [...u.searchParams.keys()].some((k) => /key|token|secret|passw|sig|auth/i.test(k));
  } catch {
    return false;
  }
}

export type ModelConfig = z.infer<typeof ModelConfigSchema>;
export type ModelConfigInput = z.input<typeof ModelConfigSchema>;
