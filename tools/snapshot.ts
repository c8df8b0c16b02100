import { z } from 'zod';
import type { ToolDefinition } from './tool';

const Input = z.strictObject({});
export type SnapshotInput = z.infer<typeof Input>;

/**
 * `snapshot`: saves the sandbox as it is now, tied to this call's committed result (the host
 * takes the snapshot after the call, as after any mutating call under `after-each-step`), so a
 * session under `on-demand` or `never` gets a point to fork from or restore to. Taking one again
 * is harmless: replay `safe`. Not offered to models unless a run names it.
 */
export const snapshot: ToolDefinition<SnapshotInput> = {
  name: 'snapshot',
  description: 'Save the sandbox (workspace and files) as it is now; the result names the snapshot. A later fork or restore can start from it.',
  input: Input,
  replay: 'safe',
  mutates: true,
  snapshots: true,
  offeredByDefault: false,
  contextCap: 1_000,
  run: async () => ({ content: 'snapshot requested', isError: false }),
};
