import { describe, expect, it } from 'vitest';
import { approvalDigest, approvalId, checkToolCall } from '../../host/agent';
import { backoffMs } from '../../host/agent/model';
import { KeyedLock } from '../../host/agent/session-lock';
import { builtinTools, exec, resolveFlag, toolSchema, writeFile } from '../../tools';

const tools = new Map(builtinTools.map((t) => [t.name, t]));

describe('tool call checks', () => {
  it('refuses an unknown tool, listing the ones that exist', () => {
    const r = checkToolCall(tools, 'rm_rf', '{}');
    expect(r).toEqual({ ok: false, content: expect.stringContaining('no tool named "rm_rf"') });
    expect(!r.ok && r.content).toContain('exec, read_file, list_files, search, write_file, edit');
  });

  it('refuses arguments that are not JSON and arguments the schema refuses, naming the field', () => {
    expect(checkToolCall(tools, 'exec', '{"command": ')).toMatchObject({ ok: false, content: expect.stringContaining('not valid JSON') });
    expect(checkToolCall(tools, 'exec', '{"command": 3}')).toMatchObject({ ok: false, content: expect.stringMatching(/invalid arguments for exec: command/) });
    expect(checkToolCall(tools, 'exec', '{"command": "ls", "sudo": true}')).toMatchObject({ ok: false, content: expect.stringContaining('sudo') });
  });

  it('accepts valid arguments with defaults applied', () => {
    expect(checkToolCall(tools, 'list_files', '')).toMatchObject({ ok: true, args: { path: '.' } });
  });
});

describe('tool definitions', () => {
  it('derive the JSON schema the model sees from the zod input', () => {
    const s = toolSchema(exec);
    expect(s.function.name).toBe('exec');
    expect(s.function.parameters).toMatchObject({ type: 'object', properties: { command: { type: 'string' }, safe: { type: 'boolean' } }, required: ['command'], additionalProperties: false });
  });

  it('convert a tool\'s zod schema once: every request shares one frozen JSON Schema per tool', () => {
    // The context planner builds a request per cut it tries; converting each time was most of a compacting turn's cost.
    const a = toolSchema(exec);
    const b = toolSchema(exec);
    expect(b.function.parameters).toBe(a.function.parameters);
    expect(Object.isFrozen(a.function.parameters)).toBe(true);
    expect(Object.isFrozen((a.function.parameters.properties as Record<string, unknown>).command)).toBe(true);
    expect(() => {
      'use strict';
      (a.function.parameters as Record<string, unknown>).injected = true;
    }).toThrow(TypeError);
    expect(toolSchema(writeFile).function.parameters).not.toBe(a.function.parameters);
  });

  it('keep exec at replay never unless the call marks itself safe, and write_file at verify', () => {
    expect(resolveFlag(exec.replay, { command: 'rm -rf x' })).toBe('never');
    expect(resolveFlag(exec.replay, { command: 'cat x', safe: true })).toBe('safe');
    expect(resolveFlag(exec.mutates, { command: 'cat x', safe: true })).toBe(false);
    expect(writeFile.replay).toBe('verify');
    expect(tools.get('read_file')!.replay).toBe('safe');
    expect(tools.get('edit')!.replay).toBe('verify');
  });
});

describe('approval digest', () => {
  it('is the same for the same tool and arguments in any key order, and differs for other arguments or another tool', () => {
    const a = approvalDigest('exec', { command: 'ls', timeout_s: 5 });
    expect(a).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(approvalDigest('exec', { timeout_s: 5, command: 'ls' })).toBe(a);
    expect(approvalDigest('exec', { command: 'ls -a', timeout_s: 5 })).not.toBe(a);
    expect(approvalDigest('search', { command: 'ls', timeout_s: 5 })).not.toBe(a);
    expect(approvalId('run_1', 'call_a')).not.toBe(approvalId('run_1', 'call_b'));
  });
});

describe('retry backoff', () => {
  it('doubles from the base up to the cap and takes the server retry-after when given', () => {
    const o = { baseMs: 100, maxMs: 1_000 };
    expect([1, 2, 3, 4, 5].map((n) => backoffMs(n, o))).toEqual([100, 200, 400, 800, 1_000]);
    expect(backoffMs(3, { ...o, retryAfterMs: 50 })).toBe(50);
  });
});

describe('session lock', () => {
  it('runs holders of one key one at a time in arrival order, and other keys alongside', async () => {
    const lock = new KeyedLock();
    const log: string[] = [];
    // Each holder ends when the test opens its gate: no timer decides the order.
    const gates = new Map<string, () => void>();
    const job = (key: string, name: string) =>
      lock.run(key, async () => {
        log.push(`${name}+`);
        await new Promise<void>((r) => gates.set(name, r));
        log.push(`${name}-`);
      });
    const until = async (name: string) => {
      while (!gates.has(name)) await new Promise((r) => setImmediate(r));
      return gates.get(name)!;
    };
    const all = Promise.all([job('s', 'a'), job('s', 'b'), job('t', 'c'), job('s', 'd')]);
    // c's key is free: it runs and ends while a still holds s.
    (await until('c'))();
    (await until('a'))();
    (await until('b'))();
    (await until('d'))();
    await all;
    expect(log.filter((x) => 'abd'.includes(x[0]!))).toEqual(['a+', 'a-', 'b+', 'b-', 'd+', 'd-']);
    expect(log.indexOf('c-')).toBeLessThan(log.indexOf('a-'));
    expect(log.indexOf('b+')).toBeGreaterThan(log.indexOf('a-'));
  });

  it('releases the key when a holder throws', async () => {
    const lock = new KeyedLock();
    await expect(lock.run('k', async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await lock.run('k', async () => 'next')).toBe('next');
  });
});
