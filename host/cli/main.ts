/**
 * `berth`: the one composition root. It parses arguments, builds the store, Docker client,
 * logger and clock, and hands them to the command.
 */
import { writeSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { BerthError, isBerthError } from '../errors';
import { EXIT } from './host-right';
import { buildContext, dockerClient, type CliContext } from './context';
import { loadExtensions } from './extensions';
import type { Extension } from '../agent/custom-tasks';
import { envLock, envValidate } from './commands/env';
import { gc, gcOrphans } from './commands/gc';
import { show, status } from './commands/runs';
import { cancelRun, resumeRun, runPlan } from './commands/plan-run';
import { logs } from './commands/logs';
import { reconcileRun } from './commands/reconcile';
import { agentChat, agentRun, type AgentFlags } from './commands/agent-run';
import { decide } from './commands/agent-approve';
import { forkRun, tree, type ForkFlags } from './commands/fork';
import type { ServeFlags } from './commands/serve';
import type { McpFlags } from './commands/mcp';
import { workerCommand } from './commands/worker';
import { workersList } from './commands/workers';
import { drainCommand } from './commands/drain';
import { reportError } from './output';
import { judgeRun } from './commands/acceptance';
import { cost } from './commands/cost';
import { artifactsCommand } from './commands/artifacts';
import { checkCommand, exportCommand, importCommand } from './commands/record';
import { assertDrivable } from '../record';
import { storeReadOnly } from '../store';

const USAGE = `usage: berth <command> [options]

  run PLAN [--detach [--tags a,b]]
                           run a build/test plan durably (live progress; Ctrl-C stops, resume continues);
                           --detach submits it for a berth worker (one with all the tags) and returns
  resume RUN [--take-over] continue a run after a crash, a stop or a reconcile; a run a live worker
                           owns needs --take-over (recorded with you as the actor; the worker stops);
                           an ended run whose tasks a killed host left live: settles them (exit 0)
  worker [--concurrency N] [--tags a,b] [--lease-ttl S] [--grace S]
                           claim and drive submitted runs and runs whose owner's lease ran out;
                           SIGTERM drains (no new claims, running steps get S seconds, leases released)
  workers                  worker processes of this store: live, stale, dead or stopped (by heartbeat),
                           slots in use, the runs each owns and those it leaves (and why)
  drain WORKER|HOST        ask a worker (host:pid) or every worker of a host id to drain, from anywhere
  status [--state S]... [--tags a,b] [--search TEXT] [--from DAY] [--to DAY]
                           list runs (oldest first), filtered by state, tags (every one), run id or
                           name, and creation day (YYYY-MM-DD, inclusive) or ISO time
  show RUN [--all]         state, transitions, tasks, effects, snapshots and leases of a run
                           (the newest 50 tasks, effects and snapshots; --all or --json: every one)
  logs RUN [-f]            the output each step or tool call of a run produced, decisions, interrupted attempts (-f: follow live)
  artifacts RUN [--out DIR] the files the run's steps kept (path, size, sha256, present/missing/altered);
                           --out copies them to DIR, checking every digest
  reconcile RUN [--accept | --reject-effect] [--restore SNAPSHOT] | --verify | --fail
                           decide a run that needs reconciliation, then continue it:
                           did the uncertain effect happen (--accept) or not (--reject-effect),
                           and continue in the current sandbox or from a snapshot (--restore);
                           --verify asks the service about uncertain effects again; --fail ends the run
                           (an effect not answered stays uncertain on record, never run again)
  cancel RUN [--wait]      cancel a run durably; its owner stops it, or this command when no live host
                           drives it; an owner that stopped renewing its claim (frozen, overloaded) is
                           named with the claim's expiry; --wait waits until the run ended, carrying the
                           cancel out here once that claim expired
  fork RUN --at STEP|SNAPSHOT [--plan FILE] [--detach]
                           a new run continuing from a checkpoint of RUN (after step STEP, or from a
                           snapshot), its sandbox leased from that checkpoint's snapshot and verified;
                           --plan takes the later steps from FILE (earlier ones must match)
  fork SESSION --at TURN   a new agent session as SESSION was after its TURN-th message
                           (conversation and workspace); berth chat NEWSESSION continues it
  tree RUN                 the forks of a run and its ancestors, with their states
  gc [--keep N] [--grace S] [--forks-older-than DURATION]
                           remove this host's leftover containers and unrecorded snapshot images
                           (older than S seconds, default 600); keep N snapshots per session (default 5);
                           remove the sandboxes and snapshots of finished forks idle for DURATION (30m, 2d);
                           settle the tasks a killed host left live in an ended run (not while its session
                           has an unfinished run: it names berth resume/cancel of that run, which settle both)
  gc --orphans [--remove [--only STORE_ID]...]
                           list the containers, networks and snapshot images (and snapshot tags on environment
                           images) of other stores on this engine, by store, and which stores are gone (file
                           deleted, no process that made them alive or holding it open); --remove removes a gone
                           store's, never another's; --only: only those gone stores' (an engine shared with others)
  env validate FILE [--engine]
                           check an environment manifest (--engine: and that its pinned image is on this engine)
  env lock FILE            pin the manifest's image to the local image id
  agent "TASK" --env FILE [--workspace DIR] [--model M --base-url URL --api-key-env NAME]
        [--require-approval TOOLS --approval-ttl S --max-turns N --context-tokens N] [--detach]
                           start a coding-agent run in a sandbox (live output)
  chat SESSION "MESSAGE" [--context-tokens N]
                           continue an agent session with another message (N: the model's window)
  accept RUN [--request-id ID]
  reject RUN --reason TEXT [--request-id ID]
                           judge a completed run's outcome (acceptance is apart from the run state)
  cost [--since T] [--config FILE]
                           cost of the runs (tokens, sandbox CPU and memory, lease time, snapshots,
                           approval waits, recovery) summed and divided by the accepted runs; prices
                           from the host config (default: berth.config.yaml beside the store)
  approve RUN ID [--digest D]
                           approve a tool call (ID: call id or approval id) waiting for approval
  deny RUN ID              deny a tool call waiting for approval
  mcp [--env FILE [--workspace DIR] [--require-approval T,..]] [--session ID] [--http [--port 7778] [--host H] [--token-file F] [--no-token]]
                           an MCP server on stdio: a durable Berth session as another agent's sandbox
                           (tools exec, read_file, write_file, edit, list_files, search, status, reconcile, fork)
  serve [--port 7777] [--host 127.0.0.1] [--token-file F] [--no-token]
                           live web view of the runs (sign in at /login with the token printed
                           on first start)
  export RUN [--out FILE]  the run's record: one versioned JSON document with the digest of its canonical form
  import FILE              load an exported record into this store as a read-only run (refused if altered)
  check [RUN | --all]      evaluate the run invariants; exit 1 naming each violation with its evidence

options:
  --store PATH|URL         the store: a SQLite file, or postgres://… shared by a fleet
                           (default: $BERTH_STORE or .berth/berth.db)
  --extension MODULE       load an application's task kinds and effect verifiers (repeatable; also
                           BERTH_EXTENSIONS=a.ts,b.mjs): its default export is extension(...) or a
                           function returning one, so resume/reconcile (--verify)/serve can carry its runs
  --json                   machine-readable output on stdout: one JSON object per line (NDJSON;
                           a driven run's events, then its result); errors as one JSON line on stderr
  --debug                  show stack traces of internal errors

exit codes:
  0 done   1 the run failed or the command hit an error (the reason is on stderr)   2 usage
  3 the run needs reconciliation   4 another host took the run over (or this host's lease on it ran out)
  130 stopped by Ctrl-C or SIGTERM (berth resume RUN continues)
`;

type Handler = (ctx: () => CliContext, args: string[], flags: Flags) => Promise<number>;

/** Commands that start work, and so may create the store; every other one needs it to exist. */
const CREATES_STORE = new Set(['run', 'agent', 'import', 'worker', 'mcp']);
/** Commands that only read the store: they work on one this user cannot write (opened read-only). */
const READS_ONLY = new Set(['status', 'show', 'logs', 'artifacts', 'export', 'check', 'tree', 'cost', 'workers']);
/** Commands that drive or decide a run: refused for an imported run, which is a record only. */
const DRIVES_RUN = new Set(['resume', 'reconcile', 'cancel', 'approve', 'deny']);
interface Flags extends AgentFlags, ForkFlags, ServeFlags, McpFlags {
  json: boolean;
  debug: boolean;
  digest?: string;
  store?: string;
  extension?: string[];
  restore?: string;
  accept: boolean;
  'reject-effect': boolean;
  fail: boolean;
  verify: boolean;
  'request-id'?: string;
  keep?: string;
  engine: boolean;
  grace?: string;
  reason?: string;
  since?: string;
  config?: string;
  'forks-older-than'?: string;
  out?: string;
  all: boolean;
  'take-over': boolean;
  /** berth cancel --wait: until the run ended (carried out here once its owner's claim expired). */
  wait: boolean;
  follow: boolean;
  orphans: boolean;
  only?: string[];
  remove: boolean;
  concurrency?: string;
  tags?: string;
  'lease-ttl'?: string;
  state?: string[];
  search?: string;
  from?: string;
  to?: string;
}

/** `90s`, `30m`, `12h`, `2d` (a bare number is seconds) in milliseconds. */
function parseDuration(text: string, flag: string): number {
  const m = /^(\d+)(s|m|h|d)?$/.exec(text.trim());
  if (!m) throw new BerthError('usage', `${flag} expects a duration such as 90s, 30m, 12h or 2d, found "${text}"`);
  return Number(m[1]) * { s: 1e3, m: 60e3, h: 3600e3, d: 86400e3 }[(m[2] ?? 's') as 's' | 'm' | 'h' | 'd'];
}

/**
 * The lines of USAGE for one command (every entry of that name, with its continuation lines), or
 * the whole of it when `name` is no command: a mistyped flag gets the synopsis it needs, not
 * seventy lines.
 */
export function commandUsage(name: string | undefined): string {
  const out: string[] = [];
  let inside = false;
  for (const line of USAGE.split('\n')) {
    const entry = /^ {2}(\S+)/.exec(line);
    if (entry) inside = entry[1] === name;
    else if (line.trim() === '' || !line.startsWith('   ')) inside = false;
    if (inside) out.push(line);
  }
  return out.length ? `usage: berth ${out.join('\n').trimStart()}\n(berth --help lists every command)\n` : USAGE;
}

const splitTags = (v: string | undefined) => (v ?? '').split(',').map((t) => t.trim()).filter(Boolean);

/** Usage errors after which the command's synopsis is printed (text output only; JSON stays the error alone). */
const wantsSynopsis = new WeakSet<Error>();

const need = (args: string[], n: number, what: string) => {
  if (args.length < n) {
    const err = new BerthError('usage', `missing ${what}`);
    wantsSynopsis.add(err);
    throw err;
  }
  return args;
};

/**
 * The most positional arguments each command takes. A word past them was silently dropped before
 * (`berth cancel A B` cancelled A and exited 0; `berth agent fix the bug` asked the agent to "fix"),
 * so it is a usage error, raised before the command reads or commits anything.
 */
const ARITY: Record<string, number> = {
  status: 0, show: 1, gc: 0, run: 1, resume: 1, worker: 0, workers: 0, drain: 1, reconcile: 1, cancel: 1, fork: 1, tree: 1,
  logs: 1, artifacts: 1, agent: 1, chat: 2, approve: 2, accept: 1, reject: 1, cost: 0, deny: 2, serve: 0, mcp: 0,
  export: 1, import: 1, check: 1, env: 2,
};

const noExtra = (name: string, args: string[]) => {
  const most = ARITY[name];
  if (most === undefined || args.length <= most) return;
  const extra = args.slice(most);
  const quote = name === 'agent' || name === 'chat' ? ' (quote a message of several words)' : '';
  const err = new BerthError('usage', `berth ${name} does not take ${extra.map((a) => JSON.stringify(a)).join(', ')}: it takes ${most === 0 ? 'no' : `at most ${most}`} argument(s)${quote}`, { details: { unexpected: extra } });
  wantsSynopsis.add(err);
  throw err;
};

const commands: Record<string, Handler> = {
  status: (ctx, _args, flags) => status(ctx(), { states: flags.state, tags: splitTags(flags.tags), search: flags.search, from: flags.from, to: flags.to }),
  show: (ctx, args, flags) => show(ctx(), need(args, 1, 'RUN')[0]!, flags.all),
  gc: (ctx, _args, flags) => {
    if (flags.remove && !flags.orphans) throw new BerthError('usage', '--remove goes with --orphans (berth gc --orphans --remove); berth gc alone removes this store\'s leftovers');
    if (flags.only?.length && !flags.orphans) throw new BerthError('usage', '--only goes with --orphans --remove (berth gc --orphans --remove --only STORE_ID)');
    if (flags.orphans) {
      if (flags.keep !== undefined || flags.grace !== undefined || flags['forks-older-than'] !== undefined) throw new BerthError('usage', '--orphans looks only at other stores\' leftovers: it takes no --keep, --grace or --forks-older-than (run berth gc for this store)');
      if (flags.only?.length && !flags.remove) throw new BerthError('usage', '--only goes with --remove (berth gc --orphans --remove --only STORE_ID)');
      return gcOrphans(ctx, { store: flags.store, json: flags.json, debug: flags.debug, remove: flags.remove, only: flags.only });
    }
    if (flags.keep !== undefined && !/^\d+$/.test(flags.keep)) throw new BerthError('usage', `--keep expects a whole number of snapshots, found "${flags.keep}"`);
    if (flags.grace !== undefined && !/^\d+$/.test(flags.grace)) throw new BerthError('usage', `--grace expects whole seconds, found "${flags.grace}"`);
    const forks = flags['forks-older-than'];
    const forksMs = forks === undefined ? undefined : parseDuration(forks, '--forks-older-than');
    return gc(ctx(), flags.keep === undefined ? undefined : Number(flags.keep), flags.grace === undefined ? undefined : Number(flags.grace), forksMs);
  },
  run: (ctx, args, flags) => {
    if (flags.tags !== undefined && !flags.detach) throw new BerthError('usage', '--tags on berth run needs --detach (tags choose which worker may claim the run)');
    return runPlan(ctx(), need(args, 1, 'PLAN')[0]!, flags['request-id'], flags.detach, splitTags(flags.tags));
  },
  resume: (ctx, args, flags) => resumeRun(ctx(), need(args, 1, 'RUN')[0]!, { takeOver: flags['take-over'], leaseTtl: flags['lease-ttl'] }),
  worker: (ctx, _args, flags) => workerCommand(ctx(), flags),
  workers: (ctx) => workersList(ctx()),
  drain: (ctx, args) => drainCommand(ctx(), need(args, 1, 'WORKER or HOST')[0]!),
  reconcile: (ctx, args, flags) => reconcileRun(ctx(), need(args, 1, 'RUN')[0]!, flags),
  cancel: (ctx, args, flags) => cancelRun(ctx(), need(args, 1, 'RUN')[0]!, { wait: flags.wait }),
  fork: (ctx, args, flags) => forkRun(ctx(), need(args, 1, 'RUN')[0]!, flags),
  tree: (ctx, args) => tree(ctx(), need(args, 1, 'RUN')[0]!),
  logs: (ctx, args, flags) => logs(ctx(), need(args, 1, 'RUN')[0]!, { follow: flags.follow }),
  artifacts: (ctx, args, flags) => artifactsCommand(ctx(), need(args, 1, 'RUN')[0]!, flags.out),
  agent: (ctx, args, flags) => agentRun(ctx(), need(args, 1, 'TASK')[0]!, flags),
  chat: (ctx, args, flags) => {
    const [session, message] = need(args, 2, 'SESSION and MESSAGE');
    return agentChat(ctx(), session!, message!, flags);
  },
  approve: (ctx, args, flags) => {
    const [run, id] = need(args, 2, 'RUN and ID');
    return decide(ctx(), run!, id!, 'approve', flags.digest);
  },
  accept: (ctx, args, flags) => judgeRun(ctx(), need(args, 1, 'RUN')[0]!, 'accepted', { requestId: flags['request-id'] }),
  reject: (ctx, args, flags) => judgeRun(ctx(), need(args, 1, 'RUN')[0]!, 'rejected', { reason: flags.reason, requestId: flags['request-id'] }),
  cost: (ctx, _args, flags) => cost(ctx(), { since: flags.since, config: flags.config }),
  deny: (ctx, args) => {
    const [run, id] = need(args, 2, 'RUN and ID');
    return decide(ctx(), run!, id!, 'deny');
  },
  // Loaded on use (their own chunks of the bundle): the web server and the MCP SDK are ~50 ms of
  // every other command's start.
  serve: async (ctx, _args, flags) => (await import('./commands/serve')).serveCommand(ctx(), flags),
  mcp: async (ctx, _args, flags) => (await import('./commands/mcp')).mcpCommand(ctx(), flags),
  export: (ctx, args, flags) => exportCommand(ctx(), need(args, 1, 'RUN')[0]!, flags.out),
  import: (ctx, args) => importCommand(ctx(), need(args, 1, 'FILE')[0]!),
  check: (ctx, args, flags) => checkCommand(ctx(), args[0], flags.all),
  env: async (ctx, args, flags) => {
    const [sub, file] = need(args, 2, 'env subcommand and FILE');
    if (sub === 'validate') return envValidate(file!, flags.json, flags.engine ? dockerClient() : undefined);
    if (sub === 'lock') return envLock(file!, flags.json, dockerClient());
    throw new BerthError('usage', `unknown env subcommand "${sub}" (validate, lock)`);
  },
};

export async function main(argv: string[]): Promise<number> {
  // Milliseconds from the process's start to here (node's own start and this bundle's imports).
  const started = performance.now();
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        json: { type: 'boolean', default: false },
        debug: { type: 'boolean', default: false },
        store: { type: 'string' },
        extension: { type: 'string', multiple: true },
        restore: { type: 'string' },
        accept: { type: 'boolean', default: false },
        'reject-effect': { type: 'boolean', default: false },
        verify: { type: 'boolean', default: false },
        fail: { type: 'boolean', default: false },
        'request-id': { type: 'string' },
        session: { type: 'string' },
        http: { type: 'boolean', default: false },
        keep: { type: 'string' },
        engine: { type: 'boolean', default: false },
        grace: { type: 'string' },
        at: { type: 'string' },
        plan: { type: 'string' },
        detach: { type: 'boolean', default: false },
        'forks-older-than': { type: 'string' },
        reason: { type: 'string' },
        since: { type: 'string' },
        config: { type: 'string' },
        out: { type: 'string' },
        all: { type: 'boolean', default: false },
        'take-over': { type: 'boolean', default: false },
        wait: { type: 'boolean', default: false },
        orphans: { type: 'boolean', default: false },
        remove: { type: 'boolean', default: false },
        only: { type: 'string', multiple: true },
        follow: { type: 'boolean', short: 'f', default: false },
        concurrency: { type: 'string' },
        tags: { type: 'string' },
        state: { type: 'string', multiple: true },
        search: { type: 'string' },
        from: { type: 'string' },
        to: { type: 'string' },
        'lease-ttl': { type: 'string' },
        env: { type: 'string' },
        workspace: { type: 'string' },
        model: { type: 'string' },
        'base-url': { type: 'string' },
        'api-key-env': { type: 'string' },
        'require-approval': { type: 'string' },
        'approval-ttl': { type: 'string' },
        'max-turns': { type: 'string' },
        'context-tokens': { type: 'string' },
        digest: { type: 'string' },
        port: { type: 'string' },
        host: { type: 'string' },
        'token-file': { type: 'string' },
        'no-token': { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (err) {
    // A script that asked for JSON parses what it gets: the parser's refusal too.
    if (argv.includes('--json')) {
      reportError(true, new BerthError('usage', (err as Error).message));
      return EXIT.usage;
    }
    // The command is the first word that is not a flag (flags come after it in every synopsis).
    process.stderr.write(`berth: ${(err as Error).message}\n\n${commandUsage(argv.find((a) => !a.startsWith('-')))}`);
    return EXIT.usage;
  }
  const flags = parsed.values as Flags & { help: boolean };
  const [name, ...args] = parsed.positionals;
  if (flags.json && !flags.help && (!name || !commands[name])) {
    // Nothing but JSON on stdout with --json: not even the help text a missing command gets.
    reportError(true, new BerthError('usage', name ? `unknown command "${name}"` : 'missing command (berth --help lists them)'));
    return EXIT.usage;
  }
  if (flags.help || !name) {
    process.stdout.write(USAGE);
    return name || flags.help ? 0 : 2;
  }
  const command = commands[name];
  if (!command) {
    process.stderr.write(`berth: unknown command "${name}"\n\n${USAGE}`);
    return 2;
  }
  let ctx: CliContext | undefined;
  let extensions: Extension[] = [];
  const lazy = () => {
    if (ctx) return ctx;
    const t0 = performance.now();
    ctx = buildContext({ store: flags.store, json: flags.json, debug: flags.debug, create: CREATES_STORE.has(name), extensions });
    // Before the command reads or leases anything: it would fail at its first write, half done.
    if (ctx.store.readOnly && !READS_ONLY.has(name)) throw storeReadOnly(ctx.store.location, `berth ${name}`);
    // The profile of a run (bench/plan.ts, BERTH_LOG_LEVEL=debug): process start, then the store's open.
    ctx.logger.debug({ phase: 'process.start', ms: Math.round(started), codeCache: (globalThis as Record<symbol, unknown>)[Symbol.for('berth.codeCache')] ?? 'none' }, 'timing');
    ctx.logger.debug({ phase: 'store.open', ms: Math.round((performance.now() - t0) * 10) / 10 }, 'timing');
    return ctx;
  };
  try {
    noExtra(name, args);
    extensions = await loadExtensions(flags.extension ?? []);
    if (DRIVES_RUN.has(name) && args[0]) await assertDrivable(lazy().store, args[0]);
    if (name === 'chat' && args[0] && (await lazy().store.isImportedSession(args[0]))) {
      throw new BerthError('run_imported', `session ${args[0]} was imported from an exported record: it can be shown and checked, never driven`);
    }
    return await command(lazy, args, flags);
  } catch (err) {
    reportError(flags.json, err, flags.debug);
    if (!isBerthError(err)) return EXIT.failed;
    if (!flags.json && wantsSynopsis.has(err)) process.stderr.write(`\n${commandUsage(name)}`);
    return err.code === 'usage' ? EXIT.usage : err.code === 'execution_right_lost' ? EXIT.rightLost : err.code === 'interrupted' ? EXIT.signal : EXIT.failed;
  } finally {
    const t0 = performance.now();
    await ctx?.sandbox.close().catch(() => {});
    await ctx?.close();
    ctx?.logger.debug({ phase: 'cli.close', ms: Math.round((performance.now() - t0) * 10) / 10 }, 'timing');
  }
}

// Last resort: an error escaping every handler still ends the process saying why (written
// synchronously, so nothing is lost to the exit), never as a bare exit 1.
const lastResort = (err: unknown) => {
  const text = Buffer.from(`berth: internal error (a bug): ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  // stderr may be a non-blocking pipe its reader has let fill: retry instead of losing the reason.
  for (let off = 0, tries = 0; off < text.length && tries < 2000; tries++) {
    try {
      off += writeSync(2, text, off);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EAGAIN') break;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
    }
  }
  process.exit(EXIT.failed);
};
// A reader that stopped reading (`berth show RUN | head`) is not an error of Berth's: the rest of
// the output goes nowhere, and the command still finishes what it does (a run goes on durably).
const quietWhenClosed = (stream: NodeJS.WriteStream) =>
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') return lastResort(err);
    stream.write = (() => true) as typeof stream.write;
  });
quietWhenClosed(process.stdout);
process.on('uncaughtException', lastResort);
process.on('unhandledRejection', lastResort);
// Not a top-level await: the CLI's bundle is a CommonJS script (host/cli/code-cache.mjs), which has none.
void main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
