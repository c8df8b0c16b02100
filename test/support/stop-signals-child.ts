// A command stopping slowly under host/cli/stop-signals.ts: says when its stop began, then never
// finishes it, so the test's second signal always lands while it is still stopping.
import { runLeft, stopSignals } from '../../host/cli/stop-signals';

const keep = setInterval(() => {}, 1000);
stopSignals(runLeft(process.argv[2] ?? 'run_x'), (signal) => process.stdout.write(`stopping on ${signal}\n`));
process.stdout.write('ready\n');
void keep;
