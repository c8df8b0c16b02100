import { httpAnswerError } from '../../host/kernel';

/** What the email service says about one operation id. */
export type Lookup = { found: true; messageId: string } | { found: false };

/**
 * The email service's two calls the example relies on: sending is idempotent by operation id
 * (the same id twice is accepted once), and an operation can be looked up by its id. Without the
 * second, a send caught in flight could only be recorded as uncertain.
 */
export interface EmailClient {
  send(m: { operationId: string; to: string; subject: string; body: string }, signal: AbortSignal): Promise<{ messageId: string }>;
  lookup(operationId: string, signal: AbortSignal): Promise<Lookup>;
}

/**
 * An {@link EmailClient} over the service's HTTP API (`POST /send`, `GET /operations/:id`).
 * Transport errors are left as `fetch` throws them: the effect protocol reads their causes (a
 * refused connection never left; a reset after writing may have been accepted). An answer that
 * refuses the send is typed as such (`httpAnswerError`): 4xx and 503 were not applied.
 */
export function httpEmailClient(baseUrl: string): EmailClient {
  return {
    async send(m, signal) {
      const res = await fetch(`${baseUrl}/send`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(m), signal });
      if (!res.ok) throw httpAnswerError(res.status, `send ${m.operationId}`, 'email_refused');
      return (await res.json()) as { messageId: string };
    },
    async lookup(operationId, signal) {
      const res = await fetch(`${baseUrl}/operations/${encodeURIComponent(operationId)}`, { signal });
      if (res.status === 404) return { found: false };
      if (!res.ok) throw httpAnswerError(res.status, `lookup ${operationId}`, 'email_lookup_failed');
      return { found: true, messageId: ((await res.json()) as { messageId: string }).messageId };
    },
  };
}
