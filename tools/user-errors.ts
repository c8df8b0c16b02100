import { isBerthError } from '../host/errors';
import type { ToolOutput } from './tool';

/** Sandbox errors that are the call's fault (bad path, missing file), not the sandbox's. */
const CALLER_CODES = new Set(['not_found', 'not_a_file', 'not_a_directory', 'is_a_directory', 'path_escape', 'path_invalid', 'file_too_large', 'disk_limit']);

/**
 * Runs a file operation and turns a caller's mistake into an error output the model can read
 * (`refused`: the call did nothing, so its result's status is `error`);
 * anything else (engine gone, container lost) still throws, because it is not an answer.
 */
export async function answerOrUserError(f: () => Promise<ToolOutput>): Promise<ToolOutput> {
  try {
    return await f();
  } catch (err) {
    if (isBerthError(err) && CALLER_CODES.has(err.code)) return { content: `error: ${err.message}`, isError: true, refused: true, detail: { code: err.code } };
    throw err;
  }
}
