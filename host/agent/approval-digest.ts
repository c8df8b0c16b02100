import { createHash } from 'node:crypto';
import { canonicalJson } from '../../environment';

/**
 * The scope of an approval: sha256 over the tool name and its canonical (key-sorted) arguments.
 * An approval is for exactly this call; the same tool with other arguments needs its own.
 */
export function approvalDigest(tool: string, args: unknown): string {
  return `sha256:${createHash('sha256').update(canonicalJson({ tool, args })).digest('hex')}`;
}

/** A short stable id for the approval of one call of one run. */
export function approvalId(runId: string, toolCallId: string): string {
  return `apr_${createHash('sha256').update(`${runId}\0${toolCallId}`).digest('hex').slice(0, 16)}`;
}
