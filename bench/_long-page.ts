/** `npx tsx bench/_long-page.ts STORE RUN`: the run page's size (KB) of one stored run, as bench/long.ts measures it. */
import { runPageKb } from './long';

const [path, runId] = process.argv.slice(2);
console.log(`run_page_kb = ${(await runPageKb(path!, runId!)).toFixed(1)}`);
