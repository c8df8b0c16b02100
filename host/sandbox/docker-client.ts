import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type Dockerode from 'dockerode';

const require = createRequire(import.meta.url);

/**
 * The dockerode class, loaded without its BuildKit session module. dockerode requires
 * `lib/session.js` (gRPC and a protobuf loader, ~150 ms, half of every `berth` command's start)
 * at load, but only `buildImage` with a session ever calls it, and Berth never does: a stand-in
 * sits in its place in the module cache and loads the real module on first call.
 */
function load(): typeof Dockerode {
  const lib = join(dirname(require.resolve('dockerode/package.json')), 'lib');
  const session = join(lib, 'session.js');
  if (!require.cache[session]) {
    const standIn = (...args: unknown[]) => {
      delete require.cache[session];
      return (require(session) as (...a: unknown[]) => unknown)(...args);
    };
    require.cache[session] = { id: session, filename: session, loaded: true, exports: standIn } as unknown as NodeJS.Module;
  }
  return require('dockerode') as typeof Dockerode;
}

let loaded: typeof Dockerode | undefined;

/**
 * A Docker client over `opts` (a socket path, or DOCKER_HOST's defaults when none). dockerode (and
 * ssh2 under it, whose crypto reserves ~17 MB of native memory at load) is loaded at the client's
 * first use, so a command that never talks to the engine (`berth export`, `check`, `show`) never
 * loads it.
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
