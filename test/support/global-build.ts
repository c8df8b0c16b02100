import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

/**
 * Before any test file: the CLI's bundle as `berth` runs it (host/cli/bin.mjs), rebuilt when a
 * source is newer. Tests start the real command, whose start with V8's code cache costs about
 * half the CPU of a freshly bundled ES module's (0.35 s against 0.8 s, measured session 33), and
 * a full suite starts the CLI well over a thousand times on a 2-core machine. Without it a stale
 * bundle would send each start through tsx (~1.9 s).
 */
export default function setup(): void {
  execFileSync(process.execPath, [join(process.cwd(), 'host', 'cli', 'bundle.mjs'), '--if-stale'], { stdio: 'inherit' });
}
