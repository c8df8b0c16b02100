import { ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import { WireError } from './wire-error';

interface Limit {
  max: number;
  /** Ids are counted in characters (what a client chose); what reaches a process or a file system, in UTF-8 bytes (what the kernel counts). */
  unit: 'characters' | 'bytes';
  why?: string;
}

/**
 * The bound of each string argument that has one short of the message limit (10 MiB, stdio and
 * HTTP): ids name a call or a session (a 10 MB call_id was a 10 MB request id and a 10 MB
 * submission row); a path, a command and a pattern over them could never run. `content`,
 * `old_string` and `new_string` are a file's bytes: the message limit is theirs.
 */
export const ARGUMENT_LIMITS: Readonly<Record<string, Limit>> = {
  session: { max: 256, unit: 'characters' },
  call_id: { max: 256, unit: 'characters' },
  // PATH_MAX counts the terminating NUL (host/sandbox/workspace-path.ts refuses the same, later).
  path: { max: 4095, unit: 'bytes', why: 'a Linux path' },
  // MAX_ARG_STRLEN: `sh -c COMMAND` is one argument, with its NUL.
  command: { max: 131_071, unit: 'bytes', why: 'one argument of a Linux process' },
  // Goes into search's own `sh -c` script, with room left for the rest of it.
  pattern: { max: 65_536, unit: 'bytes' },
};

/**
 * Refuses (-32602, `data.field`, `data.limit`) a tools/call whose id or string argument is over
 * its bound, before the call is looked up or submitted: nothing of it reaches the store. The value
 * is not echoed (a client's 1 MB id came back in the error).
 */
export function checkArgumentSizes(args: Record<string, unknown>): void {
  for (const [name, limit] of Object.entries(ARGUMENT_LIMITS)) {
    const v = args[name];
    if (typeof v !== 'string') continue;
    // Cheap first: a UTF-8 string has at least as many bytes as UTF-16 units, at most three per unit.
    if (v.length * (limit.unit === 'bytes' ? 3 : 1) <= limit.max) continue;
    const size = limit.unit === 'bytes' ? Buffer.byteLength(v) : v.length;
    if (size <= limit.max) continue;
    const field = `params.arguments.${name}`;
    throw new WireError(ErrorCode.InvalidParams, `invalid tools/call request: ${field} is ${size} ${limit.unit} long; it is at most ${limit.max} ${limit.unit}${limit.why ? ` (${limit.why})` : ''}`, {
      code: 'usage',
      field,
      limit: limit.max,
    });
  }
}
