// resolveModel against the Hub double: the cache layout huggingface_hub uses, byte-identical
// files, only the files the engine needs, offline reuse of the cache, revisions, and a resolved
// folder that the engine loads and generates from exactly like the original.

import assert from 'node:assert/strict';
import { existsSync, lstatSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, join } from 'node:path';
import { after, before, test } from 'node:test';
import { LocalEngine } from '../src/engine/local/engine.js';
import { defaultCacheDir, HubError, parseModelSpec, resolveModel, type ResolveOptions } from '../src/hub/index.js';
import { closedPort, gitBlobId, HubDouble, sha256 } from './helpers/hub-double.js';
import { makeTinyModel, scratchDir } from './helpers/models.js';

delete process.env.HF_HUB_OFFLINE;

const sharded = makeTinyModel({ family: 'qwen3', shards: 3 });
const single = makeTinyModel({ family: 'qwen3', seed: 2 });
const template = '{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}';
let hub: HubDouble;

before(async () => {
  hub = await HubDouble.start([
    // Files a real repo carries besides the model folder: none of them should be fetched.
    {
      id: 'test/tiny',
      dir: sharded,
      files: {
        'README.md': '# tiny',
        '.gitattributes': '*.safetensors filter=lfs',
        'pytorch_model.bin': 'pickle',
        'original/consolidated.pth': 'x',
      },
    },
    { id: 'test/single', dir: single, files: { 'chat_template.jinja': template } },
  ]);
});
after(() => hub.close());

const opts = (extra: ResolveOptions = {}): ResolveOptions => ({
  cacheDir: scratchDir('ocrl-hub-'),
  endpoint: hub.endpoint,
  token: '',
  retryDelayMs: 5,
  ...extra,
});

async function greedy(dir: string): Promise<number[]> {
  const engine = await LocalEngine.open(dir);
  try {
    const ids: number[] = [];
    for await (const e of engine.generate([3, 14, 15, 92, 65], { temperature: 0, maxTokens: 12, seed: 1 }))
      if (e.type === 'token') ids.push(e.token.id);
    return ids;
  } finally {
    await engine.close();
  }
}

test('a sharded model lands in a huggingface_hub-style cache, byte for byte, and the engine runs it', async () => {
  const o = opts();
  const dir = await resolveModel('test/tiny', o);
  const commit = hub.commit('test/tiny');
  const root = join(o.cacheDir!, 'models--test--tiny');
  assert.equal(dir, join(root, 'snapshots', commit));
  assert.equal(readFileSync(join(root, 'refs', 'main'), 'utf8'), commit);
  assert.ok(existsSync(join(o.cacheDir!, 'CACHEDIR.TAG')));

  const expected = readdirSync(sharded).sort();
  assert.ok(expected.filter((f) => f.endsWith('.safetensors')).length === 3, 'the source is sharded');
  assert.deepEqual(readdirSync(dir).sort(), expected, 'exactly the model folder: no README, .bin or original/');
  for (const name of expected) {
    const bytes = readFileSync(join(sharded, name));
    assert.ok(readFileSync(join(dir, name)).equals(bytes), `${name} is byte-identical`);
    assert.ok(lstatSync(join(dir, name)).isSymbolicLink(), `${name} is a link into blobs/`);
    // Blob names as huggingface_hub's: sha256 for LFS files, the git blob id for the others.
    const lfs = hub.file('test/tiny', name).lfs;
    assert.equal(readlinkSync(join(dir, name)), join('..', '..', 'blobs', lfs ? sha256(bytes) : gitBlobId(bytes)));
  }
  assert.ok(
    hub.file('test/tiny', 'tokenizer.json').lfs && !hub.file('test/tiny', 'config.json').lfs,
    'both kinds are covered',
  );
  for (const absent of ['chat_template.jinja', 'special_tokens_map.json'])
    assert.ok(existsSync(join(root, '.no_exist', commit, absent)), `${absent} recorded as absent`);
  assert.deepEqual(
    readdirSync(join(root, 'blobs')).filter((n) => n.includes('.')),
    [],
    'no partial or temporary files left',
  );
  assert.ok(!hub.requests.some((r) => /README|pytorch_model|original/.test(r.path)), 'unneeded files are not fetched');

  const fromHub = await greedy(dir);
  assert.ok(fromHub.length > 0);
  assert.deepEqual(fromHub, await greedy(sharded), 'the resolved folder generates what the original does');
});

test('a cached snapshot resolves with no network at all', async () => {
  const o = opts();
  const dir = await resolveModel('test/single', o);
  const seen = hub.requests.length;
  const offline = `http://127.0.0.1:${await closedPort()}`;
  assert.equal(await resolveModel('test/single', { ...o, endpoint: offline }), dir);
  assert.equal(
    await resolveModel(`test/single@${hub.commit('test/single')}`, { ...o, endpoint: offline }),
    dir,
    'by commit too',
  );
  assert.equal(hub.requests.length, seen, 'the Hub was not asked');
  assert.equal(
    readFileSync(join(dir, 'chat_template.jinja'), 'utf8'),
    template,
    'optional files the repo has are fetched',
  );
});

test('revisions: @commit in the spec, the revision option, and an unknown revision', async () => {
  const o = opts();
  const commit = hub.commit('test/single');
  const dir = await resolveModel(`test/single@${commit}`, o);
  assert.equal(basename(dir), commit);
  assert.ok(!existsSync(join(o.cacheDir!, 'models--test--single', 'refs', commit)), 'no ref is written for a commit');
  assert.equal(await resolveModel('test/single', { ...o, revision: commit }), dir);
  await assert.rejects(
    resolveModel('test/single@no-such-branch', o),
    (e: HubError) =>
      e instanceof HubError &&
      e.code === 'not-found' &&
      /test\/single has no revision "no-such-branch" \(HTTP 404 RevisionNotFound/.test(e.message),
  );
});

test('the cached snapshot stays when the branch moves upstream, until a refresh is asked for', async () => {
  const o = opts();
  const before = await resolveModel('test/single', o);
  const weights = hub.served('model.safetensors');
  const moved = hub.commitFile(
    'test/single',
    'generation_config.json',
    JSON.stringify({ eos_token_id: [2], temperature: 0.5 }),
  );
  try {
    assert.equal(await resolveModel('test/single', o), before, 'no silent change of the base model');
    const after = await resolveModel('test/single', { ...o, refresh: true });
    assert.equal(basename(after), moved);
    assert.equal(readFileSync(join(o.cacheDir!, 'models--test--single', 'refs', 'main'), 'utf8'), moved);
    assert.equal(JSON.parse(readFileSync(join(after, 'generation_config.json'), 'utf8')).temperature, 0.5);
    assert.equal(hub.served('model.safetensors'), weights, 'unchanged weights are shared, not fetched again');
    assert.equal(readlinkSync(join(after, 'model.safetensors')), readlinkSync(join(before, 'model.safetensors')));
    assert.ok(existsSync(join(before, 'generation_config.json')), 'the old snapshot is intact');
  } finally {
    hub.addRepo({ id: 'test/single', dir: single, files: { 'chat_template.jinja': template } }); // back to the original for other tests
  }
});

test('verifyCached re-hashes the cache and repairs a damaged blob', async () => {
  const o = opts();
  const dir = await resolveModel('test/single', o);
  const blob = join(dir, readlinkSync(join(dir, 'model.safetensors')));
  const good = readFileSync(blob);
  const bad = Buffer.from(good);
  bad[100]! ^= 1;
  writeFileSync(blob, bad);
  assert.equal(await resolveModel('test/single', o), dir, 'trusted without verifyCached');
  assert.equal(await resolveModel('test/single', { ...o, verifyCached: true }), dir);
  assert.ok(readFileSync(join(dir, 'model.safetensors')).equals(good));
});

test('local folders are returned as given; anything else that is not an id is refused', async () => {
  assert.equal(await resolveModel(sharded), sharded);
  await assert.rejects(
    resolveModel('./no/such/folder'),
    (e: HubError) => e.code === 'bad-spec' && /model folder \.\/no\/such\/folder does not exist/.test(e.message),
  );
  await assert.rejects(
    resolveModel(join(sharded, 'config.json')),
    (e: HubError) => e.code === 'bad-spec' && /is a file/.test(e.message),
  );
  await assert.rejects(
    resolveModel('not an id'),
    (e: HubError) =>
      e.code === 'bad-spec' && /neither an existing model folder nor a Hugging Face model id/.test(e.message),
  );
  await assert.rejects(resolveModel('a/b/c'), (e: HubError) => e.code === 'bad-spec');
  await assert.rejects(
    resolveModel('test/single', opts({ endpoint: 'huggingface.co' })),
    (e: HubError) => e.code === 'bad-spec' && /not an http\(s\) URL/.test(e.message),
  );
  assert.deepEqual(parseModelSpec('Qwen/Qwen3-0.6B'), { kind: 'hub', repoId: 'Qwen/Qwen3-0.6B' });
  assert.deepEqual(parseModelSpec('Qwen/Qwen3-0.6B@refs/pr/1'), {
    kind: 'hub',
    repoId: 'Qwen/Qwen3-0.6B',
    revision: 'refs/pr/1',
  });
  assert.throws(() => parseModelSpec('Qwen/Qwen3@../x'), HubError);
  assert.throws(() => parseModelSpec('Qwen--x/y'), HubError);
});

test('the default cache folder follows huggingface_hub', () => {
  assert.equal(defaultCacheDir({ HF_HUB_CACHE: '/x/hub', HF_HOME: '/h' }), '/x/hub');
  assert.equal(defaultCacheDir({ HF_HOME: '/h' }), '/h/hub');
  assert.equal(defaultCacheDir({ XDG_CACHE_HOME: '/c' }), '/c/huggingface/hub');
  assert.equal(defaultCacheDir({}), join(homedir(), '.cache', 'huggingface', 'hub'));
});
