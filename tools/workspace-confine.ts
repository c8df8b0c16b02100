import type { ExecResult } from '../host/sandbox';
import { shellQuote } from './shell-quote';
import type { ToolOutput } from './tool';

/** Exit statuses of {@link confinedPrelude}: the path is missing, or it leads outside the workspace. */
const MISSING = 121;
const ESCAPES = 120;

/**
 * Shell that sets `$p` to the tool's `path` argument and refuses it unless it exists and its real
 * path (every symlink followed, by the kernel inside the sandbox) lies in the workspace: the
 * command's working directory, whose real path is `pwd -P`. For the tools that walk a tree with a
 * command of their own (`list_files` recursive, `search`); read_file and write_file go through the
 * sandbox's path resolver (host/sandbox/path-resolver.ts), which has no walk to offer. Checked in
 * the same command as the walk, so it costs no round trip. A command running at the same time may
 * swap a directory for a symlink after the check: the worst outcome is a listing from elsewhere in
 * the sandbox, which `exec` may read anyway (the confinement keeps the tools' answers about the
 * workspace, it is no security boundary).
 */
export function confinedPrelude(path: string): string {
  return [
    `p=${shellQuote(path)}`,
    // realpath and find would take a leading "-" for an option.
    'case $p in -*) p=./$p;; esac',
    'root=$(pwd -P) || exit 1',
    `[ -e "$p" ] || exit ${MISSING}`,
    `real=$(realpath "$p") || exit ${MISSING}`,
    `case $real/ in "$root"/*) ;; *) printf '%s|%s' "$root" "$real" >&2; exit ${ESCAPES};; esac`,
  ].join('\n');
}

/**
 * The refusal of a command run after {@link confinedPrelude}, worded as the sandbox's own refusals
 * (`path_escape`, `not_found`) so a read_file and a search answer a path the same way; null when
 * the path passed.
 */
export function confineRefusal(r: ExecResult, path: string): ToolOutput | null {
  if (r.exitCode === MISSING) return { content: `error: ${path} does not exist in the sandbox`, isError: true, refused: true, detail: { code: 'not_found' } };
  if (r.exitCode !== ESCAPES) return null;
  const [root, real] = r.stderr.split('|');
  const where = real && real !== path ? ` (it resolves to ${real})` : '';
  return { content: `error: path "${path}" leaves the workspace ${root ?? ''}${where}`, isError: true, refused: true, detail: { code: 'path_escape' } };
}
