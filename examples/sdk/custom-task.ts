/**
 * An application task kind on the library: `count-words` spawns one `count-text` task per text
 * (each a durable task with its own checkpoint) and sums their results. Submitted, driven and
 * read through the same host API the CLI uses; kill it at any point and run it again with the
 * same store: the same request id continues the same run, and no finished text is counted again.
 *
 *   npx tsx examples/sdk/custom-task.ts STORE TEXT...
 *
 * In your own project the import is `from 'berth'`.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { Berth, childResults, defineTask, extension, spawnEach } from '../../host/index';

const countText = defineTask({
  kind: 'count-text',
  input: z.object({ text: z.string() }),
  result: z.object({ words: z.number().int() }),
  initialPhase: 'count',
  phases: {
    count: async (ctx) => ({ type: 'complete', result: { words: ctx.value.text.split(/\s+/).filter(Boolean).length } }),
  },
});

const countWords = defineTask({
  kind: 'count-words',
  input: z.object({ texts: z.array(z.string()).min(1) }),
  result: z.object({ words: z.number().int(), texts: z.number().int() }),
  initialPhase: 'spawn',
  phases: {
    // One subtask per text, created in the commit that starts the wait for them.
    spawn: async (ctx) => spawnEach('count-text', ctx.value.texts.map((text) => ({ text })), { phase: 'sum' }),
    sum: async (ctx) => {
      const done = await childResults(ctx);
      const words = done.reduce((n, c) => n + ((c.result as { words?: number } | null)?.words ?? 0), 0);
      return { type: 'complete', result: { words, texts: done.length } };
    },
  },
});

const [store, ...texts] = process.argv.slice(2);
if (!store || texts.length === 0) {
  process.stderr.write('usage: custom-task.ts STORE TEXT...\n');
  process.exit(2);
}

await using berth = await Berth.open({ store, extensions: [extension('word-count', { tasks: [countWords, countText] })] });
const { run } = await berth.submitTask({ kind: 'count-words', input: { texts }, requestId: `count-${createHash('sha256').update(JSON.stringify(texts)).digest('hex').slice(0, 16)}` });
const end = await berth.drive(run.id, { signal: AbortSignal.timeout(120_000) });
const root = await berth.store.getTask(end.run.rootTaskId!);
console.log(JSON.stringify({ runId: run.id, state: end.run.state, result: root?.result ?? null }));
