import Dockerode from 'dockerode';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { builtInKinds, builtInPolicies } from '../../host/cli/built-in-policies';
import type { TaskHandler } from '../../host/kernel';
import { createHostRuntime } from '../../host/runtime/host-runtime';
import { createSandboxHost, snapshotEngine } from '../../host/sandbox';
import { systemClock } from '../../host/support';
import { tempStore } from '../support/temp-store';

let t: ReturnType<typeof tempStore> | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});

describe("berth export's lean entry knows the built-in kinds' policies without loading their handlers", () => {
  it('holds, kind by kind and version by version, what the registry of a host answers for every built-in kind', () => {
    t = tempStore();
    // Built, never started: the Docker client is constructed, not called.
    const docker = new Dockerode();
    const logger = pino({ level: 'silent' });
    const sandbox = createSandboxHost({ docker, records: t.store, clock: systemClock, logger, hostId: 'policies-test' });
    const rt = createHostRuntime({ store: t.store, sandbox, engine: snapshotEngine(docker), clock: systemClock, logger, hostId: 'policies-test' });
    // The registry keeps its handlers private; the whole list is what this table must match.
    const byKind = Reflect.get(rt.registry, 'byKind') as Map<string, TaskHandler[]>;
    const registered = [...byKind.values()].flat().map((h) => ({ kind: h.kind, version: h.version, accepts: h.accepts ?? [] }));
    expect(registered.length).toBeGreaterThan(0);
    expect(new Set(builtInKinds().map((k) => JSON.stringify(k)))).toEqual(new Set(registered.map((k) => JSON.stringify(k))));
    for (const { kind, version, accepts } of registered) {
      for (const v of [version, ...accepts, version + 1]) {
        const h = rt.registry.find(kind, v);
        expect(builtInPolicies(kind, v), `${kind}@${v}`).toEqual(h ? { ...(h.maxRetries !== undefined ? { maxRetries: h.maxRetries } : {}), ...(h.restartLimit !== undefined ? { restartLimit: h.restartLimit } : {}) } : undefined);
      }
    }
    expect(builtInPolicies('an-application-kind', 1)).toBeUndefined();
  });
});
