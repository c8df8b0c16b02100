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

/** A Docker client over `opts` (a socket path, or DOCKER_HOST's defaults when none). */
export function newDockerClient(opts?: Dockerode.DockerOptions): Dockerode {
  loaded ??= load();
  return new loaded(opts);
}
