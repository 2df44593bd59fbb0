// Opens a capacity page in headless Chromium and prints, as JSON, what a person sees on it:
// the figures of each section as the page draws them (text and bar widths), the errors the
// page logged, every URL it fetched, and the answer's status. Used by tests/capacity_page.rs.
//
//   KUBEPLACE_PLAYWRIGHT=$(hack/npm-deps.sh)/playwright-core node hack/npm/capacity-page.cjs URL \
//       [--token TOKEN] [--screenshot FILE]
'use strict';
const { chromium } = require(process.env.KUBEPLACE_PLAYWRIGHT || 'playwright-core');

function parse(argv) {
  const out = { url: null, token: null, screenshot: null };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--token') out.token = argv[++i];
    else if (argv[i] === '--screenshot') out.screenshot = argv[++i];
    else out.url = argv[i];
  }
  if (!out.url) throw new Error('usage: capacity-page.cjs URL [--token T] [--screenshot FILE]');
  return out;
}

async function main() {
  const args = parse(process.argv.slice(2));
  const browser = await chromium.launch({
    executablePath: process.env.KUBEPLACE_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-background-networking', '--disable-gpu'],
  });
  try {
    const context = await browser.newContext({
      viewport: { width: 1280, height: 900 },
      extraHTTPHeaders: args.token ? { 'X-Auth-Token': args.token } : {},
    });
    const page = await context.newPage();
    const errors = [];
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    page.on('pageerror', (e) => errors.push(String(e)));
    const fetched = [];
    page.on('request', (r) => fetched.push(r.url()));
    const response = await page.goto(args.url, { waitUntil: 'load' });
    // A refused request (a 401 without a token) has no figures to read.
    const seen = response.status() !== 200 ? null : await page.evaluate(() => {
      const bars = (row) => [...row.querySelectorAll('.bar[data-class]')].map((b) => {
        const track = b.querySelector('.track').getBoundingClientRect().width;
        const fill = b.querySelector('.fill').getBoundingClientRect().width;
        return {
          class: b.dataset.class,
          text: b.querySelector('.label b').innerText,
          drawn: track > 0 ? fill / track : null,
        };
      });
      const rows = (selector, f) => [...document.querySelectorAll(selector)].map(f);
      const count = (id) => Number(document.getElementById(id).innerText);
      return {
        title: document.title,
        hosts: count('host-count'),
        zones: rows('section.zone', (z) => ({
          zone: z.dataset.zone,
          hosts: [...z.querySelectorAll('tr.host')].map((h) => h.dataset.host),
        })),
        hottest: rows('tr.hot-host', (tr) => ({
          host: tr.dataset.host,
          share: tr.cells[2].innerText,
          bars: bars(tr),
        })),
        flavors: rows('tr.flavor', (tr) => ({
          flavor: tr.dataset.flavor,
          headroom: tr.cells[1].innerText,
          stoppedBy: tr.cells[4].innerText,
        })),
        waiting: rows('tr.waiting', (tr) => ({
          server: tr.dataset.server,
          reason: tr.cells[2].innerText,
        })),
        projects: rows('tr.project', (tr) => ({
          project: tr.dataset.project,
          limit: tr.dataset.limit,
          shown: tr.cells[3].innerText,
        })),
      };
    });
    if (args.screenshot) await page.screenshot({ path: args.screenshot, fullPage: true });
    console.log(JSON.stringify({ status: response.status(), errors, fetched, seen }));
  } finally {
    await browser.close();
  }
}

main().catch((e) => { console.error(String(e && e.stack || e)); process.exit(1); });
