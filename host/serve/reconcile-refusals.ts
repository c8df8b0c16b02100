import { BerthError, isBerthError } from '../errors';

const list = (v: unknown) => (Array.isArray(v) ? v.map(String).join(', ') : '');

/**
 * A reconcile refusal in the page's words: the API says what to add to `berth reconcile`; a person
 * on the page acts with its buttons, the answer beside "fail the run" and the Snapshots table, or
 * (when this server lacks an application's code) by restarting `berth serve` with its extension.
 * The code, ids and details stay as they are; only the sentence changes.
 */
export function pageRefusal(err: unknown): unknown {
  if (!isBerthError(err)) return err;
  const d = err.details ?? {};
  const say = (message: string) => new BerthError(err.code, message, { retryable: err.retryable, ids: err.ids, details: err.details, cause: err });
  switch (err.code) {
    case 'effect_answer_needed':
      return say(
        `the run has effects that may or may not have happened (${list(d.effectIds)}): ${d.fail ? 'choose "they happened" or "they did not happen" beside "fail the run"' : 'choose accept (they happened) or reject (they did not)'}, then act again; nothing was changed`,
      );
    case 'no_verifier':
      return say(
        `this server has no verifier for effect kind ${list(d.kinds)}, so it cannot ask the service about ${list(d.effectIds)}; nothing was changed. ` +
          'Restart berth serve with --extension MODULE (the extension of the application that registers that kind), or choose accept (it happened) or reject (it did not)',
      );
    case 'nothing_to_verify':
      return say('nothing about this run is uncertain, so there is nothing to ask the service: accept continues the run, fail ends it');
    case 'task_kind_unknown':
      return say(
        `this server cannot run the task kind ${list(d.kinds)} of this run, so it cannot carry out a decision; nothing was changed. ` +
          'Restart berth serve with --extension MODULE (that application\'s extension), or settle the run from the program that registers the kind',
      );
    case 'sandbox_unusable':
      return say(`the run cannot continue in its current sandbox (${String(d.reason ?? 'it is not usable')}); nothing was changed. Restore a snapshot from the Snapshots table (restorable: ${list(d.restorable) || 'none'}), or fail the run`);
    case 'run_not_reconcilable':
      return say(d.onlyFail ? 'no task of this run waits for a decision and it has not ended: only "fail the run" applies' : d.noWaiting ? 'no task of this run waits to continue: accept or reject settles its uncertain effects, fail ends it' : err.message);
    case 'snapshot_not_found':
      return say(`snapshot ${String(err.ids.snapshotId ?? '')} is not one of this run's: choose one listed in the Snapshots table`);
    default:
      return err;
  }
}
