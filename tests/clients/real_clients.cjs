// real_clients.cjs -- the official OpenAI Node SDK and the official Ollama JS client,
// used as a new user would, against rsd-serve (real llama-server children) and against
// rsd-sim playing Ollama. Run by tests/test_real_clients.c:
//   node real_clients.cjs NODE_MODULES SERVE_URL OLLAMA_URL
// One line per check ("ok NAME: what happened" / "FAIL NAME: ..."); the exit status is
// the number of failures. Only loopback URLs are used; nothing is fetched elsewhere.
'use strict';
const path = require('path');
const [nm, serveUrl, ollamaUrl] = process.argv.slice(2);
const OpenAI = require(path.join(nm, 'openai'));
const { Ollama } = require(path.join(nm, 'ollama'));

let failures = 0;
function report(ok, name, what) {
  if (!ok) failures++;
  console.log(`${ok ? 'ok' : 'FAIL'} ${name}: ${what}`);
}
function errName(e) {
  return e ? `${e.constructor && e.constructor.name} status=${e.status ?? e.status_code} ` +
    `code=${e.code ?? (e.error && e.error.code)} message=${JSON.stringify(String(e.message)).slice(0, 160)}` : 'none';
}

async function openaiChecks() {
  const client = new OpenAI({ baseURL: serveUrl + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 60000 });
  // list
  let list = await client.models.list();
  let ids = list.data.map((m) => m.id);
  report(ids.includes('tiny-a') && ids.includes('tiny-b'), 'openai models.list', `ids ${ids.join(',')}`);
  // non-streamed chat (starts tiny-a)
  const r = await client.chat.completions.create({ model: 'tiny-a', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 });
  report(r.object === 'chat.completion' && r.choices.length === 1 && typeof r.choices[0].message.content === 'string',
    'openai chat', `object ${r.object}, finish ${r.choices[0].finish_reason}, ${r.usage && r.usage.completion_tokens} tokens`);
  // loaded: meta in the listing
  list = await client.models.list();
  const a = list.data.find((m) => m.id === 'tiny-a');
  report(a && a.meta && a.meta.n_ctx > 0 && typeof a.meta.ftype === 'string', 'openai models.list meta',
    `tiny-a meta ${JSON.stringify(a && a.meta)}`);
  // streamed chat
  let chunks = 0, text = '', finish = null;
  const stream = await client.chat.completions.create({ model: 'tiny-a', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8, stream: true });
  for await (const c of stream) {
    chunks++;
    if (c.choices[0] && c.choices[0].delta && c.choices[0].delta.content) text += c.choices[0].delta.content;
    if (c.choices[0] && c.choices[0].finish_reason) finish = c.choices[0].finish_reason;
  }
  report(chunks >= 2 && finish !== null, 'openai chat stream', `${chunks} chunks, finish ${finish}, ${text.length} chars`);
  // a child killed mid-stream: an API error, not a connection error
  let err = null, got = 0;
  try {
    const s2 = await client.chat.completions.create({ model: 'tiny-b', messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 1900, ignore_eos: true, stream: true });
    for await (const c of s2) {
      if (got++ === 0) {
        const st = await (await fetch(serveUrl + '/status')).json();
        const m = (st.models || []).find((x) => x.id === 'tiny-b');
        process.kill(m.pid, 'SIGKILL');
      }
      void c;
    }
  } catch (e) { err = e; }
  report(err instanceof OpenAI.APIError && !(err instanceof OpenAI.APIConnectionError), 'openai child killed mid-stream',
    `after ${got} chunks: ${errName(err)}`);
  // the other OpenAI APIs a child serves, through the front by the body's model
  const tc = await client.completions.create({ model: 'tiny-a', prompt: 'hello', max_tokens: 4 });
  report(tc.object === 'text_completion' && tc.choices.length === 1 && typeof tc.choices[0].text === 'string',
    'openai completions', `object ${tc.object}, finish ${tc.choices[0].finish_reason}`);
  const rs = await client.responses.create({ model: 'tiny-a', input: 'hi', max_output_tokens: 4 });
  report(rs.object === 'response' && typeof rs.output_text === 'string', 'openai responses',
    `object ${rs.object}, status ${rs.status}, ${rs.output_text.length} chars`);
  const em = await client.embeddings.create({ model: 'tiny-emb', input: ['a b', 'c'] }); // a swap: max_models 2
  report(em.data.length === 2 && em.data[0].embedding.length > 0 && em.data[1].index === 1, 'openai embeddings',
    `${em.data.length} vectors of ${em.data[0].embedding.length}, ${em.usage && em.usage.prompt_tokens} prompt tokens`);
  // unknown model: the same 404 on a completion and on models.retrieve
  let e1 = null, e2 = null;
  try { await client.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'hi' }] }); } catch (e) { e1 = e; }
  try { await client.models.retrieve('nope'); } catch (e) { e2 = e; }
  report(e1 instanceof OpenAI.NotFoundError && e1.code === 'model_not_found', 'openai unknown model (chat)', errName(e1));
  report(e2 instanceof OpenAI.NotFoundError && e2.code === 'model_not_found' && e1 && e2.message === e1.message,
    'openai unknown model (models.retrieve)', errName(e2));
}

async function ollamaChecks() {
  const ol = new Ollama({ host: ollamaUrl });
  const l = await ol.list();
  const names = l.models.map((m) => m.name);
  report(names.includes('llama3.2:latest'), 'ollama list', `models ${names.join(',')}`);
  const r = await ol.chat({ model: 'llama3.2', messages: [{ role: 'user', content: 'hi' }], keep_alive: -1 });
  report(r.done === true && typeof r.message.content === 'string' && r.eval_count > 0 && r.total_duration > 0 &&
    r.load_duration > 0 && r.prompt_eval_duration > 0 && r.eval_duration > 0, 'ollama chat',
  `done_reason ${r.done_reason}, eval_count ${r.eval_count}, total_duration ${r.total_duration}, load_duration ${r.load_duration}`);
  let parts = 0, last = null;
  for await (const p of await ol.chat({ model: 'llama3.2', messages: [{ role: 'user', content: 'hi' }], stream: true })) {
    parts++;
    last = p;
  }
  report(parts >= 2 && last.done && last.eval_count > 0, 'ollama chat stream', `${parts} parts, last done ${last && last.done}, eval_count ${last && last.eval_count}`);
  const g = await ol.generate({ model: 'llama3.2', prompt: 'hi' });
  report(Array.isArray(g.context) && g.context.length > 0 && g.total_duration > 0, 'ollama generate',
    `context ${g.context && g.context.length} tokens, total_duration ${g.total_duration}`);
  const ps = await ol.ps();
  const run = ps.models.find((m) => m.name === 'llama3.2:latest');
  const years = run ? (new Date(run.expires_at).getTime() - Date.now()) / 3.15e10 : 0;
  report(run && years > 100, 'ollama keep_alive -1 kept by later requests without it', `expires_at ${run && run.expires_at}`);
  const sh = await ol.show({ model: 'llama3.2' });
  report(sh.modified_at && !isNaN(new Date(sh.modified_at).getTime()), 'ollama show', `modified_at ${sh.modified_at}`);
  const em = await ol.embed({ model: 'llama3.2', input: ['a', 'b'] });
  report(em.embeddings && em.embeddings.length === 2 && em.embeddings[0].length > 0, 'ollama embed',
    `${em.embeddings && em.embeddings.length} vectors of ${em.embeddings && em.embeddings[0].length}`);
  let e = null;
  try { await ol.chat({ model: 'nope', messages: [{ role: 'user', content: 'hi' }] }); } catch (x) { e = x; }
  report(e && e.name === 'ResponseError' && e.status_code === 404, 'ollama unknown model', errName(e));
}

(async () => {
  for (const [name, fn] of [['openai', openaiChecks], ['ollama', ollamaChecks]]) {
    try { await fn(); } catch (e) { report(false, name, `unexpected ${errName(e)} ${e && e.stack ? e.stack.split('\n')[1] : ''}`); }
  }
  process.exit(failures);
})();
