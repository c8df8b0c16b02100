import { Agent as HttpAgent, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { Logger } from 'pino';
import { isBerthError } from '../errors';
import type { SandboxGatewaySpec } from '../sandbox';
import { scrub, type SecretSource } from '../secrets';
import { newId } from '../support';
import { GATEWAY_ENTRY, type GatewayLedger } from './ledger';
import { providerKey } from './provider-key';
import { usageOf } from './usage';

const API_PATH = /^\/v1(\/[A-Za-z0-9_.-]+)+$/;

/** Largest request body the gateway takes; a model request past it is a bug or an attack. */
const MAX_REQUEST_BYTES = 8 * 1024 * 1024;
/** What the record keeps of a request or answer body; the rest is counted, not kept. */
const RECORDED_BODY_CHARS = 64 * 1024;
/** What the gateway keeps of an answer to read its usage (a stream's last event carries it). */
const READ_ANSWER_BYTES = 8 * 1024 * 1024;

/** The codes a refusal carries in its OpenAI-shaped error body, for clients and the record. */
export type GatewayRefusal =
  | 'gateway_budget_exhausted'
  | 'gateway_model_not_allowed'
  | 'gateway_bad_request'
  | 'gateway_unsupported'
  | 'gateway_key_unavailable'
  | 'gateway_provider_unreachable';

const STATUS: Record<GatewayRefusal, number> = {
  gateway_budget_exhausted: 429,
  gateway_model_not_allowed: 403,
  gateway_bad_request: 400,
  gateway_unsupported: 404,
  gateway_key_unavailable: 502,
  gateway_provider_unreachable: 502,
};

/** Request headers passed on to the provider; everything else (the sandbox's key above all) stays behind. */
const PASSED = ['content-type', 'accept', 'user-agent', 'openai-beta'];
/** Answer headers not passed back: hop-by-hop, and the provider's cookies (the length stays: the bytes pass unchanged). */
const DROPPED = new Set(['connection', 'keep-alive', 'transfer-encoding', 'set-cookie']);

export interface ModelGatewayOptions {
  spec: SandboxGatewaySpec;
  ledger: GatewayLedger;
  log: Logger;
  keySource?: SecretSource;
  now?: () => number;
}

/**
 * The model gateway of one sandbox: an OpenAI-compatible endpoint served on its egress proxy's
 * address, forwarding each request to the configured provider with the real key, which the host
 * reads per request and never hands to the sandbox. Each request, answer and refusal is an entry on
 * the run; answers' usage is the run's cost and counts against its token budget. A request that
 * starts within the budget finishes even if its answer passes it; the next one is refused.
 */
export class ModelGateway {
  private readonly base: URL;
  private readonly agent: HttpAgent;
  private readonly allowed: Set<string>;
  private readonly now: () => number;

  constructor(private readonly o: ModelGatewayOptions) {
    this.base = new URL(o.spec.providerBaseUrl.replace(/\/+$/, ''));
    // Kept-alive connections: the provider's TLS and TCP setup is paid once, not per completion.
    this.agent = this.base.protocol === 'https:' ? new HttpsAgent({ keepAlive: true }) : new HttpAgent({ keepAlive: true });
    this.allowed = new Set(o.spec.models);
    this.now = o.now ?? Date.now;
  }

  close(): void {
    this.agent.destroy();
  }

  /** Serves one request from the sandbox; `path` is its path and query (`/v1/chat/completions`). */
  handle(req: IncomingMessage, res: ServerResponse, path: string): void {
    void this.serve(req, res, path).catch((err: unknown) => {
      this.o.log.error({ err }, 'model gateway request failed');
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
      res.end();
    });
  }

  private async serve(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const at = this.now();
    const pathname = path.split('?')[0]!;
    if (req.method === 'GET' && pathname === '/v1/models') return void this.models(res);
    const raw = await readBody(req, MAX_REQUEST_BYTES);
    const account = await this.o.ledger.account();
    const refuse = (code: GatewayRefusal, message: string, model: string | null) => {
      this.o.ledger.entry(account.runId, GATEWAY_ENTRY.refused, { at, path: pathname, model, code, message });
      this.o.log.warn({ event: 'gateway', path: pathname, model, code }, message);
      sendError(res, code, message);
    };
    // Only plain API paths: no dot segments or encodings that could reach another part of the provider with its key.
    if (req.method !== 'POST' || !API_PATH.test(pathname) || pathname.split('/').includes('..')) return refuse('gateway_unsupported', `the model gateway serves POST /v1/... and GET /v1/models, not ${req.method} ${pathname}`, null);
    if (raw === undefined) return refuse('gateway_bad_request', `request body larger than ${MAX_REQUEST_BYTES} bytes`, null);
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
      if (!body || typeof body !== 'object' || Array.isArray(body)) throw new Error('not an object');
    } catch {
      return refuse('gateway_bad_request', 'the request body is not a JSON object', null);
    }
    const model = typeof body.model === 'string' ? body.model : null;
    if (!model) return refuse('gateway_bad_request', 'the request names no model (field "model")', null);
    if (!this.allowed.has(model)) return refuse('gateway_model_not_allowed', `model "${model}" is not in gateway.models (${[...this.allowed].join(', ')})`, model);
    const budget = this.o.spec.budgetTokens;
    if (budget !== null && account.spentTokens >= budget) {
      return refuse('gateway_budget_exhausted', `the run's model token budget is spent: ${account.spentTokens} of gateway.budget.tokens ${budget}`, model);
    }
    let key: string;
    try {
      key = await providerKey(this.o.spec.key, this.o.keySource);
    } catch (err) {
      if (isBerthError(err, 'gateway_key_unavailable')) return refuse('gateway_key_unavailable', err.message, model);
      throw err;
    }
    const secrets = [{ name: 'gateway.provider.key', value: key }];
    // A stream reports its usage only when asked; the run's budget and cost need it.
    const stream = body.stream === true;
    let sent = raw;
    if (stream && pathname === '/v1/chat/completions' && (body.stream_options as { include_usage?: unknown } | undefined)?.include_usage !== true) {
      sent = Buffer.from(JSON.stringify({ ...body, stream_options: { ...(body.stream_options as object | undefined), include_usage: true } }));
    }
    const exchange = newId('gwx');
    this.o.ledger.entry(account.runId, GATEWAY_ENTRY.request, () => ({ at, exchange, path: pathname, model, stream, bytes: raw.length, ...recorded(raw.toString('utf8'), secrets) }));
    this.forward(req, res, { path, sent, key, secrets, exchange, model, runId: account.runId, at, pathname });
  }

  private forward(
    req: IncomingMessage,
    res: ServerResponse,
    x: { path: string; sent: Buffer; key: string; secrets: Array<{ name: string; value: string }>; exchange: string; model: string; runId: string | null; at: number; pathname: string },
  ): void {
    const headers: Record<string, string> = { authorization: `Bearer ${x.key}`, 'content-length': String(x.sent.length) };
    for (const h of PASSED) {
      const v = req.headers[h];
      if (typeof v === 'string') headers[h] = v;
    }
    const url = `${this.base.pathname}${x.path.slice('/v1'.length)}`;
    const send = this.base.protocol === 'https:' ? httpsRequest : httpRequest;
    const chunks: Buffer[] = [];
    let kept = 0;
    let total = 0;
    const finish = (status: number, contentType: string | undefined, error?: string) => {
      const text = Buffer.concat(chunks).toString('utf8');
      const { usage, model: reported } = usageOf(text, contentType);
      const model = reported ?? x.model;
      const end = this.now();
      const durationMs = end - x.at;
      this.o.ledger.spend(x.runId, model, status < 400 ? usage : undefined);
      this.o.ledger.entry(x.runId, GATEWAY_ENTRY.response, () => ({
        at: end,
        exchange: x.exchange,
        path: x.pathname,
        model,
        status,
        usage: usage ?? null,
        durationMs,
        bytes: total,
        ...(error ? { error: scrub(error, x.secrets) } : {}),
        ...recorded(text, x.secrets),
      }));
      this.o.log.info({ event: 'gateway', path: x.pathname, model, status, durationMs, promptTokens: usage?.prompt, completionTokens: usage?.completion }, 'model gateway answer');
    };
    const up = send({ host: this.base.hostname, port: this.base.port || (this.base.protocol === 'https:' ? 443 : 80), method: 'POST', path: url, headers, agent: this.agent }, (ur) => {
      const out: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(ur.headers)) if (v !== undefined && !DROPPED.has(k)) out[k] = v;
      res.writeHead(ur.statusCode ?? 502, out);
      ur.on('data', (d: Buffer) => {
        total += d.length;
        if (kept < READ_ANSWER_BYTES) {
          chunks.push(d);
          kept += d.length;
        }
        res.write(d);
      });
      ur.on('end', () => {
        res.end();
        finish(ur.statusCode ?? 502, ur.headers['content-type']);
      });
      ur.on('error', (err) => {
        res.destroy();
        finish(ur.statusCode ?? 502, ur.headers['content-type'], `answer cut: ${err.message}`);
      });
    });
    up.on('error', (err) => {
      if (res.headersSent) return;
      const message = `the model provider ${this.base.origin} is unreachable: ${scrub(err.message, x.secrets)}`;
      finish(502, undefined, message);
      sendError(res, 'gateway_provider_unreachable', message);
    });
    // The sandbox's client gave up: so does the provider request, and the answer's tokens are what was reported.
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
    });
    up.end(x.sent);
  }

  private models(res: ServerResponse): void {
    const data = [...this.allowed].map((id) => ({ id, object: 'model', created: 0, owned_by: 'berth-gateway' }));
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data }));
  }
}

/** The part of a body the record keeps, scrubbed of the key in case a provider echoes it. */
function recorded(text: string, secrets: Array<{ name: string; value: string }>): { body: string; truncated?: true } {
  const body = scrub(text.length > RECORDED_BODY_CHARS ? text.slice(0, RECORDED_BODY_CHARS) : text, secrets);
  return text.length > RECORDED_BODY_CHARS ? { body, truncated: true } : { body };
}

function sendError(res: ServerResponse, code: GatewayRefusal, message: string): void {
  if (res.headersSent) return void res.end();
  res.writeHead(STATUS[code], { 'content-type': 'application/json' });
  res.end(JSON.stringify({ error: { message: `berth model gateway: ${message}`, type: 'berth_gateway', code, param: null } }));
}

/** The body, or undefined when it is longer than `limit` (the rest is drained, not kept). */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let n = 0;
    req.on('data', (c: Buffer) => {
      n += c.length;
      if (n <= limit) chunks.push(c);
    });
    req.on('end', () => resolve(n <= limit ? Buffer.concat(chunks) : undefined));
    req.on('error', reject);
  });
}
