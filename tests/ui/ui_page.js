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
// Without a token (--no-auth): the list loads, and no request carries an Authorization header.
'use strict';

const { check, run } = require('./browser.js');

const HOT = 'TestApp.Hot.SpinHotLoop';
const base = process.env.DOTMON_URL;
const token = process.env.DOTMON_TOKEN || '';
const pid = process.env.APP_PID;

run(async (w) => {
  const page = w.page;
  const t0 = Date.now();
  const resp = await page.goto(base + '/ui', { waitUntil: 'load' });
  check(resp.status() === 200, 'GET /ui: ' + resp.status());
  const csp = resp.headers()['content-security-policy'] || '';
  check(csp.includes("default-src 'none'") && csp.includes("script-src 'self'") &&
    csp.includes("frame-ancestors 'none'"), 'the page comes with the strict CSP: ' + csp);

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
  check(/\d+ samples, [\d.]+%/.test(title), 'its title gives the samples and the share: ' + title.replace(/\n/g, ' | '));

  // Live metrics (dotmon runs with a 1 s counter interval): the CPU chart gets values.
  await page.waitForFunction(() => Number(document.getElementById('chart-a').dataset.points || 0) >= 1,
    null, { timeout: 15000 });
  check(true, 'the live metrics chart has values (' + await page.getAttribute('#chart-a', 'data-metric') + ')');

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
