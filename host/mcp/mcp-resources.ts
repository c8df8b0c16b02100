import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { ErrorCode, ListResourcesRequestSchema, ListResourceTemplatesRequestSchema, McpError, ReadResourceRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { Berth } from '../api/berth';
import type { McpSessions } from './mcp-session';

const RECORD_URI = /^berth:\/\/session\/([A-Za-z0-9_]+)\/record$/;
const recordUri = (sessionId: string) => `berth://session/${sessionId}/record`;

/**
 * The run record as MCP resources: `berth://session/{id}/record` is every run (call) of the session
 * as `berth export` writes it, one JSON document each in a list, so a client can read what was done,
 * with which outcome, from the store alone. Listed for the session this server works in; any
 * session of the store can be read by its URI (the template).
 */
export function addRecordResources(server: Server, berth: Berth, sessions: McpSessions, toMcpError: (err: unknown) => McpError): void {
  server.setRequestHandler(ListResourcesRequestSchema, async () => {
    const id = sessions.sessionId;
    return { resources: id ? [{ uri: recordUri(id), name: `session ${id}: run record`, mimeType: 'application/json', description: "Every call of the session as its exported run record (berth export)" }] : [] };
  });
  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({
    resourceTemplates: [{ uriTemplate: 'berth://session/{session}/record', name: 'run record of a session', mimeType: 'application/json', description: 'Every run of the session as its exported record' }],
  }));
  server.setRequestHandler(ReadResourceRequestSchema, async (req) => {
    const m = RECORD_URI.exec(req.params.uri);
    if (!m) throw new McpError(ErrorCode.InvalidParams, `no resource ${req.params.uri}; resources are berth://session/{session}/record`, { code: 'resource_unknown' });
    try {
      const sessionId = m[1]!;
      await sessions.requireSession(sessionId);
      const runs = await berth.list({ sessionId });
      const records = [];
      for (const r of runs) records.push(JSON.parse((await berth.export(r.id)).text) as unknown);
      return { contents: [{ uri: req.params.uri, mimeType: 'application/json', text: JSON.stringify({ session: sessionId, runs: records }) }] };
    } catch (err) {
      throw toMcpError(err);
    }
  });
}
