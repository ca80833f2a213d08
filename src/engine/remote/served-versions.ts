// Which policy versions one inference server holds, and which requests use them: the half of
// Sampler.use() every HTTP backend shares (vllm.ts, sglang.ts).
//
// A LoRA version is an adapter loaded under its own name (openclaw-rl-v<N>) next to the base
// model; requests name the adapter of the version they run on, so a request in flight keeps its
// adapter while new ones name the next. An adapter no request uses and that is no longer the
// serving one is unloaded. A full version replaces the server's weights for everyone, so use()
// holds new requests back (they wait, none is refused), lets those in flight finish, loads the
// weights, then lets the waiting ones go on the new version. After that the base (version 0) is
// gone from that server: scoring under it is an error naming the version.

import type { PolicyVersion } from '../policy-version.js';

/** What a server does to change versions; each rejects with a message naming the server and folder. */
export interface VersionRoutes {
  loadAdapter(name: string, path: string): Promise<void>;
  unloadAdapter(name: string): Promise<void>;
  loadFullWeights(path: string): Promise<void>;
}

/** One request's hold on its version: the adapter to name (null: the server's own weights). */
export interface VersionLease {
  version: number;
  adapter: string | null;
  release(): void;
}

export class ServedVersions {
  private servingVersion = 0;
  /** The version the server's own weights are: 0 (the base) until a full version is loaded. */
  private weightsVersion = 0;
  private readonly adapters = new Map<number, string>();
  private readonly users = new Map<number, number>();
  /** While a full version is pending, new requests wait on this. */
  private held: Promise<void> | null = null;
  private releaseHeld: (() => void) | null = null;
  private holds = 0;
  private idle: (() => void) | null = null;
  private switching: Promise<unknown> = Promise.resolve();
  /** The last failed unload, kept for diagnostics (an unload failing costs server memory only). */
  lastUnloadError: string | null = null;

  constructor(
    private readonly server: string,
    private readonly routes: VersionRoutes,
  ) {}

  get serving(): number {
    return this.servingVersion;
  }

  /** Holds `version` (default: the serving one) for one request; waits while a full version loads. */
  async acquire(version?: number): Promise<VersionLease> {
    while (this.held) await this.held;
    const v = version ?? this.servingVersion;
    const adapter = this.adapters.get(v) ?? null;
    if (adapter === null && v !== this.weightsVersion)
      throw new RangeError(
        `policy version ${v} is not loaded on ${this.server} (serving ${this.servingVersion}` +
          `${this.weightsVersion === 0 ? '' : `; its weights are version ${this.weightsVersion}, the base is gone`})`,
      );
    this.users.set(v, (this.users.get(v) ?? 0) + 1);
    let released = false;
    return {
      version: v,
      adapter,
      release: () => {
        if (released) return;
        released = true;
        const left = (this.users.get(v) ?? 1) - 1;
        if (left > 0) this.users.set(v, left);
        else this.users.delete(v);
        if (left <= 0 && v !== this.servingVersion) void this.unloadIfStale(v);
        if (this.users.size === 0) this.idle?.();
      },
    };
  }

  /** Sampler.use over this server's routes; calls run one at a time. Resolves with the switch's ms. */
  use(v: PolicyVersion): Promise<number> {
    // Held from this call on, so a request sent after use() never runs on the weights replaced.
    const unhold = v.kind === 'full' ? this.hold() : null;
    const run = this.switching
      .then(
        () => this.switchTo(v),
        () => this.switchTo(v),
      )
      .finally(() => unhold?.());
    this.switching = run.catch(() => {});
    return run;
  }

  private async switchTo(v: PolicyVersion): Promise<number> {
    const started = performance.now();
    if (v.path === null)
      throw new Error(
        `version ${v.version} was published in memory only: ${this.server} loads versions from folders ` +
          '(open the learner with a versions folder the server can read)',
      );
    if (v.version <= this.servingVersion)
      throw new Error(`version ${v.version} is not newer than the serving version ${this.servingVersion}`);
    if (v.kind === 'lora') {
      const name = `openclaw-rl-v${v.version}`;
      await this.routes.loadAdapter(name, v.path);
      this.adapters.set(v.version, name);
      this.servingVersion = v.version;
      await Promise.all(
        [...this.adapters.keys()].filter((old) => !this.users.has(old)).map((old) => this.unloadIfStale(old)),
      );
      return performance.now() - started;
    }
    if (this.users.size > 0) await new Promise<void>((r) => (this.idle = r));
    this.idle = null;
    await this.routes.loadFullWeights(v.path);
    // The adapters were trained over the weights just replaced.
    await Promise.all([...this.adapters.keys()].map((old) => this.unloadIfStale(old, true)));
    this.weightsVersion = v.version;
    this.servingVersion = v.version;
    return performance.now() - started;
  }

  /** Holds new requests until the returned function has been called (holds nest). */
  private hold(): () => void {
    if (this.holds++ === 0)
      this.held = new Promise((r) => {
        this.releaseHeld = r;
      });
    let done = false;
    return () => {
      if (done) return;
      done = true;
      if (--this.holds > 0) return;
      const release = this.releaseHeld;
      this.held = null;
      this.releaseHeld = null;
      release?.();
    };
  }

  /** Unloads `version`'s adapter unless it serves; never rejects (a failed unload costs memory only). */
  private async unloadIfStale(version: number, evenServing = false): Promise<void> {
    const name = this.adapters.get(version);
    if (name === undefined || (version === this.servingVersion && !evenServing)) return;
    this.adapters.delete(version);
    await this.routes.unloadAdapter(name).catch((e: Error) => {
      this.lastUnloadError = e.message;
    });
  }
}
