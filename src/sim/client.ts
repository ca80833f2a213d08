// The simulated users' side of the wire: plain OpenAI-style HTTP requests to `serve`, one session
// per conversation (X-Session-Id), and the admin status the benchmark watches.

export interface ChatOptions {
  /** Main turns are recorded for learning; side turns (the score's probes) are only answered. */
  kind: 'main' | 'side';
  maxTokens: number;
  /** Reproduces a probe's sample; the users leave it to the server. */
  seed?: number;
}

export interface Reply {
  text: string;
  finishReason: string;
}

export class ServeClient {
  constructor(
    readonly url: string,
    readonly root: string,
    private readonly adminKey: string,
  ) {}

  async chat(
    sessionId: string,
    messages: { role: 'user' | 'assistant'; content: string }[],
    o: ChatOptions,
  ): Promise<Reply> {
    const res = await fetch(`${this.url}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-session-id': sessionId, 'x-turn-type': o.kind },
      body: JSON.stringify({
        model: 'policy',
        messages,
        max_tokens: o.maxTokens,
        stream: false,
        ...(o.seed === undefined ? {} : { seed: o.seed }),
      }),
    });
    const body = (await res.json()) as {
      choices?: { message?: { content?: string | null }; finish_reason?: string }[];
      error?: { message?: string };
    };
    if (!res.ok) throw new Error(`serve answered ${res.status}: ${body.error?.message ?? JSON.stringify(body)}`);
    const choice = body.choices?.[0];
    return { text: choice?.message?.content ?? '', finishReason: choice?.finish_reason ?? 'unknown' };
  }

  async status(): Promise<AdminStatus> {
    const res = await fetch(`${this.root}/admin/status`, { headers: { authorization: `Bearer ${this.adminKey}` } });
    if (!res.ok) throw new Error(`GET /admin/status answered ${res.status}: ${await res.text()}`);
    return (await res.json()) as AdminStatus;
  }
}

/** The fields of GET /admin/status the simulation reads. */
export interface AdminStatus {
  version: number;
  steps: number;
  trainer?: { state: string; error: string | null };
  queues?: { closedTurns: number; judging: number; samples: number };
  samples?: { queued: number; trained: number; stale: number; waiting?: number };
  judge?: { judged: number; recent: { turns: number; scoreMean: number; hints: number } };
  feed?: Record<string, number>;
}
