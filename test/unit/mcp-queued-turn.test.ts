import { describe, expect, it } from 'vitest';
import { KeyedLock } from '../../host/agent/session-lock';
import { isBerthError } from '../../host/errors';
import { inTurn } from '../../host/mcp/queued-turn';

/** A call holding the session's turn until `release`. */
function holding(lock: KeyedLock) {
  let release!: () => void;
  const done = inTurn(lock, 's', {}, () => new Promise<string>((r) => (release = () => r('first'))));
  return { done, release: () => release() };
}

describe('a call waiting for its session turn (host/mcp/queued-turn.ts)', () => {
  it('is refused call_cancelled as soon as its client cancels it, before the call ahead ends, and never runs', async () => {
    const lock = new KeyedLock();
    const first = holding(lock);
    const cancel = new AbortController();
    let ran = false;
    const queued = inTurn(lock, 's', { cancel: cancel.signal }, async () => void (ran = true));
    cancel.abort('gave up');
    const err = await queued.catch((e: unknown) => e);
    expect(isBerthError(err, 'call_cancelled')).toBe(true);
    first.release();
    expect(await first.done).toBe('first');
    // Its place in the queue is reached and passed on without running it.
    expect(await inTurn(lock, 's', {}, async () => 'next')).toBe('next');
    expect(ran).toBe(false);
  });

  it('keeps the calls behind a cancelled one in their order: each runs once the one ahead of it ends', async () => {
    const lock = new KeyedLock();
    const first = holding(lock);
    const order: string[] = [];
    const cancel = new AbortController();
    const dropped = inTurn(lock, 's', { cancel: cancel.signal }, async () => void order.push('dropped')).catch(() => 'refused');
    const second = inTurn(lock, 's', { cancel: new AbortController().signal }, async () => void order.push('second'));
    const third = inTurn(lock, 's', {}, async () => void order.push('third'));
    cancel.abort();
    expect(await dropped).toBe('refused');
    expect(order).toEqual([]);
    first.release();
    await Promise.all([second, third]);
    expect(order).toEqual(['second', 'third']);
  });

  it('leaves a cancel that comes once the call has its turn to the call itself (it stops the call\'s run)', async () => {
    const lock = new KeyedLock();
    const cancel = new AbortController();
    let finish!: () => void;
    const running = inTurn(lock, 's', { cancel: cancel.signal }, () => new Promise<string>((r) => (finish = () => r('its own outcome'))));
    await new Promise((r) => setImmediate(r));
    cancel.abort();
    finish();
    expect(await running).toBe('its own outcome');
  });

  it('runs nothing for a call cancelled before it asked for its turn', async () => {
    const lock = new KeyedLock();
    const cancel = new AbortController();
    cancel.abort();
    let ran = false;
    const err = await inTurn(lock, 's', { cancel: cancel.signal }, async () => void (ran = true)).catch((e: unknown) => e);
    expect(isBerthError(err, 'call_cancelled')).toBe(true);
    expect(ran).toBe(false);
  });

  it('lets go at once of a call whose request ended otherwise (its client timed out, or went away), and still runs it in its turn', async () => {
    const lock = new KeyedLock();
    const first = holding(lock);
    const request = new AbortController();
    let ran = false;
    const queued = inTurn(lock, 's', { signal: request.signal, cancel: new AbortController().signal }, async () => void (ran = true));
    request.abort('MCP error -32001: Request timed out');
    const err = await queued.catch((e: unknown) => e);
    expect(isBerthError(err, 'call_not_awaited')).toBe(true);
    expect(ran).toBe(false);
    first.release();
    await inTurn(lock, 's', {}, async () => {});
    expect(ran).toBe(true);
  });

  it('refuses call_cancelled, not call_not_awaited, when the client cancel follows the request\'s abort one turn later (as cancelledByClient decides it)', async () => {
    const lock = new KeyedLock();
    const first = holding(lock);
    const request = new AbortController();
    const cancel = new AbortController();
    request.signal.addEventListener('abort', () => setImmediate(() => cancel.abort()));
    let ran = false;
    const queued = inTurn(lock, 's', { signal: request.signal, cancel: cancel.signal }, async () => void (ran = true));
    request.abort('gave up');
    const err = await queued.catch((e: unknown) => e);
    expect(isBerthError(err, 'call_cancelled')).toBe(true);
    first.release();
    await first.done;
    await inTurn(lock, 's', {}, async () => {});
    expect(ran).toBe(false);
  });
});
