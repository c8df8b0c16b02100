import type { HandlerPolicies, HandlerPolicy } from '../record/contract-fields';

/**
 * The retry policies of the built-in task kinds, as their handlers declare them (host/plan/handlers.ts,
 * host/agent/*-task.ts), for `berth export`'s lean entry (export-entry.ts), which must not load the
 * handlers: they bring the whole runtime (Docker client, model client, snapshotter) for four numbers.
 * test/unit/built-in-policies.test.ts holds this table to the registry a host builds, kind by kind.
 */
const BUILT_IN: Record<string, { version: number; accepts?: number[]; policy: HandlerPolicy }[]> = {
  plan: [{ version: 1, policy: { restartLimit: 10 } }],
  'plan-step': [{ version: 1, policy: { restartLimit: 10, maxRetries: 8 } }],
  agent: [{ version: 1, policy: { restartLimit: 10, maxRetries: 8 } }],
  'agent-generate': [{ version: 1, policy: { restartLimit: 10 } }],
  'agent-tool': [{ version: 1, policy: { restartLimit: 10 } }],
  'agent-approval-timer': [{ version: 1, policy: {} }],
};

/** The registry's lookup over the table: the exact version, else a handler that accepts it. */
export const builtInPolicies: HandlerPolicies = (kind, version) => {
  const list = BUILT_IN[kind] ?? [];
  return (list.find((h) => h.version === version) ?? list.find((h) => h.accepts?.includes(version)))?.policy;
};

/** Every kind and version in the table, for the test that holds it to the registry. */
export const builtInKinds = (): Array<{ kind: string; version: number; accepts: number[] }> =>
  Object.entries(BUILT_IN).flatMap(([kind, list]) => list.map((h) => ({ kind, version: h.version, accepts: h.accepts ?? [] })));
