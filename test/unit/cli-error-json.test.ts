import { afterEach, describe, expect, it } from 'vitest';
import { BerthError } from '../../host/errors';
import { reportError } from '../../host/cli/output';

const write = process.stderr.write.bind(process.stderr);
afterEach(() => {
  process.stderr.write = write;
});

/** What reportError writes to stderr. */
function reported(json: boolean, err: unknown): string {
  let out = '';
  process.stderr.write = ((chunk: string | Uint8Array) => ((out += String(chunk)), true)) as typeof process.stderr.write;
  try {
    reportError(json, err);
  } finally {
    process.stderr.write = write;
  }
  return out;
}

describe('berth --json reports every error as JSON on stderr', () => {
  it('a typed error as its own JSON, and a bug (an untyped error) as internal_error with its message, not as text', () => {
    expect(JSON.parse(reported(true, new BerthError('run_not_found', 'no run x', { ids: { runId: 'x' } })))).toMatchObject({ error: { code: 'run_not_found', message: 'no run x', ids: { runId: 'x' } } });
    // Before: "berth: internal error: ENOENT ..." as text, which a script reading JSON cannot parse.
    const bug = JSON.parse(reported(true, new Error("ENOENT: no such file or directory, open '/x'"))) as { error: Record<string, unknown> };
    expect(bug.error).toEqual({ code: 'internal_error', message: "ENOENT: no such file or directory, open '/x'", retryable: false, ids: {} });
    expect(reported(false, new Error('boom'))).toBe('berth: internal error: boom (run again with --debug for the stack trace)\n');
  });
});
