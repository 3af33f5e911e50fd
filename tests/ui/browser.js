// SPDX-License-Identifier: MIT
// Shared by the tests of this folder: Debian's Chromium driven by playwright-core (the npm
// packages of package-lock.json, installed into the build tree by ui_npm_install; NODE_PATH points
// there), a check list that prints ok/FAIL lines as the Python tests do, and a page watched for
// console errors, page errors and CSP violations.
'use strict';

const fs = require('fs');
const { chromium } = require('playwright-core');

const CHROMIUM = process.env.CHROMIUM_EXE || '/usr/bin/chromium';
// Without the background-networking flags Chromium keeps calling Google's hosts, which a closed
// network refuses; playwright gives each launch a fresh, empty profile (user data dir).
const ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const fails = [];

function check(cond, what) {
  console.log((cond ? 'ok   ' : 'FAIL ') + what);
  if (!cond) {
    fails.push(what);
  }
  return cond;
}

async function launch() {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error(CHROMIUM + ' is missing: install the Debian package chromium (make deps does)');
  }
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
}

// A new page whose console errors, uncaught errors and CSP violations are collected in
// watch.errors; every request in watch.requests ({url, headers}).
async function watchedPage(browser) {
  const context = await browser.newContext({ acceptDownloads: true });
  const page = await context.newPage();
  const watch = { context, page, errors: [], requests: [] };
  page.on('console', (m) => {
    if (m.type() === 'error') {
      watch.errors.push('console: ' + m.text());
    }
  });
  page.on('pageerror', (e) => watch.errors.push('page error: ' + e.message));
  page.on('request', (r) => watch.requests.push({ url: r.url(), headers: r.headers() }));
  // Injected by the browser itself, not subject to the page's CSP.
  await page.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (e) => {
      console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI);
    });
  });
  return watch;
}

// Runs body(w) on a watched page of a fresh browser, closes it, and exits 1 when a check failed
// or body threw (printed as a FAIL line), else 0.
function run(body) {
  const main = async () => {
    const browser = await launch();
    try {
      await body(await watchedPage(browser));
    } finally {
      await browser.close();
    }
  };
  main().then(() => {
    if (fails.length > 0) {
      console.log(fails.length + ' check(s) failed');
    }
    process.exit(fails.length > 0 ? 1 : 0);
  }, (e) => {
    console.log('FAIL ' + (e && e.stack ? e.stack : e));
    process.exit(1);
  });
}

module.exports = { check, run };
