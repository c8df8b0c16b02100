import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { BASELINE_EVERY, DocumentTypes } from '../../host/kernel';
import { isBerthError } from '../../host/errors';
import { tempStore } from '../support/temp-store';

const Counter = z.strictObject({ total: z.number(), items: z.array(z.string()) });
const CounterOp = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('add'), n: z.number() }),
  z.strictObject({ type: z.literal('push'), item: z.string() }),
]);
type C = z.infer<typeof Counter>;
type O = z.infer<typeof CounterOp>;

function types() {
  const d = new DocumentTypes();
  d.register<C, O>({
    type: 'counter',
    state: Counter,
    op: CounterOp,
    initial: { total: 0, items: [] },
    apply: (s, op) => (op.type === 'add' ? { ...s, total: s.total + op.n } : { ...s, items: [...s.items, op.item] }),
  });
  return d;
}

let t: ReturnType<typeof tempStore>;
beforeEach(async () => {
  t = tempStore();
  await t.store.commit({ sessionId: 's', label: 'init', createSession: {} });
});
afterEach(() => t.cleanup());

describe('documents', () => {
  it('rebuilds from the newest baseline plus later operations to exactly the live state', async () => {
    const docs = types();
    let live: C = { total: 0, items: [] };
    const create = await docs.toOps([{ documentId: 'd', create: { type: 'counter' } }], null, (id) => t.store.getDocument(id));
    expect((await t.store.commit({ sessionId: 's', label: 'c', documentOps: create })).ok).toBe(true);
    for (let i = 1; i <= 40; i++) {
      const op: O = i % 3 === 0 ? { type: 'push', item: `i${i}` } : { type: 'add', n: i };
      live = op.type === 'add' ? { ...live, total: live.total + op.n } : { ...live, items: [...live.items, op.item] };
      const ops = await docs.toOps([{ documentId: 'd', op }], null, (id) => t.store.getDocument(id));
      expect((await t.store.commit({ sessionId: 's', label: 'op', documentOps: ops })).ok).toBe(true);
      const stored = (await t.store.getDocument('d'))!;
      expect(docs.rebuild(stored)).toEqual(live);
      expect(stored.version).toBe(i + 1);
      // Reads never replay more than one baseline interval.
      expect(stored.ops.length).toBeLessThan(BASELINE_EVERY);
    }
    expect((await t.store.getDocument('d'))!.baselineVersion).toBe(32);
  });

  it('chains several operations on one document within a single commit', async () => {
    const docs = types();
    const ops = await docs.toOps(
      [
        { documentId: 'd', create: { type: 'counter' } },
        { documentId: 'd', op: { type: 'add', n: 2 } },
        { documentId: 'd', op: { type: 'push', item: 'x' } },
      ],
      null,
      (id) => t.store.getDocument(id),
    );
    expect(ops.map((o) => o.expectVersion)).toEqual([0, 1, 2]);
    expect((await t.store.commit({ sessionId: 's', label: 'c', documentOps: ops })).ok).toBe(true);
    expect(docs.rebuild((await t.store.getDocument('d'))!)).toEqual({ total: 2, items: ['x'] });
  });

  it('rejects an operation based on a stale version', async () => {
    const docs = types();
    const read = (id: string) => t.store.getDocument(id);
    await t.store.commit({ sessionId: 's', label: 'c', documentOps: await docs.toOps([{ documentId: 'd', create: { type: 'counter' } }], null, read) });
    const a = await docs.toOps([{ documentId: 'd', op: { type: 'add', n: 1 } }], null, read);
    const b = await docs.toOps([{ documentId: 'd', op: { type: 'add', n: 5 } }], null, read);
    expect((await t.store.commit({ sessionId: 's', label: 'a', documentOps: a })).ok).toBe(true);
    const r = await t.store.commit({ sessionId: 's', label: 'b', documentOps: b });
    expect(r).toEqual({ ok: false, conflict: { kind: 'document_version', documentId: 'd', expected: 1, actual: 2 } });
  });

  it('refuses an operation its zod schema rejects, naming the document and field', async () => {
    const docs = types();
    const read = (id: string) => t.store.getDocument(id);
    await t.store.commit({ sessionId: 's', label: 'c', documentOps: await docs.toOps([{ documentId: 'd', create: { type: 'counter' } }], null, read) });
    await expect(docs.toOps([{ documentId: 'd', op: { type: 'add', n: 'three' } }], null, read)).rejects.toSatisfy(
      (e) => isBerthError(e, 'document_invalid') && /document d/.test((e as Error).message) && /n/.test((e as Error).message),
    );
  });
});
