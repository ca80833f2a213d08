// Which files of a Hub repo the engine needs, from the listing of
// GET /api/models/{id}/revision/{rev}?blobs=true, and how each one is checked after download.
//
// Only the files a model folder needs are fetched (a repo often also carries .bin, .gguf, .onnx or
// original/ copies of the same weights, several times their size), and a repo without safetensors
// weights or without tokenizer.json is refused before anything is downloaded.

import { HubError } from './errors.js';

/** One file to fetch, with what the Hub says its bytes are. */
export interface RemoteFile {
  path: string;
  size: number;
  /** For LFS (and Xet) files: sha256 of the content, which is also the file's ETag on the Hub. */
  sha256?: string;
  /** For small files: the git blob id, sha1("blob <size>\0" + content), also the file's ETag. */
  gitOid?: string;
}

/** Blob name in the cache, as huggingface_hub names it: the sha256 for LFS files, else the git blob id. */
export function blobKey(f: RemoteFile): string {
  return f.sha256 ?? f.gitOid!;
}

export interface Sibling {
  rfilename: string;
  size?: number;
  blobId?: string;
  lfs?: { sha256?: string; size?: number };
}

export interface RevisionInfo {
  commit: string;
  siblings: Map<string, Sibling>;
}

export const REQUIRED_FILES = ['config.json', 'tokenizer.json', 'tokenizer_config.json'];
/** Fetched when the repo has them; recorded as absent (.no_exist) when it does not. */
export const OPTIONAL_FILES = ['generation_config.json', 'chat_template.jinja', 'special_tokens_map.json'];
export const SINGLE_WEIGHTS = 'model.safetensors';
export const WEIGHTS_INDEX = 'model.safetensors.index.json';

export function parseRevisionInfo(body: unknown, where: string): RevisionInfo {
  const info = body as { sha?: unknown; siblings?: unknown };
  if (typeof info?.sha !== 'string' || !/^[0-9a-f]{40}$/.test(info.sha) || !Array.isArray(info.siblings)) {
    throw new HubError(
      'http',
      `${where} did not answer with a commit and a file list (is HF_ENDPOINT a Hub or a mirror of it?)`,
    );
  }
  const siblings = new Map<string, Sibling>();
  for (const s of info.siblings as Sibling[]) if (typeof s?.rfilename === 'string') siblings.set(s.rfilename, s);
  return { commit: info.sha, siblings };
}

export function remoteFile(info: RevisionInfo, path: string, repoId: string): RemoteFile {
  const s = info.siblings.get(path);
  if (!s) throw new HubError('not-found', `${repoId}@${info.commit} has no ${path}`);
  const size = s.lfs?.size ?? s.size;
  const sha256 = s.lfs?.sha256?.toLowerCase();
  const gitOid = s.lfs ? undefined : s.blobId?.toLowerCase();
  if (!Number.isSafeInteger(size) || size! < 0 || (sha256 === undefined && gitOid === undefined)) {
    throw new HubError(
      'http',
      `the file list of ${repoId} gives no size and hash for ${path}: the endpoint must support ?blobs=true like huggingface.co`,
    );
  }
  // Both become file names in the cache, so only hex is accepted.
  if (
    (sha256 !== undefined && !/^[0-9a-f]{64}$/.test(sha256)) ||
    (gitOid !== undefined && !/^[0-9a-f]{40}$/.test(gitOid))
  ) {
    throw new HubError('http', `the file list of ${repoId} gives a malformed hash for ${path}`);
  }
  return { path, size: size!, ...(sha256 ? { sha256 } : { gitOid }) };
}

export interface Plan {
  /** Downloaded first: config, tokenizer, optional files present, and the shard index if sharded. */
  files: RemoteFile[];
  /** Optional files the repo does not have. */
  absent: string[];
  /** Set when the weights are sharded: the shards follow from the index's content. */
  index?: RemoteFile;
}

/** What to fetch, or a clear refusal when the repo is not something the engine can load. */
export function planDownload(info: RevisionInfo, repoId: string): Plan {
  const names = [...info.siblings.keys()];
  const has = (p: string) => info.siblings.has(p);
  // The engine reads the index when both exist (model/weights.ts), so prefer it here too.
  const index = has(WEIGHTS_INDEX) ? remoteFile(info, WEIGHTS_INDEX, repoId) : undefined;
  if (!index && !has(SINGLE_WEIGHTS)) throw noWeightsError(repoId, names);
  for (const f of REQUIRED_FILES) {
    if (has(f)) continue;
    const why =
      f === 'tokenizer.json'
        ? 'the engine needs the fast tokenizer file tokenizer.json (vocab.json/merges.txt or tokenizer.model alone are not supported)'
        : `a model folder needs ${f}`;
    throw new HubError('unsupported', `${repoId} has no ${f}: ${why}.`);
  }
  const files = REQUIRED_FILES.map((p) => remoteFile(info, p, repoId));
  const absent: string[] = [];
  for (const p of OPTIONAL_FILES) {
    if (has(p)) files.push(remoteFile(info, p, repoId));
    else absent.push(p);
  }
  if (index) return { files, absent, index };
  files.push(remoteFile(info, SINGLE_WEIGHTS, repoId));
  return { files, absent };
}

/** The shards an index names, checked against the listing. */
export function shardsOf(indexText: string, info: RevisionInfo, repoId: string): RemoteFile[] {
  let weightMap: unknown;
  try {
    weightMap = (JSON.parse(indexText) as { weight_map?: unknown }).weight_map;
  } catch (e) {
    throw new HubError('unsupported', `${WEIGHTS_INDEX} of ${repoId} is not valid JSON: ${(e as Error).message}`);
  }
  if (!weightMap || typeof weightMap !== 'object')
    throw new HubError('unsupported', `${WEIGHTS_INDEX} of ${repoId} has no "weight_map" object`);
  const shards = [...new Set(Object.values(weightMap as Record<string, unknown>))];
  return shards.map((shard) => {
    // The names come from a downloaded file and become paths in the snapshot folder.
    if (typeof shard !== 'string' || !isSafeRelativePath(shard) || !shard.endsWith('.safetensors')) {
      throw new HubError(
        'unsupported',
        `${WEIGHTS_INDEX} of ${repoId} names an unusable shard ${JSON.stringify(shard)}`,
      );
    }
    if (!info.siblings.has(shard))
      throw new HubError('unsupported', `${WEIGHTS_INDEX} of ${repoId} names ${shard}, which the repo does not have`);
    return remoteFile(info, shard, repoId);
  });
}

export function isSafeRelativePath(p: string): boolean {
  return (
    p.length > 0 &&
    !p.startsWith('/') &&
    !p.includes('\\') &&
    p.split('/').every((s) => s !== '' && s !== '.' && s !== '..')
  );
}

function noWeightsError(repoId: string, names: string[]): HubError {
  const kinds: string[] = [];
  const count = (re: RegExp) => names.filter((n) => re.test(n)).length;
  if (count(/\.bin$/) > 0) kinds.push('PyTorch .bin files');
  if (count(/\.gguf$/i) > 0) kinds.push('GGUF files');
  if (count(/\.(pt|pth|ckpt)$/) > 0) kinds.push('PyTorch checkpoints');
  if (count(/\.onnx$/) > 0) kinds.push('ONNX files');
  if (count(/\.safetensors$/) > 0) kinds.push('safetensors files under other names (adapters or a subfolder)');
  const has = kinds.length > 0 ? `it has ${kinds.join(', ')}` : 'it has no weights the engine knows';
  return new HubError(
    'unsupported',
    `${repoId} has no model.safetensors or model.safetensors.index.json (${has}). The engine loads safetensors weights only: ` +
      'use a repo that publishes them (many models have a safetensors version), or convert the weights and pass the folder to --model.',
  );
}
