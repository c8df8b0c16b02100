/**
 * One signal that aborts when any of `signals` does (with that one's reason), detached from them
 * when disposed. Not `AbortSignal.any`: on Node 20 each source keeps a reference to every signal it
 * was ever combined into until the source itself aborts, so a long-lived source (a host's own
 * signal, combined into each request's) grew by one entry per call for the life of the process.
 * With fewer than two signals, the one given (or none) and nothing to detach.
 */
export function linkSignals(signals: Array<AbortSignal | undefined>): { signal: AbortSignal | undefined } & Disposable {
  const given = signals.filter((s): s is AbortSignal => s !== undefined);
  if (given.length < 2) return { signal: given[0], [Symbol.dispose]: () => {} };
  const early = given.find((s) => s.aborted);
  if (early) return { signal: AbortSignal.abort(early.reason), [Symbol.dispose]: () => {} };
  const ctl = new AbortController();
  const detach = () => {
    for (const s of given) s.removeEventListener('abort', onAbort);
  };
  function onAbort(this: AbortSignal) {
    detach();
    ctl.abort(this.reason);
  }
  for (const s of given) s.addEventListener('abort', onAbort, { once: true });
  return { signal: ctl.signal, [Symbol.dispose]: detach };
}
