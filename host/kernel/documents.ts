import type { z } from 'zod';
import { BerthError } from '../errors';
import type { Json, StoredDocument } from '../model';
import type { DocumentOpInput } from '../store';
import type { DocumentWrite } from './handler';

/**
 * A typed, versioned document: `state = apply(...apply(baseline, op1)..., opN)`.
 * Both state and operations are validated by zod on every write, so the store never holds a
 * value its readers cannot parse.
 */
export interface DocumentType<S extends Json = Json, O extends Json = Json> {
  type: string;
  state: z.ZodType<S>;
  op: z.ZodType<O>;
  initial: S;
  apply(state: S, op: O): S;
}

/** A baseline is written every this many operations, bounding replay on read. */
export const BASELINE_EVERY = 16;

export class DocumentTypes {
  private readonly types = new Map<string, DocumentType>();

  register<S extends Json, O extends Json>(t: DocumentType<S, O>): void {
    this.types.set(t.type, t as unknown as DocumentType);
  }

  get(type: string, documentId?: string): DocumentType {
    const t = this.types.get(type);
    if (!t) throw new BerthError('document_type_unknown', `no document type "${type}" is registered`, { ids: { documentId } });
    return t;
  }

  /** Current state: the newest baseline plus the operations after it. */
  rebuild(doc: StoredDocument): Json {
    const t = this.get(doc.type, doc.id);
    let state = doc.baseline;
    for (const { op } of doc.ops) if (op !== null) state = t.apply(state, op);
    return state;
  }

  /**
   * Turns a phase's document writes into store operations with compare-and-set versions.
   * `current` reads a document's stored form; several writes to one document chain their versions.
   */
  async toOps(
    writes: DocumentWrite[],
    runId: string | null,
    current: (id: string) => Promise<StoredDocument | undefined>,
  ): Promise<DocumentOpInput[]> {
    const live = new Map<string, { type: DocumentType; state: Json; version: number }>();
    const ops: DocumentOpInput[] = [];
    for (const w of writes) {
      if ('create' in w) {
        const t = this.get(w.create.type, w.documentId);
        const initial = parseWith(t.state, w.create.initial ?? t.initial, w.documentId, 'initial state');
        ops.push({ documentId: w.documentId, create: { type: t.type, runId, initial }, expectVersion: 0, op: null });
        live.set(w.documentId, { type: t, state: initial, version: 1 });
        continue;
      }
      let doc = live.get(w.documentId);
      if (!doc) {
        const stored = await current(w.documentId);
        if (!stored) throw new BerthError('document_not_found', `document ${w.documentId} does not exist`, { ids: { documentId: w.documentId } });
        doc = { type: this.get(stored.type, stored.id), state: this.rebuild(stored), version: stored.version };
      }
      const op = parseWith(doc.type.op, w.op, w.documentId, 'operation');
      const state = parseWith(doc.type.state, doc.type.apply(doc.state, op), w.documentId, 'resulting state');
      const next = doc.version + 1;
      ops.push({
        documentId: w.documentId,
        expectVersion: doc.version,
        op,
        ...(next % BASELINE_EVERY === 0 ? { baseline: state } : {}),
      });
      live.set(w.documentId, { type: doc.type, state, version: next });
    }
    return ops;
  }
}

function parseWith<T>(schema: z.ZodType<T>, value: unknown, documentId: string, what: string): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const problems = r.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
  throw new BerthError('document_invalid', `document ${documentId}: ${what} is invalid: ${problems}`, {
    ids: { documentId },
    details: { issues: r.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })) },
  });
}
