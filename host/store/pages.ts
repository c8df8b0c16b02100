import { collectIfGrown } from '../support/heap-bound';
import type { Page } from './store';

/**
 * Pages of a list read by offset until a short page. Rows are only ever appended in a list's order
 * (see {@link Page}), so a reader that keeps only what it needs of each page holds one page at a
 * time however long the run: a 3,000-step run's tasks and effects read whole were ~30 MB of a
 * `berth run`'s peak at its end (bench/RESULTS.md, session 16). Before each read the process's heap
 * bound may collect what the pages before left (support/heap-bound.ts), unless `beforeEach` says otherwise.
 */
export async function* pagesOf<T>(read: (page: Page) => Promise<T[]>, size: number, beforeEach: () => void = collectIfGrown): AsyncGenerator<T[]> {
  for (let offset = 0; ; offset += size) {
    beforeEach();
    const rows = await read({ offset, limit: size });
    if (rows.length) yield rows;
    if (rows.length < size) return;
  }
}
