// SPDX-License-Identifier: MIT
// The /ui page in headless Chromium (check_ui.py starts dotmon and the test app, then runs this).
// Environment: DOTMON_URL (http://127.0.0.1:PORT), DOTMON_TOKEN (empty: dotmon runs --no-auth),
// APP_PID (the test app, running `hot`), UI_SCREENSHOT (optional: a PNG of the page at the end).
//
// With a token: the page loads without console errors or CSP violations; the token is pasted and
// the input emptied; the process list shows APP_PID with its command line; a click on it profiles
// it and draws a flame graph whose top frame (hottest self) is SpinHotLoop; the live metrics chart
// gets values; the trace and gcdump downloads arrive; every data request carried the token in
// its Authorization header and no URL requested holds it; localStorage, sessionStorage, cookies
// and IndexedDB are empty; APP_MARKUP (an <img onerror> in the app's command line) is shown as
// text, not inserted; a wrong token is shown as a 401 problem in the page.
// The flame graph (the app runs `hot-threads 1`: `hot` on its command thread, one more thread
// recursing through TestApp.Deep from a lambda): it fills the page's width in rows of at least
// 22 px; a click on the hot frame zooms to it (the zoomed first row and the breadcrumb's last
// crumb name it; a crumb zooms back out); the search highlights SpinHotLoop and gives a share of
// samples at least its hottest share; the thread select lists each thread and one thread's graph
// holds only its samples (the Deep thread's lambda shown demangled as "TestApp.Deep.Run lambda",
// the compiler's name in its title). The metrics charts are SVG as wide as half the page, with
// y-axis labels in the metric's unit (CPU in %, the GC heap in KiB/MiB from 0) and clock times
// on the x axis, and follow a window resize. The token field says where the token comes from.
// UI_SCREENSHOT_DIR (optional): the flame graph, the zoomed flame graph and the charts saved
// there as ui-flame.png, ui-flame-zoom.png and ui-metrics.png (make ui-screenshots copies them
// into docs/img).
// Without a token (--no-auth): the list loads, and no request carries an Authorization header.
'use strict';

const path = require('path');

const { check, run } = require('./browser.js');

const HOT = 'TestApp.Hot.SpinHotLoop';
const base = process.env.DOTMON_URL;
const token = process.env.DOTMON_TOKEN || '';
const pid = process.env.APP_PID;

run(async (w) => {
  const page = w.page;
  await page.setViewportSize({ width: 1400, height: 900 });
  const t0 = Date.now();
  const resp = await page.goto(base + '/ui', { waitUntil: 'load' });
  check(resp.status() === 200, 'GET /ui: ' + resp.status());
  const csp = resp.headers()['content-security-policy'] || '';
  check(csp.includes("default-src 'none'") && csp.includes("script-src 'self'") &&
    csp.includes("frame-ancestors 'none'"), 'the page comes with the strict CSP: ' + csp);

  const hint = await page.textContent('#token-hint');
  check(hint.includes('make run') && hint.includes('~/.local/state/dotmon/token') && hint.includes('dotmon generatekey'),
    'the token field says where the token comes from: ' + hint.replace(/\s+/g, ' ').trim());
  await page.fill('#token', token);
  await page.click('#connect');
  const row = page.locator('#process-table tbody tr[data-pid="' + pid + '"]');
  await row.waitFor({ timeout: 15000 });
  check(await page.inputValue('#token') === '', 'the token input is emptied once used');
  const cmd = await row.locator('td.cmd').textContent();
  check(cmd.includes('TestApp'), 'the process list shows pid ' + pid + ' with its command line: ' + cmd);
  if (process.env.APP_MARKUP) {
    check(cmd.includes(process.env.APP_MARKUP) && await page.locator('#process-table img').count() === 0 &&
      await page.title() === 'dotmon', 'markup in a command line is shown as text, not run');
  }

  if (token === '') {
    const withAuth = w.requests.filter((r) => 'authorization' in r.headers);
    check(withAuth.length === 0, 'without a token no request carries Authorization (' + w.requests.length + ' requests)');
    check(w.errors.length === 0, 'no console errors: ' + JSON.stringify(w.errors));
    return;
  }

  await page.fill('#duration', '2');
  const tp = Date.now();
  await row.click();
  await page.waitForSelector('#flame[data-state="done"], #flame[data-state="error"]', { timeout: 30000 });
  const state = await page.getAttribute('#flame', 'data-state');
  const top = await page.getAttribute('#flame', 'data-top-frame');
  const pct = await page.getAttribute('#flame', 'data-top-percent');
  console.log('info flame graph in ' + (Date.now() - tp) + ' ms: top frame ' + top + ' (' + pct + '%), ' +
    await page.locator('#flame .frame').count() + ' frames drawn; ' + await page.textContent('#flame-status'));
  check(state === 'done', 'the flame graph is drawn (state ' + state + ')');
  check(top !== null && top.includes(HOT), 'its top frame (hottest self) is ' + HOT + ': ' + top);
  check(Number(pct) >= 40 && Number(pct) <= 90, HOT + ' has ' + pct + '% of the managed samples of every thread (40-90)');
  const hot = page.locator('#flame .frame.hot').first();
  check(await hot.count() === 1 && (await hot.getAttribute('data-name')).includes(HOT),
    'the hot frame is marked in the graph');
  const title = await hot.getAttribute('title');
  check(/inclusive \d+ samples \([\d.]+%\), exclusive \d+ samples \([\d.]+%\)/.test(title),
    'its title gives the samples and the shares: ' + title.replace(/\n/g, ' | '));
  await flameChecks(page, top, Number(pct));

  // Live metrics (dotmon runs with a 1 s counter interval): the CPU chart gets values.
  await page.waitForFunction(() => Number(document.getElementById('chart-a').dataset.points || 0) >= 1,
    null, { timeout: 15000 });
  check(true, 'the live metrics chart has values (' + await page.getAttribute('#chart-a', 'data-metric') + ')');
  await chartChecks(page);

  // Downloads: fetched with the header, saved from a Blob URL.
  await page.fill('#duration', '1');
  for (const [kind, ext] of [['gcdump', '.gcdump'], ['trace', '.nettrace']]) {
    const dl = page.waitForEvent('download', { timeout: 30000 });
    await page.click('#dl-' + kind);
    const d = await dl;
    const path = await d.path();
    const size = require('fs').statSync(path).size;
    check(d.suggestedFilename().endsWith(ext) && size > 0 && d.url().startsWith('blob:'),
      kind + ' downloaded from a Blob URL: ' + d.suggestedFilename() + ', ' + size + ' bytes');
  }

  check(w.errors.length === 0, 'no console errors, page errors or CSP violations: ' + JSON.stringify(w.errors));

  // The token: in no URL, in every data request's header, in no storage.
  const data = w.requests.filter((r) => !new URL(r.url).pathname.startsWith('/ui') && !r.url.startsWith('data:') &&
    !r.url.startsWith('blob:'));
  check(data.length >= 4 && data.every((r) => r.headers.authorization === 'Bearer ' + token),
    data.length + ' data requests, each with Authorization: Bearer <token>');
  const sig = token.split('.').pop();
  check(w.requests.every((r) => !r.url.includes(token) && !r.url.includes(sig)),
    'the token is in none of the ' + w.requests.length + ' URLs requested');
  const st = await page.evaluate(async () => ({
    local: localStorage.length, session: sessionStorage.length, cookie: document.cookie,
    idb: (await indexedDB.databases()).length, html: document.documentElement.outerHTML,
  }));
  const cookies = await w.context.cookies();
  check(st.local === 0 && st.session === 0 && st.cookie === '' && st.idb === 0 && cookies.length === 0,
    'storage empty: localStorage ' + st.local + ', sessionStorage ' + st.session + ', cookies "' + st.cookie +
    '" (' + cookies.length + '), IndexedDB databases ' + st.idb);
  check(!st.html.includes(token) && !st.html.includes(sig), 'the token is nowhere in the DOM');
  await shot(page, '#charts', 'ui-metrics.png'); // last: the charts have had the most time
  if (process.env.UI_SCREENSHOT) {
    await page.screenshot({ path: process.env.UI_SCREENSHOT, fullPage: true });
  }

  // A wrong token: the API's 401 problem is shown in the page.
  await page.fill('#token', 'garbage');
  await page.click('#connect');
  await page.waitForSelector('#error:not([hidden])', { timeout: 10000 });
  const err = await page.textContent('#error');
  check(err.includes('401'), 'a refused token is shown: ' + err);
  console.log('info page test took ' + (Date.now() - t0) + ' ms');
});

// The flame graph's size, zoom and breadcrumb, search, thread selection and frame names.
async function flameChecks(page, top, topPct) {
  const view = page.viewportSize();
  const box = await page.locator('#flame').boundingBox();
  const row = await page.locator('#flame .frame').first().boundingBox();
  check(box.width >= 0.9 * view.width && row.height >= 22,
    'the flame graph is ' + Math.round(box.width) + ' px wide in a ' + view.width + ' px window, rows ' + row.height + ' px');
  const hot = page.locator('#flame .frame.hot').first();
  await hot.hover();
  const detail = await page.textContent('#flame-detail');
  check(/^TestApp\.Hot\.SpinHotLoop — inclusive [\d.]+% \(\d+ samples\), exclusive [\d.]+% \(\d+ samples\)\n/.test(detail),
    'hovering a frame gives its name and shares: ' + detail.replace(/\n/g, ' | '));
  await shot(page, '#flame-section', 'ui-flame.png');

  // Zoom to the hot frame: the zoomed row and the last crumb name it; a crumb zooms back.
  const display = await hot.getAttribute('data-display');
  const level = Number(await hot.getAttribute('data-level'));
  await hot.click();
  const first = page.locator('#flame .frame[data-level="0"]');
  const crumbs = page.locator('#flame-crumbs button.crumb');
  const current = page.locator('#flame-crumbs button[aria-current]');
  const firstBox = await first.boundingBox();
  check(await first.getAttribute('data-name') === top && (await first.textContent()) === display &&
    Math.abs(firstBox.width - box.width) < 3,
    'zoomed to the hot frame, its name stays on the full-width first row: ' + await first.textContent());
  check(await crumbs.count() === level + 1 && (await current.textContent()) === display &&
    await current.getAttribute('data-name') === top,
    'the breadcrumb has ' + await crumbs.count() + ' crumbs (the root and each caller), the last naming the frame: ' +
    (await crumbs.allTextContents()).join(' › '));
  await page.fill('#flame-search', 'spinhot');
  await shot(page, '#flame-section', 'ui-flame-zoom.png');
  await page.fill('#flame-search', '');
  if (level >= 2) {
    const parent = crumbs.nth(level - 1);
    const parentName = await parent.getAttribute('data-name');
    await parent.click();
    check(await first.getAttribute('data-name') === parentName && await crumbs.count() === level,
      'a crumb zooms back out to its frame: ' + await first.textContent());
  }
  await crumbs.first().click();
  check(await page.locator('#flame .frame.root').count() === 1 && await crumbs.count() === 1 &&
    await page.locator('#flame .frame.hot').count() === 1, 'the first crumb zooms back to every frame');

  // Search: SpinHotLoop's frames highlighted, the others dimmed; its share of samples.
  await page.fill('#flame-search', 'SpinHot');
  const matches = await page.locator('#flame .frame.match').evaluateAll((els) => els.map((e) => e.dataset.name));
  const share = Number(await page.getAttribute('#flame', 'data-match-percent'));
  check(matches.length >= 1 && matches.every((n) => n.includes('SpinHot')) &&
    await page.locator('#flame.searching').count() === 1 && share >= topPct - 0.05 && share <= 100,
    'the search highlights ' + matches.length + ' frame(s) of SpinHotLoop, ' + share + '% of samples: ' +
    await page.textContent('#flame-match'));
  await page.fill('#flame-search', '');
  check(await page.locator('#flame .frame.match').count() === 0, 'an empty search highlights nothing');

  // Threads: each with managed samples listed; one thread's graph holds only its samples.
  const all = Number(await page.getAttribute('#flame', 'data-samples'));
  const options = await page.locator('#flame-thread option').evaluateAll((os) => os.map((o) => [o.value, o.textContent]));
  check(options.length >= 3 && options[0][0] === '' && options[0][1].startsWith('all threads'),
    'the thread select lists every thread then ' + (options.length - 1) + ' threads: ' + options.map((o) => o[1]).join('; '));
  let deep = null, hotThread = null;
  for (const [value, text] of options.slice(1)) {
    await page.selectOption('#flame-thread', value);
    const n = Number(await page.getAttribute('#flame', 'data-samples'));
    const names = await page.locator('#flame .frame').evaluateAll((els) => els.map((e) => e.dataset.name));
    const expect = Number(/\((\d+) samples?,/.exec(text)[1]);
    check(n === expect && n < all, text + ': the graph has its ' + n + ' of the ' + all + ' samples');
    if (!hotThread && names.some((x) => x.includes('SpinHotLoop'))) {
      hotThread = { text, names };
    }
    if (!deep && names.some((x) => x.includes('<Run>b__'))) {
      deep = { text, names };
      const lambda = page.locator('#flame .frame[data-display="TestApp.Deep.Run lambda"]').first();
      const raw = await lambda.count() === 1 ? await lambda.getAttribute('title') : '';
      check(raw.includes('TestApp.Deep+<>c__DisplayClass') && raw.includes('<Run>b__'),
        'the Deep thread\'s lambda is shown as "TestApp.Deep.Run lambda", its title the compiler\'s name: ' +
        raw.split('\n')[0]);
    }
  }
  check(hotThread !== null && !hotThread.names.some((x) => x.includes('<Run>b__')),
    'the thread with SpinHotLoop has no Deep lambda (' + (hotThread && hotThread.text) + ')');
  check(deep !== null && !deep.names.some((x) => x.includes('SpinHotLoop')),
    'a Deep thread has its lambda and no SpinHotLoop (' + (deep && deep.text) + ')');
  await page.selectOption('#flame-thread', '');
  check(Number(await page.getAttribute('#flame', 'data-samples')) === all, 'all threads again: ' + all + ' samples');
}

// The charts: SVG with gridlines, y labels in the metric's unit, clock times; they follow a resize.
async function chartChecks(page) {
  await page.waitForFunction(() => Number(document.getElementById('chart-a').dataset.points || 0) >= 2 &&
    Number(document.getElementById('chart-b').dataset.points || 0) >= 2, null, { timeout: 20000 });
  const view = page.viewportSize();
  for (const [id, unit] of [['#chart-a', /^\d+(\.\d+)?%$/], ['#chart-b', /^\d+(\.\d+)? (B|KiB|MiB|GiB)$/]]) {
    const ys = await page.locator(id + ' .y-axis text').allTextContents();
    const xs = await page.locator(id + ' .x-axis text').allTextContents();
    const grid = await page.locator(id + ' line.grid').count();
    const box = await page.locator(id).boundingBox();
    const metric = await page.getAttribute(id, 'data-metric');
    check(ys.length >= 2 && ys.every((y) => unit.test(y)) && /^0(\.0+)?( |%)/.test(ys[0]) && grid === ys.length,
      metric + ': y axis from 0 with ' + grid + ' gridlines, labels ' + ys.join(', '));
    check(xs.length >= 1 && xs.every((x) => /^\d\d:\d\d:\d\d$/.test(x)), metric + ': x axis times ' + xs.join(', '));
    check(box.width >= 0.4 * view.width, metric + ': the chart is ' + Math.round(box.width) + ' px wide');
  }
  await page.setViewportSize({ width: 900, height: 900 });
  await page.waitForFunction(() => {
    const s = document.getElementById('chart-a');
    return Math.abs(Number(s.getAttribute('viewBox').split(' ')[2]) - s.clientWidth) < 2;
  }, null, { timeout: 5000 });
  const fw = (await page.locator('#flame').boundingBox()).width;
  check(fw >= 0.9 * 900 && fw < 900, 'after a resize to 900 px the chart is redrawn to its width and the flame graph is ' +
    Math.round(fw) + ' px');
  await page.setViewportSize(view);
}

async function shot(page, selector, name) {
  if (process.env.UI_SCREENSHOT_DIR) {
    await page.locator(selector).screenshot({ path: path.join(process.env.UI_SCREENSHOT_DIR, name) });
  }
}
