#!/usr/bin/env node
// Installs node-llama-cpp (prebuilt llama.cpp binaries) for `serve --sampler llama-cpp`, its tests
// and benches, into <repo>/.cache/llama-cpp: only this platform's prebuilt package (plus a GPU
// build when asked), never a download or a build at run time (its postinstall is skipped).
// It is not a package dependency because npm's lockfile would have to list every platform's
// binary package (several hundred MB, and registries that mirror only some fail `npm ci`).
//
//   node scripts/install-llama-cpp.mjs               # CPU (Metal on Apple silicon)
//   node scripts/install-llama-cpp.mjs --gpu cuda    # also the CUDA build (Linux, Windows x64)
//   node scripts/install-llama-cpp.mjs --gpu vulkan  # also the Vulkan build
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const VERSION = '3.22.1';
const prefix = fileURLToPath(new URL('../.cache/llama-cpp/', import.meta.url));
const gpuAt = process.argv.indexOf('--gpu');
const gpu = gpuAt >= 0 ? process.argv[gpuAt + 1] : null;
if (gpu !== null && gpu !== 'cuda' && gpu !== 'vulkan') {
  console.error(`--gpu takes cuda or vulkan, got ${JSON.stringify(gpu)}`);
  process.exit(2);
}

const base = {
  'linux-x64': 'linux-x64',
  'linux-arm64': 'linux-arm64',
  'linux-arm': 'linux-armv7l',
  'darwin-arm64': 'mac-arm64-metal',
  'darwin-x64': 'mac-x64',
  'win32-x64': 'win-x64',
  'win32-arm64': 'win-arm64',
}[`${process.platform}-${process.arch}`];
if (!base) {
  console.error(`node-llama-cpp ships no prebuilt binaries for ${process.platform}-${process.arch}`);
  process.exit(1);
}
const gpuPackages = {
  'linux-x64': { cuda: ['linux-x64-cuda', 'linux-x64-cuda-ext'], vulkan: ['linux-x64-vulkan'] },
  'win-x64': { cuda: ['win-x64-cuda', 'win-x64-cuda-ext'], vulkan: ['win-x64-vulkan'] },
}[base];
if (gpu && !gpuPackages) {
  console.error(`node-llama-cpp ships no ${gpu} build for ${process.platform}-${process.arch}`);
  process.exit(1);
}
const wanted = [base, ...(gpu ? gpuPackages[gpu] : [])].map((p) => `@node-llama-cpp/${p}@${VERSION}`);

const installed = (name) => {
  const manifest = join(prefix, 'node_modules', name, 'package.json');
  return existsSync(manifest) && JSON.parse(readFileSync(manifest, 'utf8')).version === VERSION;
};
if (installed('node-llama-cpp') && wanted.every((w) => installed(w.slice(0, w.lastIndexOf('@'))))) {
  console.log(`node-llama-cpp ${VERSION} is installed in ${prefix}`);
  process.exit(0);
}
mkdirSync(prefix, { recursive: true });
if (!existsSync(join(prefix, 'package.json')))
  writeFileSync(join(prefix, 'package.json'), '{"name":"openclaw-rl-llama-cpp","private":true}\n');
console.log(`installing node-llama-cpp ${VERSION} (${wanted.join(', ')}) into ${prefix}`);
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const args = ['install', '--no-audit', '--no-fund', '--ignore-scripts', '--omit=optional'];
const r = spawnSync(npm, [...args, `node-llama-cpp@${VERSION}`, ...wanted], { cwd: prefix, stdio: 'inherit' });
process.exit(r.status ?? 1);
