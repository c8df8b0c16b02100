// The sandbox side of the model gateway tests: the real `openai` client, bundled with esbuild into
// one file and run by the berth/dev image's node. It reads OPENAI_BASE_URL and OPENAI_API_KEY from
// the sandbox's environment, as any OpenAI-compatible tool does.
import OpenAI from 'openai';

const client = new OpenAI({ maxRetries: 0 });
const model = 'scripted-small';
const messages = [{ role: 'user', content: 'say hello' }];

async function attempt(m) {
  try {
    const r = await client.chat.completions.create({ model: m, messages });
    return { ok: true, text: r.choices[0].message.content, usage: r.usage };
  } catch (err) {
    return { ok: false, name: err.constructor.name, status: err.status, code: err.code, type: err.type, message: err.message };
  }
}

if (process.argv[2] === 'complete') {
  const plain = await client.chat.completions.create({ model, messages });
  const stream = await client.chat.completions.create({ model, messages, stream: true });
  let streamed = '';
  for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? '';
  const listed = await client.models.list();
  console.log(JSON.stringify({ text: plain.choices[0].message.content, usage: plain.usage, streamed, models: listed.data.map((d) => d.id) }));
} else {
  // One answer spends the run's small budget; then a refused one, and a model the gateway does not allow.
  console.log(JSON.stringify([await attempt(model), await attempt(model), await attempt('not-allowed-model')]));
}
