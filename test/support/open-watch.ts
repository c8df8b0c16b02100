import { spawn } from 'node:child_process';

/**
 * Watches files for every open and read (inotify, through `inotifywait`): evidence that the host
 * opened a file, whoever asked it to. `stop()` returns the events seen, one `path EVENTS` a line.
 * A probe (`expectSeen`) proves the watch works before an empty list is taken as "never opened".
 */
export async function watchOpens(paths: string[]): Promise<{ events: () => string[]; waitFor: (path: string) => Promise<void>; stop: () => Promise<string[]> }> {
  const child = spawn('inotifywait', ['-m', '-e', 'open,access', '--format', '%w%f %e', ...paths], { stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let out = '';
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString();
    const parts = out.split('\n');
    out = parts.pop()!;
    lines.push(...parts);
  });
  await new Promise<void>((resolve, reject) => {
    let err = '';
    child.stderr.on('data', (c: Buffer) => {
      err += c.toString();
      if (err.includes('Watches established')) resolve();
    });
    child.on('exit', (code) => reject(new Error(`inotifywait exited ${code}: ${err}`)));
    child.on('error', reject);
  });
  const waitFor = async (path: string) => {
    for (let i = 0; i < 600 && !lines.some((l) => l.startsWith(`${path} `)); i++) await new Promise((r) => setTimeout(r, 50));
    if (!lines.some((l) => l.startsWith(`${path} `))) throw new Error(`no open of ${path} seen in 30 s`);
  };
  return {
    events: () => [...lines],
    waitFor,
    stop: async () => {
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
      return lines;
    },
  };
}
