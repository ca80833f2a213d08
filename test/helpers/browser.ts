// Headless Chromium for browser tests: Debian's `chromium` package (scripts/install-system-deps.sh
// --with-tests) driven by playwright-core, which downloads no browser of its own.

import { execFileSync } from 'node:child_process';
import { chromium, type Browser, type Page } from 'playwright-core';

/** The system Chromium's path; throws with the install command when there is none. */
export function systemChromium(): string {
  try {
    return execFileSync('which', ['chromium'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error(
      'no `chromium` on PATH: run scripts/install-system-deps.sh --with-tests (apt-get install chromium)',
    );
  }
}

export async function launchChromium(): Promise<Browser> {
  // --no-sandbox: test containers run as root, where Chromium's sandbox refuses to start.
  return chromium.launch({ executablePath: systemChromium(), headless: true, args: ['--no-sandbox'] });
}

/**
 * A condition on the page: the number of elements `selector` matches (`count` exactly, or at least
 * `minCount`), or of its first element the chart points (`points`, at least) or the text (`text`).
 */
export interface PageCondition {
  selector: string;
  count?: number;
  minCount?: number;
  points?: number;
  text?: string;
}

// Runs in the page. A function, not a string: the dashboard's CSP forbids eval, and the test keeps it on.
function holds(c: PageCondition): boolean {
  // The page's DOM: the test build has no DOM types.
  const found = (globalThis as any).document.querySelectorAll(c.selector);
  if (c.count !== undefined) return found.length === c.count;
  if (c.minCount !== undefined) return found.length >= c.minCount;
  const first = found[0];
  if (!first) return false;
  if (c.points !== undefined) return Number(first.dataset.points ?? 0) >= c.points;
  if (c.text !== undefined) return first.textContent.includes(c.text);
  return true;
}

/** Waits until `condition` holds in the page, up to `ms`; the error names `what`. */
export async function waitInPage(page: Page, what: string, condition: PageCondition, ms = 60_000): Promise<void> {
  try {
    await page.waitForFunction(holds, condition, { timeout: ms, polling: 100 });
  } catch (e) {
    const shown = await page
      .locator('#error, #login-error')
      .allTextContents()
      .catch(() => []);
    throw new Error(`timed out waiting for ${what} (page errors: ${JSON.stringify(shown)}): ${(e as Error).message}`);
  }
}
