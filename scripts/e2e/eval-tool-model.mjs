// Measures a tool model on OpenClaw's real requests, as recorded in an e2e run's store
// (.cache/openclaw-e2e/last-run/data/openclaw-rl.sqlite): every recorded request (main and side),
// re-rendered through the model's own template, plus the request after the read result (rebuilt
// from the recorded request for notes.txt). Expected: the read call exactly for the request that
// asks for notes.txt with tools offered, plain text for everything else. Greedy, like the e2e run.
//
//   node scripts/e2e/eval-tool-model.mjs MODEL_DIR STORE.sqlite [--samples N]   # N > 0: also sample at T=1

import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { CALL_BODY, NOTES_CONTENT, TOOL_MARKER, TOOL_REQUEST } from './tool-model.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const dist = (p) => pathToFileURL(join(ROOT, 'dist/src', p)).href;
const [modelDir, storePath, flag, nArg] = process.argv.slice(2);
if (!modelDir || !storePath) {
  console.error('usage: node scripts/e2e/eval-tool-model.mjs MODEL_DIR STORE.sqlite [--samples N]');
  process.exit(2);
}
const N = flag === '--samples' ? Number(nArg) : 0;
const { LocalEngine } = await import(dist('engine/local/engine.js'));
const { TextTokenizer } = await import(dist('chat/tokenizer/tokenizer.js'));
const { ChatTemplate } = await import(dist('chat/tokenizer/chat-template.js'));
const { renderPrompt } = await import(dist('chat/prompt.js'));
const Database = createRequire(import.meta.url)('better-sqlite3');
const db = new Database(storePath, { readonly: true });
const rows = db
  .prepare('SELECT t.*, p.* FROM turns t JOIN turn_payloads p ON p.turn_id = t.id ORDER BY t.received_at')
  .all();
const text = (c) => (typeof c === 'string' ? c : Array.isArray(c) ? c.map((p) => p?.text ?? '').join('') : '');
const tokenizer = await TextTokenizer.fromModelDir(modelDir);
const template = await ChatTemplate.fromModelDir(modelDir);
const engine = await LocalEngine.open(modelDir, { threads: 1 });
const callText = `<tool_call>${CALL_BODY}</tool_call>`;

const asks = (messages) =>
  messages.at(-1)?.role === 'user' && text(messages.at(-1).content).split(TOOL_MARKER).length > 10;
const cases = [];
for (const r of rows) {
  // A run recorded with an older request or file text: asked the way the e2e run asks now.
  const messages = JSON.parse(r.messages).map((m) =>
    m.role === 'user' && typeof m.content === 'string' && m.content.split(TOOL_MARKER).length > 10
      ? { ...m, content: m.content.replace(/Please read notes\.txt[\s\S]*?(?=\n\nRuntime:|$)/, TOOL_REQUEST) }
      : m.role === 'tool' && text(m.content).includes('PINEAPPLE')
        ? { ...m, content: NOTES_CONTENT }
        : m,
  );
  const tools = r.tools ? JSON.parse(r.tools) : undefined;
  const label = `${r.kind} ${r.session_id?.slice(0, 12) ?? '-'} ${JSON.stringify(text(messages.at(-1)?.content).slice(0, 40))}`;
  cases.push({ label, messages, tools, want: tools && asks(messages) ? 'call' : 'text' });
  if (r.kind === 'main' && tools && asks(messages)) {
    const call = {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: 'callabc123', type: 'function', function: { name: 'read', arguments: '{"path":"notes.txt"}' } },
      ],
    };
    cases.push({
      label: 'main (after the read result)',
      messages: [...messages, call, { role: 'tool', tool_call_id: 'callabc123', content: NOTES_CONTENT }],
      tools,
      want: 'text',
    });
  }
}
let failures = 0;
for (const c of cases) {
  const ids = renderPrompt(template, tokenizer, c.messages, { tools: c.tools, addGenerationPrompt: true }).ids;
  const results = [];
  for (const [mode, n] of [
    [{ temperature: 0 }, 1],
    [{ temperature: 1 }, N],
  ]) {
    let good = 0;
    let bad = null;
    for (let i = 0; i < n; i++) {
      const out = [];
      for await (const e of engine.generate(ids, { ...mode, maxTokens: 24, seed: 1000 + i }))
        if (e.type === 'token') out.push(e.token.id);
      const reply = tokenizer.decode(out, { skipSpecialTokens: true });
      const ok = c.want === 'call' ? reply.trim() === callText.trim() : !reply.includes('<tool_call>');
      if (ok) good++;
      else bad ??= reply;
    }
    if (n > 0)
      results.push(`T=${mode.temperature} ${good}/${n}${bad !== null ? ` (${JSON.stringify(bad.slice(0, 50))})` : ''}`);
    if (mode.temperature === 0 && good < n) failures++;
  }
  console.log(`${c.want.padEnd(4)} ${String(ids.length).padStart(5)} tok  ${c.label.padEnd(62)} ${results.join('  ')}`);
}
console.log(`${cases.length - failures}/${cases.length} requests answered as expected (greedy)`);
await engine.close?.();
process.exit(failures === 0 ? 0 : 1);
