import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type Dockerode from 'dockerode';

const require = createRequire(import.meta.url);

/**
 * Puts a stand-in for the CommonJS module `file` in the module cache: the real module is loaded,
 * and takes its place, at the stand-in's first call. Only for a module whose export is one
 * function, called by a path Berth does not take at start.
 */
function loadOnFirstCall(file: string): void {
  if (require.cache[file]) return;
  const standIn = (...args: unknown[]) => {
    delete require.cache[file];
    return (require(file) as (...a: unknown[]) => unknown)(...args);
  };
  require.cache[file] = { id: file, filename: file, loaded: true, exports: standIn } as unknown as NodeJS.Module;
}

/**
 * The dockerode class, loaded without two modules no Berth command needs at start. dockerode
 * requires `lib/session.js` (gRPC and a protobuf loader, ~150 ms, half of every `berth` command's
 * start) at load, but only `buildImage` with a session ever calls it, and Berth never does.
 * docker-modem requires `lib/ssh.js`, and with it ssh2 (~40 ms of CPU at a quiet start, more on a
 * loaded machine, and ~17 MB of native memory its crypto reserves), but calls it only for an
 * `ssh://` DOCKER_HOST, which still works: its first connection loads the real module.
 */
function load(): typeof Dockerode {
  loadOnFirstCall(join(dirname(require.resolve('dockerode/package.json')), 'lib', 'session.js'));
  // docker-modem as dockerode resolves it (the one under dockerode's own node_modules when there is one).
  const fromDockerode = createRequire(require.resolve('dockerode'));
  loadOnFirstCall(join(dirname(fromDockerode.resolve('docker-modem/package.json')), 'lib', 'ssh.js'));
  return require('dockerode') as typeof Dockerode;
}

let loaded: typeof Dockerode | undefined;

/**
 * A Docker client over `opts` (a socket path, or DOCKER_HOST's defaults when none). dockerode is
 * loaded at the client's first use, so a command that never talks to the engine (`berth export`,
 * `check`, `show`) never loads it.
 */
export function newDockerClient(opts?: Dockerode.DockerOptions): Dockerode {
  let real: Dockerode | undefined;
  const client = () => {
    loaded ??= load();
    return (real ??= new loaded(opts));
  };
  return new Proxy({} as Dockerode, {
    get(_, key) {
      const c = client();
      const v = Reflect.get(c, key, c) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(c) : v;
    },
    set: (_, key, value) => Reflect.set(client(), key, value),
    has: (_, key) => Reflect.has(client(), key),
  });
}
