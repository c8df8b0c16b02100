import { extname } from 'node:path';
import { parseDocument } from 'yaml';
import { BerthError } from '../host/errors';
import { fastYaml } from './yaml-core';

export type ManifestFormat = 'json' | 'yaml';

/** JSON for `.json`, YAML for `.yaml`/`.yml`; otherwise JSON when the text starts with `{`. */
export function detectFormat(text: string, file: string): ManifestFormat {
  const ext = extname(file).toLowerCase();
  if (ext === '.json') return 'json';
  if (ext === '.yaml' || ext === '.yml') return 'yaml';
  return text.trimStart().startsWith('{') ? 'json' : 'yaml';
}

function syntaxError(file: string, line: number, column: number, reason: string): BerthError {
  return new BerthError('manifest_syntax', `${file}:${line}:${column}: ${reason}`, { details: { file, line, column, reason } });
}

/** 1-based line and column of a character offset. */
function position(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset).split('\n');
  return { line: before.length, column: (before.at(-1)?.length ?? 0) + 1 };
}

function readJson(text: string, file: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    const reason = (err as Error).message;
    // Node 20 reports "at position N"; later versions also say "(line L column C)".
    const lc = /line (\d+) column (\d+)/.exec(reason);
    if (lc) throw syntaxError(file, Number(lc[1]), Number(lc[2]), reason);
    const at = /position (\d+)/.exec(reason);
    const { line, column } = at ? position(text, Number(at[1])) : position(text, text.length);
    throw syntaxError(file, line, column, reason);
  }
}

function readYaml(text: string, file: string): unknown {
  const fast = fastYaml(text, file);
  if (fast) return fast.value;
  // Duplicate keys are errors: with "last one wins", a pasted section could silently override.
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  const first = doc.errors[0];
  if (first) {
    const at = first.linePos?.[0] ?? { line: 1, col: 1 };
    // prettyErrors appends "at line L, column C:" and a code excerpt; the position is ours to add.
    const reason = (first.message.split('\n')[0] ?? first.code).replace(/ at line \d+, column \d+:?$/, '');
    throw syntaxError(file, at.line, at.col, reason);
  }
  // An empty file (or one of only comments) has no manifest at all, which is not `null`.
  return doc.contents === null ? undefined : (doc.toJS() as unknown);
}

/** Parses manifest text into plain data, throwing `manifest_syntax` with a line and column. */
export function readDocument(text: string, file: string): unknown {
  return detectFormat(text, file) === 'json' ? readJson(text, file) : readYaml(text, file);
}
