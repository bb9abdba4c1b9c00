// Runs the official OpenAI JavaScript client (npm package openai) through
// every call test/openaiclients makes with openai-go, against the gateway at
// argv[2] (its /v1 base URL), and prints one JSON object: each case's
// outcome, in the same shape the Go test builds from openai-go's answers.
//
//   node client.mjs http://127.0.0.1:PORT/v1 DIR
//
// DIR holds node_modules/openai (hack/openai-js.sh installs it there).
import { createRequire } from 'node:module';
import { join } from 'node:path';

const [baseURL, dir] = process.argv.slice(2);
const openai = createRequire(join(dir, 'package.json'))('openai');
const OpenAI = openai.OpenAI ?? openai.default ?? openai;
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });

// outcome is what a case observed: an error's HTTP status and code, or the
// value and token count the case reads from a success.
function failure(err) {
  if (err instanceof OpenAI.APIError) {
    return { status: err.status ?? 0, code: err.code == null ? '' : String(err.code), value: '', tokens: 0 };
  }
  return { status: -1, code: '', value: String(err), tokens: 0 };
}

const chat = [{ role: 'user', content: 'Hello there' }];
const cases = {
  async 'models.list'() {
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    return { value: ids.sort().join(','), tokens: 0 };
  },
  async 'models.retrieve'() {
    const m = await client.models.retrieve('llama');
    return { value: `${m.id} ${m.object} ${m.owned_by}`, tokens: 0 };
  },
  async 'models.retrieve unknown'() {
    await client.models.retrieve('gpt-9');
  },
  async 'chat'() {
    const r = await client.chat.completions.create({ model: 'llama', messages: chat, max_tokens: 8 });
    return { value: r.choices[0].message.content, tokens: r.usage.completion_tokens };
  },
  async 'chat stream with usage'() {
    const stream = await client.chat.completions.create({
      model: 'llama', messages: chat, max_tokens: 8, stream: true, stream_options: { include_usage: true },
    });
    let text = '', tokens = 0;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      if (chunk.usage) tokens = chunk.usage.completion_tokens;
    }
    return { value: text, tokens };
  },
  async 'completions'() {
    const r = await client.completions.create({ model: 'llama', prompt: 'Once upon a time', max_tokens: 5 });
    return { value: r.choices[0].text, tokens: r.usage.completion_tokens };
  },
  async 'responses'() {
    const r = await client.responses.create({ model: 'llama', input: 'Hello there', max_output_tokens: 6 });
    return { value: r.output_text, tokens: r.usage.output_tokens };
  },
  async 'responses stream'() {
    const stream = await client.responses.create({ model: 'llama', input: 'Hello there', max_output_tokens: 6, stream: true });
    let text = '', tokens = 0;
    for await (const ev of stream) {
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      if (ev.type === 'response.completed' || ev.type === 'response.incomplete') tokens = ev.response.usage.output_tokens;
    }
    return { value: text, tokens };
  },
  async 'embeddings'() {
    // The client asks for base64 and decodes it, unless told float.
    const b64 = await client.embeddings.create({ model: 'e5', input: ['query: hello', 'query: world'] });
    const flt = await client.embeddings.create({ model: 'e5', input: 'query: hello', encoding_format: 'float' });
    const same = b64.data[0].embedding.every((x, i) => Math.abs(x - flt.data[0].embedding[i]) < 1e-6);
    return { value: `${b64.data.length}x${b64.data[0].embedding.length} same=${same}`, tokens: b64.usage.prompt_tokens > 0 ? 1 : 0 };
  },
  async 'abort mid-stream'() {
    const stream = await client.chat.completions.create({ model: 'llama', messages: chat, max_tokens: 2000, stream: true });
    let chunks = 0;
    const aborted = () => ({ value: 'aborted', tokens: chunks >= 3 ? 1 : 0 });
    try {
      for await (const chunk of stream) {
        if (++chunks === 3) stream.controller.abort();
      }
    } catch (err) {
      if (err instanceof OpenAI.APIUserAbortError || err?.name === 'AbortError') return aborted();
      throw err;
    }
    // The client ends the iteration quietly on its own abort; it must not
    // have read the 2000 tokens to the end.
    if (stream.controller.signal.aborted && chunks < 100) return aborted();
    return { value: `not aborted after ${chunks} chunks`, tokens: 0 };
  },
  async 'unknown model'() {
    await client.chat.completions.create({ model: 'gpt-9', messages: chat });
  },
  async 'bad body'() {
    await client.chat.completions.create({ model: 'llama', messages: 'hello' });
  },
  async 'missing model'() {
    await client.chat.completions.create({ messages: chat });
  },
  async 'wrong method'() {
    await client.get('/chat/completions');
  },
  async 'unknown path'() {
    await client.post('/nothing', { body: {} });
  },
};

const out = {};
for (const [name, run] of Object.entries(cases)) {
  try {
    const r = await run();
    out[name] = r ? { status: 0, code: '', ...r } : { status: 0, code: '', value: 'no error', tokens: 0 };
  } catch (err) {
    out[name] = failure(err);
  }
}
console.log(JSON.stringify(out));
