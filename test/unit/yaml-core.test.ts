import { readFileSync } from 'node:fs';
import { parseDocument } from 'yaml';
import { describe, expect, it } from 'vitest';
import { readDocument } from '../../environment/read-document';
import { fastYaml } from '../../environment/yaml-core';

const byYaml = (text: string) => {
  const doc = parseDocument(text, { uniqueKeys: true });
  if (doc.errors.length) throw doc.errors[0];
  return doc.contents === null ? undefined : doc.toJS();
};

// Plain scalars each parser could read differently, as values, keys and list items.
const SCALARS = [
  '~', 'null', 'Null', 'NULL', 'nULL', '', 'true', 'True', 'TRUE', 'tRUE', 'false', 'yes', 'no', 'on', 'off', 'y', 'n',
  '0', '-0', '+12', '007', '0o14', '0o19', '0x1F', '0X1F', '0b101', '1_000', '1_0.5', '12:30:00', '1e3', '1E-3', '+.5', '.5', '5.', '1.2.3',
  '.inf', '-.Inf', '+.INF', '.nan', '.NaN', 'NaN', 'inf', '2024-01-01', '2024-01-01T10:00:00Z', '9007199254740993', '0.1e+2', '=', '<<',
];

describe('YAML read by js-yaml with yaml\'s core schema (environment/yaml-core.ts)', () => {
  it('reads every plain scalar yaml reads, as the value yaml gives, in maps, lists and flow collections', () => {
    const text = [
      'block:',
      ...SCALARS.map((s, i) => `  k${i}: ${s}`),
      'list:',
      ...SCALARS.map((s) => `  - ${s}`),
      `flow: [${SCALARS.filter((s) => s !== '').join(', ')}]`,
      `quoted: [${SCALARS.map((s) => JSON.stringify(s)).join(', ')}]`,
      `single: [${SCALARS.map((s) => `'${s}'`).join(', ')}]`,
      'tagged: [!!str 12, !!int "12", !!float 1.5, !!bool "true", !!null ""]',
      // A null key is the one difference: js-yaml names it "null", yaml "" (no manifest field is either).
      'keys: { 1: a, true: b, 0x10: d, 1.5: e }',
    ].join('\n');
    const fast = fastYaml(text, 'scalars.yaml');
    expect(fast).toBeDefined();
    expect(fast!.value).toEqual(byYaml(text));
  });

  it('reads block scalars, folded text, comments, empty values and a leading document marker as yaml does', () => {
    const text = `---\n# a plan\nname: demo # trailing\nsteps:\n  - name: build\n    run: |\n      make && make test\n      echo "done" # not a comment\n    env:\n  - name: fold\n    run: >-\n      one\n      two\n\n      three\n  - { name: "q\\"x", run: 'it''s', replay: never }\nempty: []\nnone: {}\nlast:\n...\n`;
    expect(fastYaml(text, 'p.yaml')!.value).toEqual(byYaml(text));
  });

  it('reads the repository\'s YAML files as yaml does', () => {
    for (const file of ['examples/c-hello/env.yaml', 'examples/c-hello/plan.yaml']) {
      const text = readFileSync(file, 'utf8');
      expect(fastYaml(text, file)?.value, file).toEqual(byYaml(text));
    }
  });

  it('leaves anchors, directives, duplicate keys, several documents and broken text to yaml, which names the fault by line and column', () => {
    for (const text of ['a: &x [1]\nb: *x\n', '%YAML 1.1\n---\na: yes\n', 'a: 1\na: 2\n', 'a: 1\n---\nb: 2\n', 'a: [1, 2\n', 'a:\n\t- 1\n']) expect(fastYaml(text, 'x.yaml'), text).toBeUndefined();
    expect(() => readDocument('steps:\n  - a: 1\n    a: 2\n', 'plan.yaml')).toThrow(/plan\.yaml:3:5: Map keys must be unique/);
    expect(fastYaml('run: cd x && make && make test\n', 'x.yaml')!.value).toEqual({ run: 'cd x && make && make test' });
  });

  it('reads a 3,000-step plan as yaml does, without yaml\'s syntax tree', () => {
    const text = `name: long\nsteps:\n${Array.from({ length: 3000 }, (_, i) => `  - { name: s${i}, run: "echo ${i}", replay: safe }`).join('\n')}\n`;
    expect(fastYaml(text, 'long.yaml')!.value).toEqual(byYaml(text));
  });
});
