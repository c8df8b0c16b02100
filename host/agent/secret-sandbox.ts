import type { ToolSandbox } from '../../tools';
import type { ExecOptions, ExecResult, Lease, OutputStream } from '../sandbox';
import { removeStaleSecretFiles, ScrubbedStream, withSecrets } from '../secrets';
import type { ToolSecrets } from './run-secrets';

/** Characters kept per stream when the caller sets no cap (the sandbox's default is 64 KiB). */
const DEFAULT_CAP = 64 * 1024;

/**
 * The sandbox as a tool sees it while the run has secrets. Each exec gets the tool's granted
 * secrets for that exec only ({@link withSecrets}: its environment or a tmpfs file removed after),
 * and its output, live and returned, is scrubbed of all the run's secrets before the tool sees it.
 * File operations pass through: the tool's output is scrubbed as a whole afterwards, and `edit`
 * must hash a file's real bytes.
 */
export function secretSandbox(lease: Lease, secrets: ToolSecrets): ToolSandbox {
  return {
    exec: (cmd, opts = {}) =>
      withSecrets(lease, secrets.granted, (secretEnv) =>
        // Secrets last: a tool's own `env` must not shadow what the manifest grants.
        scrubbedExec(lease, cmd, { ...opts, env: { ...opts.env, ...secretEnv } }, secrets),
      ),
    readFile: (path, opts) => lease.readFile(path, opts),
    writeFile: (path, data, opts) => lease.writeFile(path, data, opts),
    list: (path) => lease.list(path),
  };
}

/**
 * Output is scrubbed from the raw chunks (every chunk reaches `onOutput` before the sandbox caps
 * it), and the returned text is the scrubbed stream capped here, never the sandbox's capped text.
 */
async function scrubbedExec(lease: Lease, cmd: string | string[], opts: ExecOptions, secrets: ToolSecrets): Promise<ExecResult> {
  const cap = opts.outputCapBytes ?? DEFAULT_CAP;
  const streams = { stdout: new ScrubbedStream(secrets.all, cap), stderr: new ScrubbedStream(secrets.all, cap) };
  const forward = (stream: OutputStream, text: string) => {
    if (text && opts.onOutput) opts.onOutput(stream, Buffer.from(text, 'utf8'));
  };
  const r = await lease.exec(cmd, { ...opts, onOutput: (stream, chunk) => forward(stream, streams[stream].push(chunk)) });
  forward('stdout', streams.stdout.end());
  forward('stderr', streams.stderr.end());
  return { ...r, stdout: streams.stdout.text(), stderr: streams.stderr.text(), truncated: r.truncated || streams.stdout.truncated || streams.stderr.truncated };
}

const swept = new WeakSet<Lease>();

/**
 * Removes secret files a host that died mid-exec left in the container, once per lease
 * in this process, before any tool of the run runs: otherwise a tool not given the secret could
 * read it there. Tool calls of a session take turns, so nothing of this run is using them.
 */
export async function sweepSecretFiles(lease: Lease): Promise<void> {
  if (swept.has(lease)) return;
  if (await removeStaleSecretFiles(lease)) swept.add(lease);
}
