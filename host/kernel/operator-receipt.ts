import { z } from 'zod';

/**
 * The receipt of an effect settled by an operator instead of by the service: who decided, what,
 * and when. Typed, so that readers that expect a service receipt (a message id) can tell the two
 * apart and accept either, rather than reading one as the other.
 */
export const OperatorReceipt = z.strictObject({
  type: z.literal('operator-decision'),
  decision: z.enum(['accept', 'reject', 'restore']),
  by: z.string(),
  at: z.number(),
  note: z.string(),
  snapshotId: z.string().optional(),
});
export type OperatorReceipt = z.infer<typeof OperatorReceipt>;

export function operatorReceipt(by: string, decision: OperatorReceipt['decision'], at: number, note: string, snapshotId?: string): OperatorReceipt {
  return { type: 'operator-decision', decision, by, at, note, ...(snapshotId ? { snapshotId } : {}) };
}

export function isOperatorReceipt(r: unknown): r is OperatorReceipt {
  return OperatorReceipt.safeParse(r).success;
}
