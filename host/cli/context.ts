import { existsSync } from 'node:fs';
import { hostname } from 'node:os';
import { BerthError } from '../errors';
import { dirname, join, resolve } from 'node:path';
import { LocalArtifactStore, RegistryArtifactStore, type ArtifactStore } from '../artifacts';
import Dockerode from 'dockerode';
import pino, { type Logger } from 'pino';
import { isPostgresUrl, lazyPostgresStore, openSqliteStore, type Store } from '../store';
import { SandboxHost } from '../sandbox';
import { LOG_REDACT_PATHS } from '../secrets';
import { egressPort } from '../egress';
import { systemClock, type Clock } from '../support';

/** What every command may use; built once here, the CLI being the only composition root. */
export interface CliContext {
  store: Store;
  logger: Logger;
  clock: Clock;
  docker: Dockerode;
  sandbox: SandboxHost;
  hostId: string;
  json: boolean;
  /** Where plan steps keep their artifacts: see {@link artifactDir}. */
  artifacts: ArtifactStore;
  close(): Promise<void>;
}

/** `$BERTH_ARTIFACT_DIR`, else `artifacts/` beside the store file: content-addressed blobs of step artifacts. */
export function artifactDir(storeFile: string): string {
  // A PostgreSQL store has no directory of its own: the artifacts go under .berth/ here.
  const beside = /^postgres(ql)?:\/\//.test(storeFile) ? resolve('.berth') : dirname(storeFile);
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
 * `--store`, else `BERTH_STORE`, else `.berth/berth.db` under the current directory. A
 * `postgres://` URL is kept as given (a fleet's shared store); anything else is a SQLite file path.
 */
export function storePath(flag: string | undefined): string {
  const given = flag ?? process.env.BERTH_STORE;
  if (given && isPostgresUrl(given)) return given;
  return resolve(given ?? join('.berth', 'berth.db'));
}

/**
 * Only commands that start work create a store; the others, given a path with no store (a typo,
 * another directory), say so instead of creating an empty one and reporting "run not found".
 */
export function requireStore(path: string): void {
  if (existsSync(path)) return;
  const fallback = storePath(undefined);
  const source = process.env.BERTH_STORE ? '$BERTH_STORE' : 'the default, under the current directory';
  throw new BerthError(
    'store_not_found',
    `no store at ${path}${path === fallback ? ` (${source})` : `; without --store it would be ${fallback} (${source})`}. ` +
      'Pass --store PATH, or start work with berth run or berth agent, which create it.',
    { details: { path, default: fallback } },
  );
}

/** Errors in log lines: what and why for the operator; the stack only with --debug. */
const briefError = (err: unknown) =>
  err instanceof Error ? { type: err.name, message: err.message, ...((err as { code?: unknown }).code !== undefined ? { code: (err as { code?: unknown }).code } : {}) } : err;

const withoutStack = (o: Record<string, unknown>): Record<string, unknown> => {
  if (!('stack' in o)) return o;
  const { stack: _stack, ...rest } = o;
  return rest;
};

export function buildContext(opts: { store?: string; json: boolean; debug?: boolean; create: boolean }): CliContext {
  const path = storePath(opts.store);
  const postgres = isPostgresUrl(path);
  // A database that is not there is reported by the open itself (store_not_found, naming the URL).
  if (!opts.create && !postgres) requireStore(path);
  // Logs go to stderr so that stdout stays the command's answer (and parseable with --json).
  // Written synchronously: a line logged just before the process ends is never lost.
  const logger = pino(
    {
      level: process.env.BERTH_LOG_LEVEL ?? (opts.debug ? 'debug' : 'warn'),
      redact: LOG_REDACT_PATHS,
      // Without --debug no stack reaches the operator: errors are brief and `stack` fields dropped.
      ...(opts.debug ? {} : { serializers: { err: briefError }, formatters: { log: withoutStack } }),
    },
    pino.destination({ dest: 2, sync: true }),
  );
  const clock = systemClock;
  const store = postgres ? lazyPostgresStore(path, { clock }) : openSqliteStore(path, { clock });
  const docker = dockerClient();
  // Stable across restarts of this machine's host, so the sweeper recognises what a dead process left.
  const hostId = process.env.BERTH_HOST_ID ?? hostname();
  // The sweeper removes containers leased under an older ownership epoch of their run (issue 15).
  const sandbox = new SandboxHost({ docker, records: store, clock, logger, hostId, egress: egressPort(store, logger) });
  return {
    store,
    logger,
    clock,
    docker,
    sandbox,
    hostId,
    json: opts.json,
    artifacts: artifactStore(path),
    async close() {
      await store.close();
    },
  };
}

/**
 * The Docker client alone, for commands that need the engine but no store (`env lock`, `env
 * validate --engine`). `BERTH_DOCKER_SOCKET` names a socket; else `DOCKER_HOST` (`unix://PATH` or
 * `tcp://HOST:PORT`, as the docker CLI reads it) picks the engine, so one store can be driven from
 * another host's engine (`DOCKER_HOST=unix:///run/b.sock berth resume RUN`).
 */
export function dockerClient(): Dockerode {
  if (process.env.BERTH_DOCKER_SOCKET) return new Dockerode({ socketPath: process.env.BERTH_DOCKER_SOCKET });
  const host = process.env.DOCKER_HOST;
  if (host?.startsWith('unix://')) return new Dockerode({ socketPath: host.slice('unix://'.length) });
  if (host) return new Dockerode();
  return new Dockerode({ socketPath: '/var/run/docker.sock' });
}
