// A built-in training corpus for `model init`: deterministic English prose, code, JSON, a little
// non-English text and emoji, and chat transcripts rendered with our own template (system prompts,
// tool signatures, tool calls and results, reasoning), i.e. the kind of text an agent policy sees.
// All text here is written for this project. Same options, same corpus, same tokenizer.

import type { ChatMessage, ToolSpec } from '../messages.js';
import { ChatTemplate, OPENCLAW_CHAT_TEMPLATE } from '../tokenizer/chat-template.js';

export interface CorpusOptions {
  /** Approximate size of the generated part in characters. Default 200,000. */
  targetChars?: number;
  /** More documents to train on, appended after the generated ones. */
  extraText?: readonly string[];
}

/** Returns the corpus as documents (each one string). */
export function builtinCorpus(opts: CorpusOptions = {}): string[] {
  const target = opts.targetChars ?? 200_000;
  const random = seededRandom(0x0c1a);
  const template = ChatTemplate.fromString(OPENCLAW_CHAT_TEMPLATE, 'built-in template');
  const makers = [prose, prose, code, code, json, multilingual, () => chat(random, template)];
  const documents: string[] = [];
  let size = 0;
  for (let n = 0; size < target; n++) {
    const document = makers[n % makers.length]!(random);
    documents.push(document);
    size += document.length;
  }
  return [...documents, ...(opts.extraText ?? [])];
}

type Random = () => number;

/** mulberry32: a tiny 32-bit PRNG, so the corpus does not depend on Math.random. */
export function seededRandom(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

function pick<T>(random: Random, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)]!;
}

function words(text: string): string[] {
  return text.trim().split(/\s+/);
}

const NOUNS = words(`agent user server model gateway scheduler session team reviewer suite request tokenizer
  learner script watcher file config transcript message result patch branch weight log reply cache prompt summary
  report schema queue worker thread process memory disk network socket header body field column table row record
  index key value list array object string number date time minute hour day week month year plan task goal step
  issue bug fix change commit release version build test benchmark metric score reward policy trainer batch epoch
  sample token sequence context window limit budget price cost account owner project folder path directory package
  module function method class interface type variable parameter argument option flag setting default error warning
  exception timeout retry failure success answer question idea note draft document page section chapter paragraph
  sentence word letter character symbol image picture video sound voice camera phone screen keyboard mouse printer
  city country street house room kitchen garden window door table chair coffee water bread apple market store
  customer friend colleague manager student teacher doctor driver writer reader player`);
const VERBS = words(`reads writes checks updates records compares replays streams summarizes loads saves sends parses
  rejects accepts retries measures trains schedules formats describes opens closes starts stops builds deploys
  installs removes deletes creates renames moves copies merges splits joins sorts filters searches finds counts
  adds subtracts multiplies divides rounds converts encodes decodes compresses uploads downloads imports exports
  prints shows hides explains answers asks needs wants likes prefers expects returns yields throws catches logs
  tracks watches reviews approves tests verifies validates publishes reports improves fixes breaks ignores`);
const ADJECTIVES = words(`new old small large quick slow careful simple complex empty full recent stale local remote
  public private final partial valid invalid broken stable noisy quiet early late short long next previous
  current main daily weekly shared hidden visible useful strange clear`);
const ADVERBS = words(`quickly slowly carefully quietly often rarely already again twice automatically manually
  safely correctly immediately eventually`);
const PREPOSITIONS = words(`in on at from into with without for after before during under over between`);
const CLAUSES = [
  'before the next turn starts',
  'when the context grows too long',
  'after every tool call',
  'because the previous attempt timed out',
  'so that nothing is lost',
  'while the user is waiting',
  'if the answer looks wrong',
  'as soon as the stream ends',
  'without touching the other files',
  'in less than a second',
  'unless someone objects',
  'even though it takes a while',
];
const OPENERS = words(`Then First Next Finally Usually Sometimes Meanwhile Afterwards However Still Today Yesterday`);

function nounPhrase(random: Random): string {
  const adjective = random() < 0.4 ? `${pick(random, ADJECTIVES)} ` : '';
  const noun = pick(random, NOUNS);
  if (random() < 0.2) return `${pick(random, ['the', 'our', 'their', 'all'])} ${adjective}${noun}s`;
  return `${pick(random, ['the', 'the', 'every', 'this', 'our', 'their', 'each'])} ${adjective}${noun}`;
}

function sentence(random: Random): string {
  let text = `${nounPhrase(random)} ${random() < 0.2 ? `${pick(random, ADVERBS)} ` : ''}${pick(random, VERBS)} ${nounPhrase(random)}`;
  if (random() < 0.5) text += ` ${pick(random, PREPOSITIONS)} ${nounPhrase(random)}`;
  if (random() < 0.3) text += ` ${pick(random, CLAUSES)}`;
  if (random() < 0.25) text = `${pick(random, OPENERS)}, ${text}`;
  const end = random() < 0.1 ? '?' : random() < 0.1 ? '!' : '.';
  return text[0]!.toUpperCase() + text.slice(1) + end;
}

function prose(random: Random): string {
  const paragraphs: string[] = [];
  for (let p = 1 + Math.floor(random() * 3); p > 0; p--) {
    const count = 2 + Math.floor(random() * 5);
    paragraphs.push(Array.from({ length: count }, () => sentence(random)).join(' '));
  }
  if (random() < 0.3)
    paragraphs.unshift(`## ${pick(random, ['Notes', 'Summary', 'Decisions', 'Next steps', 'Status'])}`);
  if (random() < 0.3) paragraphs.push(Array.from({ length: 3 }, () => `- ${sentence(random)}`).join('\n'));
  return paragraphs.join('\n\n');
}

const NAMES = words(`count total items result message session request buffer offset index value path text
  limit retries timeout token reply config entry record user options state cursor chunk line lines size width
  height name label status code payload headers params query cache queue worker handle stream reader writer`);
const ACTIONS = words(`load parse count read write send retry format split merge find render build fetch update
  remove create check validate encode decode resolve apply collect`);

/** Identifiers like loadSession or countLines, for variety in the code samples. */
function identifier(random: Random): string {
  return pick(random, ACTIONS) + capitalize(pick(random, NAMES));
}

function code(random: Random): string {
  const fn = identifier(random);
  const a = pick(random, NAMES);
  const b = pick(random, NAMES);
  const n = Math.floor(random() * 1000);
  const snippets = [
    `export function ${fn}(${a}: string, ${b}: number): string[] {\n  const out: string[] = [];\n  for (let i = 0; i < ${b}; i++) {\n    if (${a}.length > ${n}) {\n      out.push(${a}.slice(0, ${n}));\n    }\n  }\n  return out;\n}\n`,
    `async function ${fn}(${a}) {\n  const response = await fetch(\`/api/\${${a}}\`, { method: 'POST' });\n  if (!response.ok) throw new Error(\`request failed: \${response.status}\`);\n  return response.json();\n}\n`,
    `def ${snake(fn)}(${snake(a)}, ${snake(b)}=${n}):\n    """Return the first ${snake(b)} entries."""\n    result = []\n    for item in ${snake(a)}:\n        if len(result) >= ${snake(b)}:\n            break\n        result.append(item)\n    return result\n`,
    `$ ls -la ./workspace\n$ grep -rn "${a}" src/ | head -n ${n % 20}\n$ git diff --stat\n$ npm test -- --grep ${fn}\n`,
    `interface ${capitalize(a)} {\n  id: string;\n  ${b}: number;\n  createdAt?: Date;\n}\n\nconst ${a}s = new Map<string, ${capitalize(a)}>();\n`,
    `if (${a} === undefined || ${a} === null) {\n  return { ok: false, error: '${a} is missing' };\n} else if (${b} >= ${n}) {\n  console.log(\`${b}=\${${b}}\`);\n}\n`,
  ];
  return pick(random, snippets);
}

function snake(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

function capitalize(name: string): string {
  return name[0]!.toUpperCase() + name.slice(1);
}

function jsonValue(random: Random, depth: number): unknown {
  const roll = random();
  if (depth > 2 || roll < 0.3) return pick(random, NAMES) + (random() < 0.5 ? '' : `-${Math.floor(random() * 100)}`);
  if (roll < 0.45) return Math.floor(random() * 10_000) / (random() < 0.5 ? 1 : 100);
  if (roll < 0.55) return random() < 0.5;
  if (roll < 0.6) return null;
  if (roll < 0.75) return Array.from({ length: 1 + Math.floor(random() * 3) }, () => jsonValue(random, depth + 1));
  const entries = Array.from({ length: 1 + Math.floor(random() * 4) }, () => [
    pick(random, NAMES),
    jsonValue(random, depth + 1),
  ]);
  return Object.fromEntries(entries);
}

/** Python-style separators (", " and ": ") as chat templates' tojson writes them, as well as compact and indented JSON. */
function json(random: Random): string {
  const value = { [pick(random, NAMES)]: jsonValue(random, 0), [pick(random, NAMES)]: jsonValue(random, 1) };
  const style = random();
  if (style < 0.4) return JSON.stringify(value, null, 2);
  if (style < 0.7) return JSON.stringify(value);
  return JSON.stringify(value).replace(
    /("(?:[^"\\]|\\.)*")|([,:])/g,
    (_, quoted: string | undefined, sep: string) => quoted ?? `${sep} `,
  );
}

const FOREIGN = [
  'Guten Morgen! Die Datei wurde gespeichert, und die Prüfung läuft schon.',
  'Bonjour, la réponse est prête. Voulez-vous que je continue ?',
  'Hola, el servidor está listo y la sesión sigue abierta.',
  '你好，文件已经保存。下一步我们检查日志。',
  'こんにちは。ファイルを保存しました。次はテストを実行します。',
  'Привет! Файл сохранён, тесты проходят.',
  'Größe: 12 kB, Übersicht fertig, naïve café déjà vu, Zürich → München.',
  'Done ✅ Tests pass 🎉 Next: deploy 🚀 (ETA ≈ 5 min) — thanks 👍',
  'Temperature: 21 °C ± 0.5, price: 9,99 €, ratio ≤ 1/2, π ≈ 3.14159',
];

function multilingual(random: Random): string {
  return Array.from({ length: 3 }, () => pick(random, FOREIGN)).join('\n');
}

const TOOLS: ToolSpec[] = [
  {
    type: 'function',
    function: {
      name: 'read',
      description: 'Read a text file from the workspace.',
      parameters: {
        type: 'object',
        properties: { path: { type: 'string', description: 'File path.' } },
        required: ['path'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'exec',
      description: 'Run a shell command and return its output.',
      parameters: {
        type: 'object',
        properties: { command: { type: 'string' }, timeout: { type: 'number', description: 'Seconds.' } },
        required: ['command'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'write',
      description: 'Write text to a file, replacing it.',
      parameters: {
        type: 'object',
        properties: { path: { type: 'string' }, content: { type: 'string' } },
        required: ['path', 'content'],
      },
    },
  },
];

/** One agent exchange: a user request, maybe reasoning and tool calls with results, then an answer. */
function chat(random: Random, template: ChatTemplate): string {
  const messages: ChatMessage[] = [{ role: 'system', content: `You are a helpful assistant. ${sentence(random)}` }];
  messages.push({ role: 'user', content: `${sentence(random)} Can you check ${nounPhrase(random)}?` });
  const toolCalls = random() < 0.6;
  if (toolCalls) {
    const path = `${pick(random, NAMES)}.${pick(random, ['md', 'ts', 'json', 'txt'])}`;
    const calls = [
      { name: 'read', arguments: { path } },
      { name: 'exec', arguments: { command: `grep -n ${pick(random, NAMES)} ${path}`, timeout: 30 } },
    ].slice(0, random() < 0.5 ? 1 : 2);
    const ids = calls.map(() => `call_${Math.floor(random() * 2 ** 32).toString(36)}`);
    messages.push({
      role: 'assistant',
      content: random() < 0.5 ? '' : 'Let me look.',
      reasoning_content: `${sentence(random)} ${sentence(random)}`,
      tool_calls: calls.map((call, i) => ({
        id: ids[i]!,
        type: 'function',
        function: { name: call.name, arguments: JSON.stringify(call.arguments) },
      })),
    });
    for (const id of ids) messages.push({ role: 'tool', tool_call_id: id, content: prose(random) });
  }
  messages.push({ role: 'assistant', content: prose(random), reasoning_content: sentence(random) });
  // Tool arguments go in as objects, as renderPrompt hands them to templates.
  const templateMessages = messages.map((m) =>
    m.tool_calls
      ? {
          ...m,
          tool_calls: m.tool_calls.map((c) => ({
            ...c,
            function: { ...c.function, arguments: JSON.parse(c.function.arguments) },
          })),
        }
      : m,
  );
  return template.render(templateMessages, { tools: toolCalls ? TOOLS : undefined });
}
