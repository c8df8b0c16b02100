/**
 * search A/B (not a suite): the `search` tool over a workspace of 2,000 plain files (50 dirs x 40
 * files x 50 lines), old against new, interleaved in one sandbox, with the load printed beside
 * each figure; then over 2,000 files named with colons (`12:00:00-N.log`), which the new tool
 * searches per matching file. The old side is a copy of the old tools/search.ts whose path
 * SEARCH_OLD names. Checks the two answer alike on the plain tree first.
 * `SEARCH_OLD=/tmp/search-old.ts npx tsx bench/_search-ab.ts [ROUNDS]`
 */
import { loadavg } from 'node:os';
import { search as searchNew, type SearchInput } from '../tools/search';
import type { ToolDefinition } from '../tools/tool';
import { benchSandbox } from './_bench-sandbox';
import { median } from './_stats';

const ROUNDS = Number(process.argv[2] ?? 10);
const searchOld = ((await import(process.env.SEARCH_OLD!)) as { search: ToolDefinition<SearchInput> }).search;
const sb = await benchSandbox('berth-bench-search-');
try {
  const lease = await sb.host.lease(sb.spec, { sessionId: 'bench', autoHeartbeat: false });
  const ctx = { sandbox: lease, signal: new AbortController().signal, commandTimeoutMs: 60_000 };
  const made = await lease.exec([
    'sh',
    '-c',
    `for d in $(seq 1 50); do mkdir -p plain/d$d; for f in $(seq 1 40); do
       i=0; while [ $i -lt 50 ]; do echo "line $i of file $f in dir $d with some words to search"; i=$((i+1)); done > plain/d$d/f$f.txt
       [ $f = 7 ] && echo "a needle here" >> plain/d$d/f$f.txt
     done; done
     mkdir -p colon && for n in $(seq 1 2000); do echo "log $n line" > "colon/12:00:00-$n.log"; done
     [ 1 = 1 ] && echo "a needle here" >> "colon/12:00:00-77.log"
     find plain -type f | wc -l; find colon -type f | wc -l`,
  ]);
  console.log(`made: ${made.stdout.trim().replace(/\n/g, ' ')} (exit ${made.exitCode})`);
  const cases: Array<[string, SearchInput]> = [
    ['plain few', { pattern: 'needle', path: 'plain' }],
    ['plain none', { pattern: 'zzz[0-9]', path: 'plain' }],
    ['plain 500+', { pattern: 'words', path: 'plain', fixed: true }],
    ['colon few', { pattern: 'needle', path: 'colon' }],
    ['colon all', { pattern: 'line', path: 'colon' }],
  ];
  for (const [name, args] of cases.slice(0, 3)) {
    const [a, b] = [await searchOld.run(ctx, args, null), await searchNew.run(ctx, args, null)];
    const same = a.content.split('\n').sort().join('\n') === b.content.split('\n').sort().join('\n');
    console.log(`${name}: old ${a.content.split('\n').length} lines, new ${b.content.split('\n').length} lines, same set: ${same}`);
  }
  const t: Record<string, number[]> = {};
  const loads: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    loads.push(loadavg()[0]!);
    for (const [name, args] of cases) {
      const sides: Array<[string, ToolDefinition<SearchInput>]> = [['old', searchOld], ['new', searchNew]];
      for (const [side, tool] of i % 2 ? sides.reverse() : sides) {
        const t0 = performance.now();
        await tool.run(ctx, args, null);
        (t[`${name} ${side}`] ??= []).push(performance.now() - t0);
      }
    }
    console.log(`round ${i + 1} load ${loads.at(-1)!.toFixed(2)}: ${cases.map(([n]) => `${n} ${t[`${n} old`]!.at(-1)!.toFixed(0)}/${t[`${n} new`]!.at(-1)!.toFixed(0)}`).join(', ')} ms (old/new)`);
  }
  console.log(`load ${Math.min(...loads).toFixed(2)}-${Math.max(...loads).toFixed(2)}`);
  for (const [name] of cases) {
    const [o, n] = [t[`${name} old`]!, t[`${name} new`]!];
    console.log(`${name.padEnd(11)} median old ${median(o).toFixed(1)} ms, new ${median(n).toFixed(1)} ms, new/old per round median ${median(n.map((x, i) => x / o[i]!)).toFixed(2)}x`);
  }
  await lease.release();
} finally {
  await sb.close();
}
