import { z } from 'zod';
import type { DocumentType } from '../kernel';

/**
 * The run's pointer to its sandbox: which lease is current and which snapshot (with its workspace
 * digest) covers the newest committed sandbox change. Changed only in the commit that makes it
 * true, so recovery always reads a consistent pair.
 */
export const SandboxPointer = z.strictObject({
  leaseId: z.string().nullable(),
  snapshotId: z.string().nullable(),
  workspaceDigest: z.string().nullable(),
});
export type SandboxPointer = z.infer<typeof SandboxPointer>;

const SandboxPointerOp = SandboxPointer.partial();

export const SANDBOX_DOC = 'plan-sandbox';

export const sandboxDocType: DocumentType<SandboxPointer, z.infer<typeof SandboxPointerOp>> = {
  type: SANDBOX_DOC,
  state: SandboxPointer,
  op: SandboxPointerOp,
  initial: { leaseId: null, snapshotId: null, workspaceDigest: null },
  apply: (state, op) => ({ ...state, ...op }),
};

export const sandboxDocId = (runId: string) => `${runId}:sandbox`;
