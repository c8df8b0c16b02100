import { describe, expect, it } from 'vitest';
import { GroupCommit, type MemberOutcome } from '../../host/store/commit/group-commit';

/** A recording writer: each call is one transaction; answers come from `answer` (pure logic, no store). */
function recorder(answer: (input: string) => MemberOutcome<string> = (i) => ({ value: `ok:${i}` })) {
  const groups: string[][] = [];
  let release: (() => void) | null = null;
  let hold = false;
  const write = async (inputs: string[]) => {
    groups.push([...inputs]);
    if (hold) await new Promise<void>((r) => (release = r));
    return inputs.map(answer);
  };
  return {
    groups,
    write,
    holdNext: () => (hold = true),
    release: () => {
      hold = false;
      release?.();
    },
  };
}

describe('group commit', () => {
  it('writes the commits asked for in one turn of the event loop as one group, in the order asked, and answers each its own', async () => {
    const w = recorder();
    const g = new GroupCommit(w.write);
    const answers = await Promise.all(['a', 'b', 'c'].map((i) => g.commit(i)));
    expect(answers).toEqual(['ok:a', 'ok:b', 'ok:c']);
    expect(w.groups).toEqual([['a', 'b', 'c']]);
  });

  it('rejects only the member that ran into an error; the others of its group get their answers', async () => {
    const w = recorder((i) => (i === 'bad' ? { error: new Error('refused bad') } : { value: `ok:${i}` }));
    const g = new GroupCommit(w.write);
    const results = await Promise.allSettled(['a', 'bad', 'c'].map((i) => g.commit(i)));
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message))).toEqual(['ok:a', 'refused bad', 'ok:c']);
    expect(w.groups).toHaveLength(1);
  });

  it('fails every member of a group whose transaction failed as a whole', async () => {
    const g = new GroupCommit<string, string>(async () => {
      throw new Error('disk full');
    });
    const results = await Promise.allSettled(['a', 'b'].map((i) => g.commit(i)));
    expect(results.map((r) => r.status === 'rejected' && (r.reason as Error).message)).toEqual(['disk full', 'disk full']);
  });

  it('answers no member before its group\'s write has finished (the commit is durable before any promise resolves)', async () => {
    const w = recorder();
    w.holdNext();
    const g = new GroupCommit(w.write);
    let answered = 0;
    const pending = ['a', 'b'].map((i) => g.commit(i).then(() => answered++));
    while (w.groups.length === 0) await new Promise((r) => setImmediate(r));
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    expect(answered).toBe(0);
    w.release();
    await Promise.all(pending);
    expect(answered).toBe(2);
  });

  it('puts a commit asked for while a group is being written into the next group, written only after the first is answered', async () => {
    const w = recorder();
    w.holdNext();
    const g = new GroupCommit(w.write);
    const order: string[] = [];
    const first = g.commit('a').then((v) => order.push(v));
    while (w.groups.length === 0) await new Promise((r) => setImmediate(r));
    const second = [g.commit('b').then((v) => order.push(v)), g.commit('c').then((v) => order.push(v))];
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    // One transaction at a time: b and c wait for a's group.
    expect(w.groups).toEqual([['a']]);
    w.release();
    await Promise.all([first, ...second]);
    expect(w.groups).toEqual([['a'], ['b', 'c']]);
    expect(order).toEqual(['ok:a', 'ok:b', 'ok:c']);
  });

  it('splits more commits than the group limit into several groups, keeping their order', async () => {
    const w = recorder();
    const g = new GroupCommit(w.write, 2);
    const inputs = ['a', 'b', 'c', 'd', 'e'];
    expect(await Promise.all(inputs.map((i) => g.commit(i)))).toEqual(inputs.map((i) => `ok:${i}`));
    expect(w.groups).toEqual([['a', 'b'], ['c', 'd'], ['e']]);
  });

  it('idle() waits until every commit asked for so far is answered', async () => {
    const w = recorder();
    w.holdNext();
    const g = new GroupCommit(w.write);
    let done = false;
    void g.commit('a').then(() => (done = true));
    const idle = g.idle();
    while (w.groups.length === 0) await new Promise((r) => setImmediate(r));
    w.release();
    await idle;
    expect(done).toBe(true);
  });
});
