// Debian's Chromium, headless, for the browser suite (puppeteer-core downloads no browser).
import fs from 'node:fs';

export const CHROMIUM = process.env.POLYGRAD_CHROMIUM || '/usr/bin/chromium';

// { browser } or { whyNot }: the one reason a browser test may skip is that Chromium cannot start.
export async function launchChromium(extraArgs = []) {
  try {
    const puppeteer = (await import('puppeteer-core')).default;
    if (!fs.existsSync(CHROMIUM)) throw new Error(`no ${CHROMIUM} (scripts/install-deps --test installs chromium)`);
    const browser = await puppeteer.launch({
      executablePath: CHROMIUM, headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', ...extraArgs],
    });
    return { browser, whyNot: null };
  } catch (e) {
    return { browser: null, whyNot: `Chromium cannot start here: ${e.message.split('\n')[0]}` };
  }
}
