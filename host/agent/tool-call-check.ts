import type { AnyTool } from '../../tools';

/** A tool call that may run, or the error text the model reads instead. */
export type CheckedCall = { ok: true; tool: AnyTool; args: unknown } | { ok: false; content: string };

/**
 * Turns the model's raw call into a tool and validated arguments. An unknown tool, arguments
 * that are not JSON, or arguments the tool's schema refuses are answers for the model to read
 * and correct, never exceptions.
 */
export function checkToolCall(tools: ReadonlyMap<string, AnyTool>, name: string, raw: string): CheckedCall {
  const tool = tools.get(name);
  if (!tool) return { ok: false, content: `error: there is no tool named "${name}". Available tools: ${[...tools.keys()].join(', ')}.` };
  let value: unknown;
  try {
    value = raw.trim() === '' ? {} : JSON.parse(raw);
  } catch (err) {
    return { ok: false, content: `error: the arguments for ${name} are not valid JSON (${(err as Error).message}). Send one JSON object that matches the tool's parameters.` };
  }
  const parsed = tool.input.safeParse(value);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || '(arguments)'}: ${i.message}`).join('; ');
    return { ok: false, content: `error: invalid arguments for ${name}: ${problems}.` };
  }
  return { ok: true, tool, args: parsed.data };
}
