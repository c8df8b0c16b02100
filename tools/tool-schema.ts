import { z } from 'zod';
import type { AnyTool } from './tool';

/** A tool as the Chat Completions API advertises it. */
export interface ChatTool {
  type: 'function';
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

/** The model's view of a tool, derived from its zod schema (inputs as the model must send them). */
export function toolSchema(tool: AnyTool): ChatTool {
  const parameters = z.toJSONSchema(tool.input, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
  delete parameters.$schema;
  return { type: 'function', function: { name: tool.name, description: tool.description, parameters } };
}
