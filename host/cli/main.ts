/**
 * `berth`: the one composition root. It parses arguments, builds the store, Docker client,
 * logger and clock, and hands them to the command.
 */
import { writeSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { BerthError, isBerthError } from '../errors';
import { EXIT } from './host-right';
import { buildContext, dockerClient, type CliContext } from './context';
import { envLock, envValidate } from './commands/env';
import { gc } from './commands/gc';
import { show, status } from './commands/runs';
import { cancelRun, logs, resumeRun, runPlan } from './commands/plan-run';
import { reconcileRun } from './commands/reconcile';
import { agentChat, agentRun, type AgentFlags } from './commands/agent-run';
import { decide } from './commands/agent-approve';
import { reportError } from './output';

const USAGE = `usage: berth <command> [options]

  run PLAN                 run a build/test plan durably (live progress; Ctrl-C stops, resume continues)
  resume RUN               continue a run after a crash, a stop or a reconcile
  status                   list runs
  show RUN                 state, transitions, tasks, effects, snapshots and leases of a run
  logs RUN                 the output each step of a run produced
  reconcile RUN [--accept | --reject-effect] [--restore SNAPSHOT] | --verify | --fail
                           decide a run that needs reconciliation, then continue it:
                           did the uncertain effect happen (--accept) or not (--reject-effect),
                           and continue in the current sandbox or from a snapshot (--restore);
                           --verify asks the service about uncertain effects again
  cancel RUN               cancel a run durably
  gc [--keep N] [--grace S] remove this host's leftover containers and unrecorded snapshot images
                           (older than S seconds, default 600); keep N snapshots per session (default 5)
  env validate FILE [--engine]
                           check an environment manifest (--engine: and that its pinned image is on this engine)
  env lock FILE            pin the manifest's image to the local image id
  agent "TASK" --env FILE [--workspace DIR] [--model M --base-url URL --api-key-env NAME]
        [--require-approval TOOLS --approval-ttl S --max-turns N]
                           start a coding-agent run in a sandbox (live output)
  chat SESSION "MESSAGE"   continue an agent session with another message
  approve RUN ID [--digest D]
                           approve a tool call (ID: call id or approval id) waiting for approval
  deny RUN ID              deny a tool call waiting for approval

options:
  --store PATH|URL         the store: a SQLite file, or postgres://… shared by a fleet
                           (default: $BERTH_STORE or .berth/berth.db)
  --json                   machine-readable output on stdout
  --debug                  show stack traces of internal errors

exit codes:
  0 done   1 the run failed or the command hit an error (the reason is on stderr)   2 usage
  3 the run needs reconciliation   4 another berth process took this store's execution right
  130 stopped by Ctrl-C or SIGTERM (berth resume RUN continues)
`;

type Handler = (ctx: () => CliContext, args: string[], flags: Flags) => Promise<number>;

/** Commands that start work, and so may create the store; every other one needs it to exist. */
const CREATES_STORE = new Set(['run', 'agent']);
interface Flags extends AgentFlags {
  json: boolean;
  debug: boolean;
  digest?: string;
  store?: string;
  restore?: string;
  accept: boolean;
  'reject-effect': boolean;
  fail: boolean;
  verify: boolean;
  'request-id'?: string;
  keep?: string;
  engine: boolean;
  grace?: string;
}

const need = (args: string[], n: number, what: string) => {
  if (args.length < n) throw new BerthError('usage', `missing ${what}\n\n${USAGE}`);
  return args;
};

const commands: Record<string, Handler> = {
  status: (ctx) => status(ctx()),
  show: (ctx, args) => show(ctx(), need(args, 1, 'RUN')[0]!),
  gc: (ctx, _args, flags) => {
    if (flags.keep !== undefined && !/^\d+$/.test(flags.keep)) throw new BerthError('usage', `--keep expects a whole number of snapshots, found "${flags.keep}"`);
    if (flags.grace !== undefined && !/^\d+$/.test(flags.grace)) throw new BerthError('usage', `--grace expects whole seconds, found "${flags.grace}"`);
    return gc(ctx(), flags.keep === undefined ? undefined : Number(flags.keep), flags.grace === undefined ? undefined : Number(flags.grace));
  },
  run: (ctx, args, flags) => runPlan(ctx(), need(args, 1, 'PLAN')[0]!, flags['request-id']),
  resume: (ctx, args) => resumeRun(ctx(), need(args, 1, 'RUN')[0]!),
  reconcile: (ctx, args, flags) => reconcileRun(ctx(), need(args, 1, 'RUN')[0]!, flags),
  cancel: (ctx, args) => cancelRun(ctx(), need(args, 1, 'RUN')[0]!),
  logs: (ctx, args) => logs(ctx(), need(args, 1, 'RUN')[0]!),
  agent: (ctx, args, flags) => agentRun(ctx(), need(args, 1, 'TASK')[0]!, flags),
  chat: (ctx, args, flags) => {
    const [session, message] = need(args, 2, 'SESSION and MESSAGE');
    return agentChat(ctx(), session!, message!, flags);
  },
  approve: (ctx, args, flags) => {
    const [run, id] = need(args, 2, 'RUN and ID');
    return decide(ctx(), run!, id!, 'approve', flags.digest);
  },
  deny: (ctx, args) => {
    const [run, id] = need(args, 2, 'RUN and ID');
    return decide(ctx(), run!, id!, 'deny');
  },
  env: async (ctx, args, flags) => {
    const [sub, file] = need(args, 2, 'env subcommand and FILE');
    if (sub === 'validate') return envValidate(file!, flags.json, flags.engine ? dockerClient() : undefined);
    if (sub === 'lock') return envLock(file!, flags.json, dockerClient());
    throw new BerthError('usage', `unknown env subcommand "${sub}" (validate, lock)`);
  },
};

export async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        json: { type: 'boolean', default: false },
        debug: { type: 'boolean', default: false },
        store: { type: 'string' },
        restore: { type: 'string' },
        accept: { type: 'boolean', default: false },
        'reject-effect': { type: 'boolean', default: false },
        verify: { type: 'boolean', default: false },
        fail: { type: 'boolean', default: false },
        'request-id': { type: 'string' },
        keep: { type: 'string' },
        engine: { type: 'boolean', default: false },
        grace: { type: 'string' },
        env: { type: 'string' },
        workspace: { type: 'string' },
        model: { type: 'string' },
        'base-url': { type: 'string' },
        'api-key-env': { type: 'string' },
        'require-approval': { type: 'string' },
        'approval-ttl': { type: 'string' },
        'max-turns': { type: 'string' },
        digest: { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (err) {
    process.stderr.write(`berth: ${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const flags = parsed.values as Flags & { help: boolean };
  const [name, ...args] = parsed.positionals;
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
  const lazy = () => (ctx ??= buildContext({ store: flags.store, json: flags.json, debug: flags.debug, create: CREATES_STORE.has(name) }));
  try {
    return await command(lazy, args, flags);
  } catch (err) {
    reportError(flags.json, err, flags.debug);
    if (!isBerthError(err)) return EXIT.failed;
    return err.code === 'usage' ? EXIT.usage : err.code === 'execution_right_lost' ? EXIT.rightLost : err.code === 'interrupted' ? EXIT.signal : EXIT.failed;
  } finally {
    await ctx?.sandbox.close().catch(() => {});
    await ctx?.close();
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
process.on('uncaughtException', lastResort);
process.on('unhandledRejection', lastResort);
process.exitCode = await main(process.argv.slice(2));
