import { FAILSAFE_SCHEMA, load, Type } from 'js-yaml';

/**
 * YAML 1.2's core schema with the `yaml` package's exact resolution of plain scalars (its
 * `schema/core` tests, copied): js-yaml's own core schema also reads `1_000`, `0b101` and
 * `1_0.5` as numbers, which `yaml` keeps as strings, so a manifest would change meaning with
 * the parser. Quoted scalars are strings in both.
 */
const scalar = (tag: string, test: RegExp, construct: (s: string) => unknown) =>
  new Type(`tag:yaml.org,2002:${tag}`, { kind: 'scalar', resolve: (s: string | null) => test.test(s ?? ''), construct: (s: string | null) => construct(s ?? '') });

const CORE_AS_YAML = FAILSAFE_SCHEMA.extend({
  implicit: [
    scalar('null', /^(?:~|[Nn]ull|NULL)?$/, () => null),
    scalar('bool', /^(?:[Tt]rue|TRUE|[Ff]alse|FALSE)$/, (s) => s[0] === 't' || s[0] === 'T'),
    scalar('int', /^(?:0o[0-7]+|[-+]?[0-9]+|0x[0-9a-fA-F]+)$/, (s) => (s.startsWith('0o') ? parseInt(s.slice(2), 8) : s.startsWith('0x') ? parseInt(s.slice(2), 16) : parseInt(s, 10))),
    scalar('float', /^(?:[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN|[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+|[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*))$/, (s) =>
      s.slice(-3).toLowerCase() === 'nan' ? Number.NaN : s.slice(-3).toLowerCase() === 'inf' ? (s[0] === '-' ? -Infinity : Infinity) : parseFloat(s),
    ),
  ],
});

// An anchor (`&name` after a space, a line start or a flow indicator): aliases can then repeat a
// node exponentially, which only `yaml` bounds (its alias count); `&&` in a shell command is none.
const ANCHOR = /(?:^|[\s[{,])&[^\s&]/m;
// A directive (`%YAML 1.1` changes the schema) is left to `yaml` as well; several documents fail here.
const DIRECTIVE = /^%/m;

/**
 * The data of a YAML text read by js-yaml, which builds values as it reads: a 3,000-step plan
 * (150 KB) took 17 MB of transient heap through `yaml`'s syntax tree and document (30 MB of the
 * run's RSS at its start), and nothing here. `undefined` when the text is one this reader leaves
 * to `yaml` (anchors, directives, several documents) or when it fails: `yaml` then reads it again
 * and names the fault with its line and column, as it always did.
 */
export function fastYaml(text: string, file: string): { value: unknown } | undefined {
  if (ANCHOR.test(text) || DIRECTIVE.test(text)) return undefined;
  try {
    return { value: load(text, { schema: CORE_AS_YAML, filename: file }) };
  } catch {
    return undefined;
  }
}
