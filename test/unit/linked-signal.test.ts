import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { linkSignals } from '../../host/support/linked-signal';

describe('linkSignals', () => {
  it('aborts with the reason of whichever source aborts first, and leaves no listener on the other', () => {
    const host = new AbortController();
    const caller = new AbortController();
    using link = linkSignals([caller.signal, host.signal]);
    caller.abort(new Error('caller gone'));
    expect(link.signal!.aborted).toBe(true);
    expect((link.signal!.reason as Error).message).toBe('caller gone');
    expect(getEventListeners(host.signal, 'abort')).toHaveLength(0);
  });

  it('leaves nothing on a long-lived source after 10,000 links are disposed, as a host signal combined into every request must', () => {
    const host = new AbortController();
    for (let i = 0; i < 10_000; i++) {
      using link = linkSignals([new AbortController().signal, host.signal]);
      expect(link.signal!.aborted).toBe(false);
    }
    expect(getEventListeners(host.signal, 'abort')).toHaveLength(0);
    host.abort();
  });

  it('is already aborted when a source is, and is the one signal given when only one is', () => {
    const gone = AbortSignal.abort('stopped');
    const live = new AbortController().signal;
    expect(linkSignals([live, gone]).signal!.reason).toBe('stopped');
    expect(linkSignals([undefined, live]).signal).toBe(live);
    expect(linkSignals([undefined]).signal).toBeUndefined();
  });
});
