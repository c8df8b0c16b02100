import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { isBerthError } from '../errors';
import type { SandboxGatewaySpec } from '../sandbox';
import { scrub, type SecretSource } from '../secrets';
import { newId } from '../support';
import { nodeReply, readNodeRequest, type GatewayReply, type GatewayRequest, type ProxiedGateway } from './exchange';
import { GATEWAY_ENTRY, type GatewayLedger } from './ledger';
import { KeptConnections } from './kept-connections';
import { KeyMask } from './key-mask';
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
/** Answer headers not passed back: hop-by-hop, and the provider's cookies (the length stays: the bytes pass unchanged but for the key, masked in place). */
const DROPPED = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'set-cookie']);
/** What may go into a header line or a request target: no control characters, so nothing can start another line. */
const HEADER_SAFE = /^[\t\x20-\x7e]*$/;
const TARGET_SAFE = /^[\x21-\x7e]+$/;

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
export class ModelGateway implements ProxiedGateway {
  private readonly base: URL;
  private readonly provider: KeptConnections;
  private readonly allowed: Set<string>;
  private readonly now: () => number;

  constructor(private readonly o: ModelGatewayOptions) {
    this.base = new URL(o.spec.providerBaseUrl.replace(/\/+$/, ''));
    // Kept-alive connections: the provider's TLS and TCP setup is paid once, not per completion.
    this.provider = KeptConnections.of(this.base);
    this.allowed = new Set(o.spec.models);
    this.now = o.now ?? Date.now;
  }

  close(): void {
    this.provider.close();
  }

  /** Serves one request Node's server read; `path` is its path and query (`/v1/chat/completions`). */
  handle(req: IncomingMessage, res: ServerResponse, path: string): void {
    const reply = nodeReply(res);
    void readNodeRequest(req, path, MAX_REQUEST_BYTES).then(
      (r) => this.serve(r, reply),
      () => res.destroy(),
    );
  }

  /** Serves one request from the sandbox. */
  serve(request: GatewayRequest, reply: GatewayReply): void {
    void this.check(request, reply).catch((err: unknown) => {
      this.o.log.error({ err }, 'model gateway request failed');
      if (!reply.headSent) reply.head(500, [['content-type', 'application/json']], 0);
      reply.end();
    });
  }

  private async check(req: GatewayRequest, reply: GatewayReply): Promise<void> {
    const at = this.now();
    const path = req.path;
    const q = path.indexOf('?');
    const pathname = q < 0 ? path : path.slice(0, q);
    if (req.method === 'GET' && pathname === '/v1/models') return void this.models(reply);
    const raw = req.body;
    const account = await this.o.ledger.account();
    const refuse = (code: GatewayRefusal, message: string, model: string | null) => {
      this.o.ledger.entry(account.runId, GATEWAY_ENTRY.refused, { at, path: pathname, model, code, message });
      this.o.log.warn({ event: 'gateway', path: pathname, model, code }, message);
      sendError(reply, code, message);
    };
    // Only plain API paths: no dot segments or encodings that could reach another part of the provider with its key.
    if (req.method !== 'POST' || !API_PATH.test(pathname) || pathname.split('/').includes('..') || !TARGET_SAFE.test(path)) return refuse('gateway_unsupported', `the model gateway serves POST /v1/... and GET /v1/models, not ${req.method} ${pathname}`, null);
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
    if (!HEADER_SAFE.test(key)) return refuse('gateway_key_unavailable', 'the provider key (gateway.provider.key) holds characters a header cannot carry', model);
    const secrets = [{ name: 'gateway.provider.key', value: key }];
    // A stream reports its usage only when asked; the run's budget and cost need it.
    const stream = body.stream === true;
    let sent = raw;
    if (stream && pathname === '/v1/chat/completions' && (body.stream_options as { include_usage?: unknown } | undefined)?.include_usage !== true) {
      sent = Buffer.from(JSON.stringify({ ...body, stream_options: { ...(body.stream_options as object | undefined), include_usage: true } }));
    } else if (mayReadTwoWays(raw)) {
      // What the provider reads must be what was checked: a second "model" key (or one spelt with
      // escapes) may be read first by the provider's parser and last by ours.
      sent = Buffer.from(JSON.stringify(body));
    }
    // The id ties the request's entry to its answer's; made when the entries are written, off the request's path.
    let id: string | undefined;
    const exchange = () => (id ??= newId('gwx'));
    this.o.ledger.entry(account.runId, GATEWAY_ENTRY.request, () => ({ at, exchange: exchange(), path: pathname, model, stream, bytes: raw.length, ...recorded(raw.toString('utf8'), secrets) }));
    this.forward(req, reply, { path, sent, key, secrets, exchange, model, runId: account.runId, at, pathname });
  }

  private forward(
    req: GatewayRequest,
    reply: GatewayReply,
    x: { path: string; sent: Buffer; key: string; secrets: Array<{ name: string; value: string }>; exchange: () => string; model: string; runId: string | null; at: number; pathname: string },
  ): void {
    let head = `POST ${this.base.pathname}${x.path.slice('/v1'.length)} HTTP/1.1\r\nhost: ${this.provider.authority}\r\nauthorization: Bearer ${x.key}\r\ncontent-length: ${x.sent.length}\r\n`;
    for (const h of PASSED) {
      const v = req.header(h);
      if (v !== undefined && HEADER_SAFE.test(v)) head += `${h}: ${v}\r\n`;
    }
    head += '\r\n';
    const chunks: Buffer[] = [];
    let kept = 0;
    let total = 0;
    let status = 502;
    let contentType: string | undefined;
    const mask = new KeyMask(x.key);
    const pass = (d: Buffer) => {
      if (d.length > 0) reply.write(d);
    };
    const finish = (error?: string) => {
      const text = Buffer.concat(chunks).toString('utf8');
      const { usage, model: reported } = usageOf(text, contentType);
      const model = reported ?? x.model;
      const end = this.now();
      const durationMs = end - x.at;
      const estimatedTokens = status < 400 && !usage ? estimateTokens(x.sent.length, total) : undefined;
      this.o.ledger.spend(x.runId, model, status < 400 ? usage : undefined, estimatedTokens);
      this.o.ledger.entry(x.runId, GATEWAY_ENTRY.response, () => ({
        at: end,
        exchange: x.exchange(),
        path: x.pathname,
        model,
        status,
        usage: usage ?? null,
        ...(estimatedTokens === undefined ? {} : { estimatedTokens }),
        durationMs,
        bytes: total,
        ...(error ? { error: scrub(error, x.secrets) } : {}),
        ...recorded(text, x.secrets),
      }));
      this.o.log.info({ event: 'gateway', path: x.pathname, model, status, durationMs, promptTokens: usage?.prompt, completionTokens: usage?.completion }, 'model gateway answer');
    };
    const up = this.provider.send(head, x.sent, {
      head: (h) => {
        status = h.status;
        const out: Array<[string, string]> = [];
        for (const kv of h.headers) {
          if (DROPPED.has(kv[0])) continue;
          if (kv[0] === 'content-type') contentType = kv[1];
          out.push([kv[0], mask.maskText(kv[1])]);
        }
        reply.head(h.status, out, h.length);
      },
      data: (d) => {
        total += d.length;
        if (kept < READ_ANSWER_BYTES) {
          chunks.push(d);
          kept += d.length;
        }
        pass(mask.push(d));
      },
      end: () => {
        pass(mask.end());
        reply.end();
        // The bookkeeping (usage parse, spend, entry, log line) waits for the next tick: the reply's
        // writes of this turn leave first (the proxy uncorks them on a tick queued before this one),
        // so the sandbox's client reads its answer while the host records it. Still before any I/O,
        // so the budget counts these tokens before the sandbox's next request can be read.
        process.nextTick(() => {
          try {
            finish();
          } catch (err) {
            this.o.log.error({ err }, 'model gateway could not record an answer');
          }
        });
      },
      fail: (err, answered) => {
        if (answered) {
          reply.destroy();
          finish(`answer cut: ${err.message}`);
          return;
        }
        const message = `the model provider ${this.base.origin} is unreachable: ${scrub(err.message, x.secrets)}`;
        finish(message);
        sendError(reply, 'gateway_provider_unreachable', message);
      },
    });
    // The sandbox's client gave up: so does the provider request, and the answer's tokens are what was reported.
    reply.onAbort(() => up.abort());
  }

  private models(reply: GatewayReply): void {
    const data = [...this.allowed].map((id) => ({ id, object: 'model', created: 0, owned_by: 'berth-gateway' }));
    const body = Buffer.from(JSON.stringify({ object: 'list', data }));
    reply.head(200, [['content-type', 'application/json']], body.length);
    reply.write(body);
    reply.end();
  }
}

/**
 * What an answer that reported no usage counts against the budget: a stream its client stopped
 * reading (or its provider cut) before the last event, or a provider that never reports usage.
 * Counted as nothing, a sandbox that hung up before each stream's end spent without limit. Four
 * bytes a token of the request and of the answer as far as it came: more than the provider counts
 * (JSON and SSE framing are bytes too), which is the side a limit should err on.
 */
const estimateTokens = (requestBytes: number, answerBytes: number) => Math.ceil(requestBytes / 4) + Math.ceil(answerBytes / 4);

/**
 * True when a request body might name its model twice or in a spelling a byte search cannot see
 * (a `\u` escape): such a body is sent as the gateway parsed it, not as the sandbox wrote it.
 */
function mayReadTwoWays(raw: Buffer): boolean {
  const first = raw.indexOf('"model"');
  return raw.indexOf('\\u') >= 0 || first < 0 || raw.indexOf('"model"', first + 1) >= 0;
}

/** The part of a body the record keeps, scrubbed of the key in case a provider echoes it. */
function recorded(text: string, secrets: Array<{ name: string; value: string }>): { body: string; truncated?: true } {
  const body = scrub(text.length > RECORDED_BODY_CHARS ? text.slice(0, RECORDED_BODY_CHARS) : text, secrets);
  return text.length > RECORDED_BODY_CHARS ? { body, truncated: true } : { body };
}

function sendError(reply: GatewayReply, code: GatewayRefusal, message: string): void {
  if (reply.headSent) return void reply.end();
  const body = Buffer.from(JSON.stringify({ error: { message: `berth model gateway: ${message}`, type: 'berth_gateway', code, param: null } }));
  reply.head(STATUS[code], [['content-type', 'application/json']], body.length);
  reply.write(body);
  reply.end();
}
