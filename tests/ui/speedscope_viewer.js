// SPDX-License-Identifier: MIT
// speedscope's own viewer (npm speedscope's dist/release, served on loopback by
// check_speedscope_viewer.py) opening dotmon's speedscope file in headless Chromium.
// Environment: VIEWER_URL (index.html#profileURL=…), SS_SCREENSHOT (optional PNG).
//
// The viewer loads it without console or page errors; in its Sandwich view (a DOM table of
// frames, sorted by self time) of the thread that ran `hot` (the profiles are stepped through with
// the viewer's `n` key until one lists it), TestApp.Hot.SpinHotLoop is the first frame by self time
// once the runtime's suspension frames (Thread.PollGC and its worker, where a busy loop is
// sampled) are set aside, with 55-85% of the thread's time in total.
'use strict';

const { check, run } = require('./browser.js');

const HOT = 'TestApp.Hot.SpinHotLoop';
const SUSPENSION = ['System.Threading.Thread.PollGC', 'System.Threading.Thread.<PollGC>'];

// The Sandwich table's rows: [{total, self, name}] with the percentages as numbers.
function rows(page) {
  return page.evaluate(() => [...document.querySelectorAll('tr')]
    .filter((r) => r.cells.length === 3 && r.cells[2].innerText.includes('!'))
    .map((r) => {
      const pct = (t) => Number((/\(([<\d.]+)%\)/.exec(t) || [0, '0'])[1].replace('<', ''));
      return { total: pct(r.cells[0].innerText), self: pct(r.cells[1].innerText), name: r.cells[2].innerText.trim() };
    }));
}

run(async (w) => {
  const page = w.page;
  const t0 = Date.now();
  await page.goto(process.env.VIEWER_URL, { waitUntil: 'load' });
  // The toolbar names the profile once the file is loaded: "Thread N (i/k)".
  const title = page.locator('text=/\\(1\\/\\d+\\)/').first();
  await title.waitFor({ timeout: 20000 });
  const count = Number(/\/(\d+)\)/.exec(await title.textContent())[1]);
  console.log('info loaded in ' + (Date.now() - t0) + ' ms: ' + count + ' profiles (threads)');
  await page.getByText('Sandwich', { exact: false }).first().click();
  let found = null;
  for (let i = 0; i < count && !found; i++) {
    if (i > 0) {
      await page.keyboard.press('n');
    }
    await page.waitForTimeout(300);
    const r = await rows(page);
    if (r.some((x) => x.name.includes(HOT))) {
      found = { index: i + 1, rows: r };
    }
  }
  check(found !== null, 'the Sandwich view lists ' + HOT + ' on one of the ' + count + ' threads');
  if (found) {
    const own = found.rows.filter((x) => !SUSPENSION.some((s) => x.name.includes(s)));
    for (const x of found.rows.slice(0, 5)) {
      console.log('info   total ' + x.total + '%  self ' + x.self + '%  ' + x.name);
    }
    check(own.length > 0 && own[0].name.includes(HOT), 'profile ' + found.index + '/' + count +
      ': the first frame by self time (suspension frames aside) is ' + (own[0] ? own[0].name : 'none'));
    const hot = found.rows.find((x) => x.name.includes(HOT));
    check(hot.total >= 55 && hot.total <= 85, HOT + ': ' + hot.total + '% of the thread in total (55-85)');
  }
  if (process.env.SS_SCREENSHOT) {
    await page.screenshot({ path: process.env.SS_SCREENSHOT });
  }
  check(w.errors.length === 0, 'no console errors or page errors: ' + JSON.stringify(w.errors));
});
