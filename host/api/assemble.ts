import { writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import type Dockerode from 'dockerode';
import pino, { type Logger } from 'pino';
import { LocalArtifactStore, RegistryArtifactStore, type ArtifactStore } from '../artifacts';
import { egressPort } from '../egress';
import { newDockerClient, SandboxHost, SERVER_STORE_LOCATION } from '../sandbox';
import { LOG_REDACT_PATHS } from '../secrets';
import { isPostgresUrl, lazyPostgresStore, openSqliteStore, type Store } from '../store';
import { systemClock, type Clock } from '../support';
import { RepeatCollapser } from './log-repeats';

/**
 * The parts every way of driving runs shares, built once: the store, the Docker client and the
 * sandbox host over it, the artifact store, the logger, the clock, this host's id and the
 * registry snapshots travel through. The CLI's context and {@link Berth} both are these parts.
 */
export interface HostParts {
  store: Store;
  docker: Dockerode;
  sandbox: SandboxHost;
  artifacts: ArtifactStore;
  logger: Logger;
  clock: Clock;
  /** Stable across restarts of this machine's host, so the sweeper recognises what a dead process left. */
  hostId: string;
  /** The host's snapshot registry (`BERTH_REGISTRY`); a manifest's `snapshot.registry` wins. */
  registry?: string;
}

/** What {@link assemble} takes; everything but the store has a default from the environment. */
export interface OpenOptions {
  /** A SQLite file path or a `postgres://` URL (a fleet's shared store). */
  store: string;
  /** A Docker client; default from `BERTH_DOCKER_SOCKET`, else `DOCKER_HOST`, else the local socket. */
  docker?: Dockerode;
  /** `host:port` of the snapshot registry; default `BERTH_REGISTRY` (unset: snapshots stay on this engine). */
  registry?: string;
  /** Where step artifacts go; default `BERTH_ARTIFACT_REGISTRY`, else `BERTH_ARTIFACT_DIR`, else `artifacts/` beside the store. */
  artifacts?: ArtifactStore;
  /** Default: pino at `BERTH_LOG_LEVEL` (warn) on stderr, secrets redacted. */
  logger?: Logger;
  clock?: Clock;
  /** Default `BERTH_HOST_ID`, else the machine's hostname. */
  hostId?: string;
}

/** `$BERTH_ARTIFACT_DIR`, else `artifacts/` beside the store file: content-addressed blobs of step artifacts. */
export function artifactDir(storeFile: string): string {
  // A PostgreSQL store has no directory of its own: the artifacts go under .berth/ here.
  const beside = isPostgresUrl(storeFile) ? resolve('.berth') : dirname(storeFile);
  return resolve(process.env.BERTH_ARTIFACT_DIR ?? join(beside, 'artifacts'));
}

/**
 * The host's artifact store: `$BERTH_ARTIFACT_REGISTRY` (`http(s)://host:port/<repository>`, OCI
 * blobs over the distribution API), else the local directory of {@link artifactDir}.
 */
export function artifactStore(storeFile: string): ArtifactStore {
  const registry = process.env.BERTH_ARTIFACT_REGISTRY;
  return registry ? new RegistryArtifactStore(registry) : new LocalArtifactStore(artifactDir(storeFile));
}

/**
 * The Docker client: `BERTH_DOCKER_SOCKET` names a socket; else `DOCKER_HOST` (`unix://PATH` or
 * `tcp://HOST:PORT`, as the docker CLI reads it) picks the engine, so one store can be driven from
 * another host's engine (`DOCKER_HOST=unix:///run/b.sock berth resume RUN`).
 */
export function dockerClient(): Dockerode {
  if (process.env.BERTH_DOCKER_SOCKET) return newDockerClient({ socketPath: process.env.BERTH_DOCKER_SOCKET });
  const host = process.env.DOCKER_HOST;
  if (host?.startsWith('unix://')) return newDockerClient({ socketPath: host.slice('unix://'.length) });
  if (host) return newDockerClient();
  return newDockerClient({ socketPath: '/var/run/docker.sock' });
}

/** The default logger: stderr (stdout stays a command's answer), synchronous so no line is lost at exit, secrets redacted. */
export function defaultLogger(opts: { debug?: boolean } = {}): Logger {
  const briefError = (err: unknown) =>
    err instanceof Error ? { type: err.name, message: err.message, ...((err as { code?: unknown }).code !== undefined ? { code: (err as { code?: unknown }).code } : {}) } : err;
  const withoutStack = (o: Record<string, unknown>): Record<string, unknown> => {
    if (!('stack' in o)) return o;
    const { stack: _stack, ...rest } = o;
    return rest;
  };
  // Without --debug or a chosen level or format, people read these lines: plain text, not JSON.
  const human = !opts.debug && process.env.BERTH_LOG_LEVEL === undefined && process.env.BERTH_LOG_FORMAT !== 'json';
  return pino(
    {
      level: process.env.BERTH_LOG_LEVEL ?? (opts.debug ? 'debug' : 'warn'),
      redact: LOG_REDACT_PATHS,
      // Without --debug no stack reaches the operator: errors are brief and `stack` fields dropped.
      ...(opts.debug ? {} : { serializers: { err: briefError }, formatters: { log: withoutStack } }),
    },
    human ? { write: (line: string) => consoleLines().line(humanLogLine(line)) } : pino.destination({ dest: 2, sync: true }),
  );
}

let humanSink: RepeatCollapser | undefined;
/** The process's one human log sink (stderr): repeated lines folded, their count said at exit. */
function consoleLines(): RepeatCollapser {
  if (!humanSink) {
    const sink = new RepeatCollapser((text) => writeFully(2, text));
    process.once('exit', () => sink.flush());
    humanSink = sink;
  }
  return humanSink;
}

const LEVEL_WORD: Record<number, string> = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warning', 50: 'error', 60: 'fatal' };

/**
 * One pino line as an operator reads it: `berth: warning: <message> (key value, ...)`, without
 * the time, pid and host fields. Machine-readable lines stay a flag away (--debug, BERTH_LOG_LEVEL,
 * BERTH_LOG_FORMAT=json).
 */
export function humanLogLine(line: string): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line;
  }
  const { level, time: _t, pid: _p, hostname: _h, msg, err, ...fields } = o;
  const e = err && typeof err === 'object' ? (err as { message?: unknown; code?: unknown }) : undefined;
  const parts = Object.entries(fields).map(([k, v]) => `${k} ${typeof v === 'string' ? v : JSON.stringify(v)}`);
  if (e?.message) parts.unshift(`${e.code ? `${String(e.code)}: ` : ''}${String(e.message)}`);
  return `berth: ${LEVEL_WORD[level as number] ?? 'log'}: ${String(msg ?? '')}${parts.length ? ` (${parts.join(', ')})` : ''}\n`;
}

/** Writes all of `text` to `fd` synchronously (no line lost at exit). */
function writeFully(fd: number, text: string): void {
  const buf = Buffer.from(text);
  for (let off = 0; off < buf.length; ) {
    try {
      off += writeSync(fd, buf, off);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') return;
    }
  }
}

/** Builds the {@link HostParts} once (synchronously: a PostgreSQL store connects at its first use). */
export function assemble(o: OpenOptions): HostParts {
  const logger = o.logger ?? defaultLogger();
  const clock = o.clock ?? systemClock;
  const store = isPostgresUrl(o.store) ? lazyPostgresStore(o.store, { clock }) : openSqliteStore(o.store, { clock });
  const docker = o.docker ?? dockerClient();
  const hostId = o.hostId ?? process.env.BERTH_HOST_ID ?? hostname();
  // The location goes into labels of images that may be pushed to a registry: a file path only,
  // never a server's address (a PostgreSQL store is not checked by `gc --orphans` anyway).
  const sandbox = new SandboxHost({ docker, records: store, clock, logger, hostId, egress: egressPort(store, logger), storeLocation: isPostgresUrl(o.store) ? SERVER_STORE_LOCATION : store.location });
  const registry = o.registry ?? process.env.BERTH_REGISTRY;
  return { store, docker, sandbox, artifacts: o.artifacts ?? artifactStore(o.store), logger, clock, hostId, ...(registry ? { registry } : {}) };
}
