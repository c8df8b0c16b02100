import { z } from 'zod';
import { DIGEST, IMAGE_REF, OWNER, ROOT_OWNER, SECRET_NAME, allowPatternProblem, systemArea, workspacePathProblem } from './field-checks';
import { VERSION, isRange, isVersion, satisfiesRange } from './semver-range';

// Sections with defaults use `prefault`, not `default`: zod v4 returns a `default` value as-is,
// so the fields inside would never get their own defaults.

const kernel = z
  .strictObject({
    name: z.string().min(1).describe('Harness kind, e.g. "berth"'),
    version: z.string().regex(VERSION, 'a semver version such as 0.1.0').describe('Kernel version that wrote this manifest'),
    compatible: z.string().refine(isRange, 'a version range such as ">=0.1.0 <0.2.0" or "^0.1.0"').describe('Kernel versions that may resume runs of this environment'),
  })
  .refine((k) => !isVersion(k.version) || !isRange(k.compatible) || satisfiesRange(k.version, k.compatible), {
    path: ['compatible'],
    message: 'a range that includes kernel.version',
  });

const image = z.strictObject({
  ref: z.string().regex(IMAGE_REF, 'an image reference such as berth/tiny:latest (no @digest; use image.digest)'),
  digest: z.string().regex(DIGEST, 'sha256: followed by 64 lowercase hex digits').optional().describe('Image id pinned by `berth env lock`'),
});

const workspace = z
  .strictObject({
    path: z
      .string()
      .default('/workspace')
      .superRefine((path, ctx) => {
        const problem = workspacePathProblem(path);
        if (problem) ctx.addIssue({ code: 'custom', message: problem });
      }),
    owner: z.string().regex(OWNER, 'a numeric uid:gid such as 1000:1000').default('1000:1000'),
    allowRootOwner: z.boolean().optional().describe('Explicitly let commands run as uid 0 (owner "0:..."); without it a root owner is refused'),
    allowSystemPath: z.boolean().optional().describe('Explicitly allow a workspace under /proc, /sys, /dev or /etc; without it such a path is refused'),
  })
  .superRefine((w, ctx) => {
    if (ROOT_OWNER.test(w.owner) && !w.allowRootOwner) {
      ctx.addIssue({ code: 'custom', path: ['owner'], message: 'a non-root uid:gid such as 1000:1000, or allowRootOwner: true (commands would run as root)' });
    }
    const area = systemArea(w.path);
    if (area && !w.allowSystemPath) {
      ctx.addIssue({ code: 'custom', path: ['path'], message: `a path outside ${area}, or allowSystemPath: true (the workspace would overlay system files)` });
    }
  })
  .prefault({});

const allowPattern = z.string().superRefine((pattern, ctx) => {
  const problem = allowPatternProblem(pattern);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

const network = z
  .strictObject({
    mode: z.enum(['none', 'allowlist', 'open']).default('none'),
    allow: z.array(allowPattern).default([]).describe('host:port or *.suffix:port patterns for allowlist mode'),
    // A union only so that the boolean of older manifests meets a migration message instead of
    // "expected array"; the superRefine below refuses it, so the parsed value is always a list.
    allowOverride: z
      .union([z.array(allowPattern), z.boolean().meta({ deprecated: true, description: 'The boolean of older manifests: refused, with a message saying which patterns to name' })])
      .optional()
      .describe('The allow patterns explicitly accepted although they reach a private range, the host itself (also by a name that resolves there) or a whole top-level domain; recorded on every run'),
  })
  .superRefine((n, ctx) => {
    if (typeof n.allowOverride === 'boolean') {
      ctx.addIssue({
        code: 'custom',
        path: ['allowOverride'],
        message: `the list of network.allow patterns the override covers, such as [${JSON.stringify(n.allow[0] ?? '10.0.0.8:6379')}] (allowOverride: ${n.allowOverride} covered every pattern at once and is no longer accepted; name each pattern that needs it)`,
      });
      return;
    }
    (n.allowOverride ?? []).forEach((p, i) => {
      if (!n.allow.includes(p)) ctx.addIssue({ code: 'custom', path: ['allowOverride', i], message: `a pattern listed in network.allow ("${p}" is not)` });
    });
  })
  .transform(({ allowOverride, ...n }) => ({ ...n, ...(Array.isArray(allowOverride) ? { allowOverride } : {}) }))
  .prefault({});

const secretSource = z.union([z.strictObject({ env: z.string().min(1) }), z.strictObject({ file: z.string().min(1) })], {
  error: 'exactly one of {env: VAR} or {file: PATH}',
});

const secret = z.strictObject({
  name: z.string().regex(SECRET_NAME, 'an UPPER_SNAKE name such as API_TOKEN'),
  from: secretSource,
  expose: z.enum(['env', 'file']),
  to: z.array(z.string().min(1)).describe('Tool names or plan step names that may see the secret'),
  // Optional rather than defaulted: a default would add the field to every parsed manifest and so
  // change the fingerprint of environments that never mention it.
  allowInWorkspace: z
    .boolean()
    .optional()
    .describe('Let a snapshot hold this secret in a changed file (else the snapshot is refused); such snapshot images are labelled berth.secret-material and must never be pushed'),
});

const secrets = z
  .array(secret)
  .default([])
  .superRefine((list, ctx) => {
    const seen = new Set<string>();
    list.forEach((s, i) => {
      if (seen.has(s.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: 'a name not used by an earlier secret' });
      seen.add(s.name);
    });
  });

const positiveInt = z.number().int().positive();

const resources = z
  .strictObject({
    cpus: z.number().positive().default(1),
    memoryMb: z.number().int().min(16).default(512),
    pids: z.number().int().min(8).default(256),
    diskMb: z.number().int().min(1).default(1024),
    commandTimeoutS: positiveInt.default(600).describe('Longest one command may run'),
    runBudgetS: positiveInt.default(86400).describe('Longest the commands of a whole run may take in all (the sum of the command times of its plan steps, or of an agent run\'s tool calls; time waiting for a person, a model or a resume does not count); the step or tool call that reaches it is stopped, no command starts after it, and the run fails run_budget_exceeded'),
  })
  .prefault({});

const lease = z
  .strictObject({
    ttlS: positiveInt.default(900),
    heartbeatS: positiveInt.default(30),
  })
  .refine((l) => l.heartbeatS < l.ttlS, { path: ['heartbeatS'], message: 'a heartbeat shorter than lease.ttlS, so the lease is renewed before it expires' })
  .prefault({});

const snapshot = z
  .strictObject({
    policy: z.enum(['after-each-step', 'never', 'on-demand']).default('after-each-step'),
    keepLast: z.number().int().min(1).default(5),
    // Optional without defaults, so manifests that do not use a registry keep their fingerprints.
    registry: z
      .string()
      .regex(/^[a-z0-9.-]+(:[0-9]+)?(\/[a-z0-9._\/-]+)?$/, 'a registry host[:port][/path], e.g. "registry.internal:5000" (no scheme, no credentials)')
      .optional()
      .describe('OCI registry every snapshot is pushed to, so that another engine can restore it (overrides the host setting BERTH_REGISTRY). TLS and credentials come from the engine and Docker client configuration, never from the manifest'),
    push: z
      .enum(['sync', 'async'])
      .optional()
      .describe('sync (default): a checkpoint commits only after its snapshot push is acknowledged, so every committed checkpoint is restorable anywhere; async: commit first, push after, and a resume elsewhere goes back to the newest pushed snapshot'),
  })
  .prefault({});

const gateway = z
  .strictObject({
    provider: z.strictObject({
      baseUrl: z
        .string()
        .regex(/^https?:\/\/[^\s/@]+(\/[^\s]*)?$/, 'an http(s) URL of an OpenAI-compatible API such as https://api.example.com/v1 (no credentials in it)')
        .describe('The OpenAI-compatible API the host forwards to; requests go from the host, not the sandbox'),
      key: secretSource.describe('Where the host reads the provider key at each request; the key never enters the sandbox, the record or the logs'),
    }),
    models: z.array(z.string().min(1)).min(1, 'at least one model name the sandbox may ask for').describe('The models the sandbox may ask for; any other is refused'),
    budget: z
      .strictObject({ tokens: positiveInt.describe('Prompt plus completion tokens one run may spend through the gateway') })
      .optional(),
  })
  .optional()
  .describe('An OpenAI-compatible endpoint on the sandbox\'s egress gateway, forwarded by the host to a provider with the real key (needs network.mode allowlist)');

/** The Environment manifest: the one definition of what a sandbox must be. */
export const EnvironmentSchema = z
  .strictObject({ kernel, image, workspace, network, secrets, resources, lease, snapshot, gateway })
  .superRefine((e, ctx) => {
    // The gateway listens where the egress proxy does: only an allowlist sandbox has one.
    if (e.gateway && e.network.mode !== 'allowlist') {
      ctx.addIssue({ code: 'custom', path: ['gateway'], message: `network.mode allowlist (the model gateway is served by the sandbox's egress proxy; network.mode is ${e.network.mode})` });
    }
  })
  .describe('Berth Environment manifest');

/** A parsed manifest with every default applied. */
export type Environment = z.infer<typeof EnvironmentSchema>;
