import type Dockerode from 'dockerode';
import { FrameDemuxer } from './docker-frames';
import { isNotFound } from './engine-errors';

/** How long the failure path may spend asking the engine why the container is gone. */
const ASK_MS = 5_000;

/**
 * Why a container that refused a command is not running, as a clause for an error message: its
 * exit code and time, an OOM kill, the engine's error, and the last lines it printed (the lease
 * watchdog says there when it stopped the sandbox). Empty when the engine cannot tell in time: the
 * caller's error must not wait on a wedged engine.
 */
export async function whyNotRunning(container: Dockerode.Container): Promise<string> {
  const ask = async (): Promise<string> => {
    let state: Dockerode.ContainerInspectInfo['State'];
    try {
      state = (await container.inspect()).State;
    } catch (err) {
      return isNotFound(err) ? 'the container was removed' : '';
    }
    if (state.Running && !state.Paused) return '';
    const parts = [`the container is ${state.Status} (exit code ${state.ExitCode}${state.FinishedAt && !state.FinishedAt.startsWith('0001') ? `, since ${state.FinishedAt}` : ''})`];
    if (state.OOMKilled) parts.push('killed at its memory limit');
    if (state.Error) parts.push(`engine error: ${state.Error}`);
    const last = await lastLines(container).catch(() => '');
    if (last) parts.push(`it last printed: ${last}`);
    return parts.join('; ');
  };
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<string>((resolve) => (timer = setTimeout(() => resolve(''), ASK_MS)));
  try {
    return await Promise.race([ask(), late]);
  } finally {
    clearTimeout(timer);
  }
}

async function lastLines(container: Dockerode.Container): Promise<string> {
  const raw = (await container.logs({ stdout: true, stderr: true, tail: 3, follow: false })) as unknown as Buffer;
  const chunks: Buffer[] = [];
  new FrameDemuxer((_s, chunk) => chunks.push(chunk)).push(Buffer.from(raw));
  return Buffer.concat(chunks).toString('utf8').trim().split('\n').slice(-3).join(' | ').slice(0, 500);
}
