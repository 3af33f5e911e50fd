// SPDX-License-Identifier: MIT
// The /ui page (agent/api_ui.c, docs/ui.md): processes, a CPU flame graph, live metrics, downloads.
// The token lives in the variable `token` only: never in storage, a cookie or a URL. Every data
// request sends it as `Authorization: Bearer`; names from the API are inserted as text only.
'use strict';

(() => {
  let token = '';           // the API token, in memory only
  let selected = null;      // {pid, uid, name}
  let metricsAbort = null;  // AbortController of the live metrics stream
  let profiling = 0;        // a counter: a newer profile supersedes an older one
  let profileAbort = null;  // AbortController of the profile in flight (ends its session early)
  const series = new Map(); // metric name -> {unit, points: [[t, v]]}
  const $ = (id) => document.getElementById(id);

  function headers() {
    return token ? { Authorization: 'Bearer ' + token } : {};
  }

  // fetch with the token; throws an Error with the problem's words when the answer is not 2xx.
  async function api(path, opts) {
    const r = await fetch(path, Object.assign({ headers: headers(), cache: 'no-store' }, opts || {}));
    if (!r.ok) {
      let msg = r.status + ' ' + r.statusText;
      try {
        const ct = r.headers.get('Content-Type') || '';
        if (ct.includes('json')) {
          const p = await r.json();
          msg = (p.status || r.status) + ' ' + (p.title || r.statusText) +
            (p.detail ? ': ' + p.detail : '') + (p.reason ? ' (' + p.reason + ')' : '');
        }
      } catch (e) { /* the status line is all there is */ }
      const err = new Error(msg);
      err.status = r.status;
      throw err;
    }
    return r;
  }

  function showError(what, e) {
    if (e && e.name === 'AbortError') {
      return;
    }
    const box = $('error');
    box.textContent = what + ': ' + (e && e.message ? e.message : String(e));
    box.hidden = false;
  }

  function clearError() {
    $('error').hidden = true;
    $('error').textContent = '';
  }

  function q(params) {
    return Object.entries(params).map(([k, v]) => encodeURIComponent(k) + '=' + encodeURIComponent(v)).join('&');
  }

  // ---- authentication and the process list ----

  function useToken() {
    const input = $('token');
    // Accept the token alone or as printed by dotmon ("Authorization: Bearer …").
    token = input.value.trim().replace(/^authorization:\s*/i, '').replace(/^bearer\s+/i, '');
    input.value = ''; // out of the DOM: only the variable holds it
    loadProcesses();
  }

  async function loadProcesses() {
    clearError();
    try {
      const list = await (await api('/processes')).json();
      $('auth-state').textContent = token ? 'connected with a token' : 'connected without a token';
      $('refresh').disabled = false;
      const details = await Promise.all(list.map((p) =>
        api('/process?' + q({ uid: p.uid })).then((r) => r.json()).catch(() => ({}))));
      renderProcesses(list, details);
    } catch (e) {
      $('auth-state').textContent = e.status === 401 || e.status === 403 ? 'token refused' : 'not connected';
      showError('GET /processes', e);
    }
  }

  function renderProcesses(list, details) {
    const body = $('process-table').tBodies[0];
    body.textContent = '';
    list.forEach((p, i) => {
      const tr = document.createElement('tr');
      tr.dataset.pid = String(p.pid);
      tr.dataset.uid = p.uid;
      for (const [text, cls] of [[String(p.pid), 'pid'], [p.name || '', 'name'], [details[i].commandLine || '', 'cmd']]) {
        const td = document.createElement('td');
        td.className = cls;
        td.textContent = text;
        tr.appendChild(td);
      }
      if (selected && selected.uid === p.uid) {
        tr.classList.add('selected');
      }
      tr.addEventListener('click', () => select(p, tr));
      body.appendChild(tr);
    });
    if (list.length === 0) {
      const tr = document.createElement('tr');
      const td = document.createElement('td');
      td.colSpan = 3;
      td.textContent = 'no .NET process found';
      tr.appendChild(td);
      body.appendChild(tr);
    }
  }

  function select(p, tr) {
    for (const row of $('process-table').querySelectorAll('tr.selected')) {
      row.classList.remove('selected');
    }
    tr.classList.add('selected');
    selected = { pid: p.pid, uid: p.uid, name: p.name };
    $('detail').hidden = false;
    $('detail-title').textContent = p.name + ' (pid ' + p.pid + ')';
    clearError();
    profile();
    startMetrics();
  }

  // ---- CPU profile and flame graph ----

  async function profile() {
    if (!selected) {
      return;
    }
    const me = ++profiling;
    if (profileAbort) {
      profileAbort.abort(); // dotmon stops the superseded session when its client leaves
    }
    const ctl = new AbortController();
    profileAbort = ctl;
    const d = Math.max(1, Math.min(300, parseInt($('duration').value, 10) || 3));
    const flame = $('flame');
    flame.dataset.state = 'running';
    flame.dataset.topFrame = '';
    flame.textContent = '';
    flame.style.height = '';
    flameView.doc = null;
    flameView.root = null;
    $('flame-top').textContent = '';
    $('flame-crumbs').textContent = '';
    $('flame-match').textContent = '';
    $('flame-detail').textContent = '';
    const threads = $('flame-thread');
    threads.length = 1;
    threads.value = '';
    $('flame-status').textContent = 'profiling pid ' + selected.pid + ' for ' + d + ' s…';
    $('profile').disabled = true;
    try {
      const r = await api('/profile?' + q({ uid: selected.uid, kind: 'cpu', durationSeconds: d, format: 'flame' }),
        { signal: ctl.signal });
      const doc = await r.json();
      if (me === profiling) {
        drawFlame(doc);
      }
    } catch (e) {
      if (me === profiling) {
        flame.dataset.state = 'error';
        $('flame-status').textContent = 'the profile failed';
        showError('GET /profile', e);
      }
    } finally {
      if (me === profiling) {
        $('profile').disabled = false;
        profileAbort = null;
      }
    }
  }

  // ---- the flame graph: an icicle of the profile's stacks, one thread or all ----

  const names = globalThis.dotmonNames;
  const ROW = 22;                           // px per row (app.css .frame)
  const flameView = {
    doc: null,       // the /profile?format=flame document
    thread: '',      // '' (every thread) or an index into doc.threadIds
    root: null,      // the tree of the selected thread(s)
    total: 0,        // its samples
    hot: null,       // the hottest frame by self samples (raw name), over every thread
    zoom: [],        // the zoomed frame as the path of raw names below the root
  };

  function methodOf(name) {
    const i = name.indexOf('!');
    return i >= 0 ? name.slice(i + 1) : name;
  }

  // Each stack's samples for the selection: every thread (the stack's own count) or one thread
  // (its threadStacks entries).
  function stackCounts(doc, thread) {
    if (thread === '') {
      return doc.stacks.map((st) => st[0]);
    }
    const counts = new Array(doc.stacks.length).fill(0);
    const t = Number(thread);
    for (const [ti, si, n] of doc.threadStacks || []) {
      if (ti === t) {
        counts[si] += n;
      }
    }
    return counts;
  }

  // The stacks as a tree with inclusive (value) and exclusive (self) samples per node; a leaf
  // helper such as Thread.PollGC is folded into its caller, as /profile counts them. Also the
  // self samples per frame name (for the hottest frame).
  function buildTree(doc, thread) {
    const skips = doc.exclusiveSkips || [];
    const skipped = doc.frames.map((n) => skips.some((s) => methodOf(n).startsWith(s)));
    const root = { name: '', value: 0, self: 0, children: new Map(), parent: null };
    const selfByName = new Map();
    const counts = stackCounts(doc, thread);
    doc.stacks.forEach((st, i) => {
      const count = counts[i];
      if (count === 0) {
        return;
      }
      let end = st.length;
      while (end > 2 && skipped[st[end - 1]]) {
        end--;
      }
      root.value += count;
      let node = root;
      for (let k = 1; k < end; k++) {
        const name = doc.frames[st[k]];
        let child = node.children.get(name);
        if (!child) {
          child = { name, value: 0, self: 0, children: new Map(), parent: node };
          node.children.set(name, child);
        }
        child.value += count;
        node = child;
      }
      node.self += count;
      if (end > 1) {
        const leaf = doc.frames[st[end - 1]];
        selfByName.set(leaf, (selfByName.get(leaf) || 0) + count);
      }
    });
    return { root, selfByName };
  }

  function hottest(selfByName) {
    let top = null;
    for (const [name, n] of selfByName) {
      if (!top || n > top[1] || (n === top[1] && name < top[0])) {
        top = [name, n];
      }
    }
    return top;
  }

  function pctOf(n, total) {
    return (100 * n / (total || 1)).toFixed(1);
  }

  function drawFlame(doc) {
    const flame = $('flame');
    flameView.doc = doc;
    flameView.thread = '';
    flameView.zoom = [];
    const all = buildTree(doc, '');
    const top = hottest(all.selfByName);
    flameView.hot = top ? top[0] : null;
    const total = all.root.value;
    $('flame-status').textContent = total + ' samples in managed code on ' + doc.threads + ' threads over ' +
      doc.durationSeconds + ' s (' + doc.externalSamples + ' samples of waiting threads left out). ' +
      'Width is the share of samples.';
    const topEl = $('flame-top');
    topEl.textContent = '';
    if (top) {
      const pct = pctOf(top[1], total);
      topEl.textContent = 'Hottest (self): ' + names.displayName(top[0]) + ' — ' + pct + '% of samples';
      topEl.title = top[0];
      flame.dataset.topFrame = top[0];
      flame.dataset.topPercent = pct;
    }
    fillThreads(doc, total);
    $('flame-detail').textContent = 'Hover a frame for its numbers; click it to zoom in, click a name above to zoom back out.';
    flame.dataset.state = total > 0 ? 'done' : 'empty';
    selectThread('');
  }

  // The thread select: every thread, then each thread with managed samples, most samples first.
  function fillThreads(doc, total) {
    const sel = $('flame-thread');
    sel.textContent = '';
    const opt = (value, text) => {
      const o = document.createElement('option');
      o.value = value;
      o.textContent = text;
      sel.appendChild(o);
    };
    opt('', 'all threads (' + total + ' samples)');
    const per = (doc.threadIds || []).map((id, i) => ({ id, i, n: 0 }));
    for (const [ti, , n] of doc.threadStacks || []) {
      per[ti].n += n;
    }
    per.sort((a, b) => b.n - a.n || a.id - b.id);
    for (const t of per) {
      opt(String(t.i), 'thread ' + t.id + ' (' + t.n + (t.n === 1 ? ' sample, ' : ' samples, ') + pctOf(t.n, total) + '%)');
    }
    sel.value = '';
  }

  function selectThread(thread) {
    const flame = $('flame');
    flameView.thread = thread;
    const { root } = buildTree(flameView.doc, thread);
    flameView.root = root;
    flameView.total = root.value;
    flame.dataset.thread = thread === '' ? '' : String(flameView.doc.threadIds[Number(thread)]);
    flame.dataset.samples = String(root.value);
    renderFlame();
  }

  // The zoomed node: the longest prefix of the zoom path found in the tree (a thread without
  // the frame zooms out as far as needed).
  function zoomNode() {
    let node = flameView.root;
    let depth = 0;
    for (const name of flameView.zoom) {
      const child = node.children.get(name);
      if (!child) {
        break;
      }
      node = child;
      depth++;
    }
    flameView.zoom.length = depth;
    return node;
  }

  function zoomTo(node) {
    const path = [];
    for (let n = node; n && n.parent; n = n.parent) {
      path.unshift(n.name);
    }
    flameView.zoom = path;
    renderFlame();
  }

  function rootLabel() {
    const t = flameView.thread;
    return (t === '' ? 'all threads' : 'thread ' + flameView.doc.threadIds[Number(t)]) +
      ' (' + flameView.total + ' samples)';
  }

  function frameTitle(n) {
    const total = flameView.total;
    return (n.parent ? n.name + '\n' : rootLabel() + '\n') + 'inclusive ' + n.value + ' samples (' + pctOf(n.value, total) +
      '%), exclusive ' + n.self + ' samples (' + pctOf(n.self, total) + '%)';
  }

  function showDetail(n) {
    const total = flameView.total;
    const head = n.parent ? names.displayName(n.name) : rootLabel();
    $('flame-detail').textContent = head + ' — inclusive ' + pctOf(n.value, total) + '% (' + n.value +
      ' samples), exclusive ' + pctOf(n.self, total) + '% (' + n.self + ' samples)' +
      (n.parent && names.displayName(n.name) !== n.name ? '\n' + n.name : '');
  }

  // The breadcrumb: the root, then each frame down to the zoomed one; a click zooms back there.
  function renderCrumbs(node) {
    const nav = $('flame-crumbs');
    nav.textContent = '';
    const chain = [];
    for (let n = node; n; n = n.parent) {
      chain.unshift(n);
    }
    chain.forEach((n, i) => {
      if (i > 0) {
        const sep = document.createElement('span');
        sep.className = 'crumb-sep';
        sep.textContent = '›';
        nav.appendChild(sep);
      }
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'crumb';
      b.textContent = n.parent ? names.displayName(n.name) : rootLabel();
      b.title = n.parent ? n.name : 'zoom out to every frame';
      b.dataset.name = n.name;
      if (i === chain.length - 1) {
        b.setAttribute('aria-current', 'true');
      } else {
        b.addEventListener('click', () => zoomTo(n));
      }
      nav.appendChild(b);
    });
  }

  // An icicle graph (callers on top) of the zoomed node, in absolutely placed divs whose left and
  // width are percents: the zoomed node is the full-width first row, with its name.
  function renderFlame() {
    const flame = $('flame');
    flame.textContent = '';
    const zoomed = zoomNode();
    renderCrumbs(zoomed);
    flame.dataset.zoom = zoomed.name;
    const hot = flameView.hot;
    const px = flame.clientWidth || 1000;
    let depth = 0;
    const place = (n, x, level, full) => {
      const w = n.value / full;
      if (w < 0.002) {
        return;
      }
      depth = Math.max(depth, level + 1);
      const el = document.createElement('div');
      el.className = 'frame ' + (!n.parent ? 'root' : level === 0 ? 'zoomed' : 'c' + (hash(n.name) % 5));
      if (n.name === hot && n.parent) {
        el.classList.add('hot');
        el.dataset.hot = 'true';
      }
      el.style.left = (100 * x) + '%';
      el.style.width = (100 * w) + '%';
      el.style.top = (level * ROW) + 'px';
      // Too narrow for a few letters: no text (the title and the detail line still name it).
      el.textContent = px * w < 30 ? '' : n.parent ? names.displayName(n.name) : rootLabel();
      el.title = frameTitle(n);
      el.dataset.name = n.name;
      el.dataset.display = n.parent ? names.displayName(n.name) : '';
      el.dataset.percent = pctOf(n.value, flameView.total);
      el.dataset.self = pctOf(n.self, flameView.total);
      el.dataset.level = String(level);
      el.addEventListener('click', () => zoomTo(level === 0 && n.parent ? n.parent : n));
      el.addEventListener('mouseenter', () => showDetail(n));
      flame.appendChild(el);
      el.frameNode = n;
      let cx = x;
      const kids = [...n.children.values()].sort((a, b) => b.value - a.value || (a.name < b.name ? -1 : 1));
      for (const c of kids) {
        place(c, cx, level + 1, full);
        cx += c.value / full;
      }
    };
    place(zoomed, 0, 0, zoomed.value || 1);
    flame.style.height = (depth * ROW + 2) + 'px';
    highlight();
  }

  // Search: frames whose shown or raw name holds the text (any case) are highlighted, the others
  // dimmed; the share is of the selection's samples with a matching frame on the stack.
  function highlight() {
    const flame = $('flame');
    const text = $('flame-search').value.trim().toLowerCase();
    const info = $('flame-match');
    const hit = (n) => n.parent !== null && (n.name.toLowerCase().includes(text) ||
      names.displayName(n.name).toLowerCase().includes(text));
    flame.classList.toggle('searching', text !== '');
    let shown = 0;
    for (const el of flame.querySelectorAll('.frame')) {
      const m = text !== '' && hit(el.frameNode);
      el.classList.toggle('match', m);
      shown += m ? 1 : 0;
    }
    if (text === '' || !flameView.root) {
      info.textContent = '';
      flame.dataset.matchPercent = '';
      return;
    }
    let samples = 0;
    let frames = 0;
    const walk = (n, under) => {
      const m = hit(n);
      frames += m ? 1 : 0;
      if (m && !under) {
        samples += n.value;
      }
      for (const c of n.children.values()) {
        walk(c, under || m);
      }
    };
    walk(flameView.root, false);
    const pct = pctOf(samples, flameView.total);
    flame.dataset.matchPercent = pct;
    info.textContent = frames === 0 ? 'no frame matches'
      : (frames === 1 ? '1 frame matches' : frames + ' frames match') + ' (' + shown + ' shown): ' + pct + '% of samples';
  }

  function hash(s) {
    let h = 0;
    for (let i = 0; i < s.length; i++) {
      h = (h * 31 + s.charCodeAt(i)) | 0;
    }
    return Math.abs(h);
  }

  // ---- live metrics ----

  function stopMetrics() {
    if (metricsAbort) {
      metricsAbort.abort();
      metricsAbort = null;
    }
    $('metrics-toggle').textContent = 'Start';
  }

  async function startMetrics() {
    stopMetrics();
    series.clear();
    fillSelects();
    drawCharts();
    if (!selected) {
      return;
    }
    const ctl = new AbortController();
    metricsAbort = ctl;
    $('metrics-toggle').textContent = 'Stop';
    const uid = selected.uid;
    try {
      // A stream of 0x1E-prefixed JSON records (application/json-seq), one per counter value.
      let pause = 0;
      while (metricsAbort === ctl) {
        // A stream that ends early (the 300 s are up, or dotmon closed it) is asked for again,
        // after a pause that grows while streams keep ending within a few seconds.
        if (pause > 0) {
          await new Promise((resolve) => setTimeout(resolve, pause));
          if (metricsAbort !== ctl) {
            break;
          }
        }
        const began = Date.now();
        const r = await api('/livemetrics?' + q({ uid, durationSeconds: 300 }), { signal: ctl.signal });
        const reader = r.body.getReader();
        const dec = new TextDecoder();
        let pending = '';
        for (;;) {
          const { done, value } = await reader.read();
          if (done) {
            break;
          }
          pending += dec.decode(value, { stream: true });
          const parts = pending.split('\x1e');
          pending = parts.pop();
          for (const rec of parts) {
            record(rec);
          }
          if (pending.endsWith('\n')) {
            record(pending);
            pending = '';
          }
        }
        pause = Date.now() - began < 5000 ? Math.min(Math.max(pause * 2, 1000), 30000) : 0;
      }
    } catch (e) {
      if (metricsAbort === ctl) {
        metricsAbort = null;
        $('metrics-toggle').textContent = 'Start';
        showError('GET /livemetrics', e);
      }
    }
  }

  function record(text) {
    text = text.trim();
    if (!text) {
      return;
    }
    let m;
    try {
      m = JSON.parse(text);
    } catch (e) {
      return;
    }
    const key = m.tags ? m.name + ' [' + m.tags + ']' : m.name;
    let s = series.get(key);
    if (!s) {
      s = { unit: m.unit || '', display: m.displayName || m.name, points: [] };
      series.set(key, s);
      fillSelects();
    }
    s.points.push([Date.parse(m.timestamp) || Date.now(), Number(m.value)]);
    if (s.points.length > 120) {
      s.points.shift();
    }
    drawCharts();
  }

  function fillSelects() {
    for (const [id, def] of [['metric-a', 'cpu-usage'], ['metric-b', 'gc-heap-size']]) {
      const sel = $(id);
      const cur = sel.value || def;
      const names = [...series.keys()].sort();
      if (!names.includes(cur)) {
        names.unshift(cur);
      }
      if (sel.options.length === names.length) {
        continue;
      }
      sel.textContent = '';
      for (const n of names) {
        const o = document.createElement('option');
        o.value = n;
        o.textContent = n;
        sel.appendChild(o);
      }
      sel.value = cur;
    }
  }

  function drawCharts() {
    drawChart($('chart-a'), $('metric-a').value);
    drawChart($('chart-b'), $('metric-b').value);
  }

  // How a metric's unit is shown: kind (bytes, percent, seconds, count or other), the factor that
  // turns a value into the kind's base unit, and whether the axis starts at zero (amounts do:
  // a 20 -> 16 MB dip is a small dip, not a cliff).
  function unitOf(unit, name) {
    const u = (unit || '').trim();
    const bytes = { B: 1, By: 1, bytes: 1, byte: 1, KB: 1e3, kB: 1e3, MB: 1e6, GB: 1e9, KiB: 1024, MiB: 1048576, GiB: 1073741824 };
    if (u in bytes) {
      return { kind: 'bytes', factor: bytes[u], zero: true };
    }
    if (u === '%' || u === 'percent') {
      return { kind: 'percent', factor: 1, zero: true };
    }
    if (u === '1' && /ratio|utilization/i.test(name)) {
      return { kind: 'percent', factor: 100, zero: true };
    }
    const secs = { s: 1, sec: 1, seconds: 1, ms: 1e-3, us: 1e-6, 'µs': 1e-6, ns: 1e-9 };
    if (u in secs) {
      return { kind: 'seconds', factor: secs[u], zero: true };
    }
    if (u === '' || u === '1' || u === 'count' || /^\{.*\}$/.test(u)) {
      return { kind: 'count', factor: 1, zero: true, label: u.replace(/^\{(.*)\}$/, '$1') };
    }
    return { kind: 'other', factor: 1, zero: false, label: u };
  }

  // For an axis up to hi (in the kind's base unit): the divisor and suffix of its labels.
  function scaleOf(u, hi) {
    const pick = (steps) => steps.reduce((best, s) => (hi >= s[0] ? s : best), steps[0]);
    switch (u.kind) {
    case 'bytes':
      return pick([[1, ' B'], [1024, ' KiB'], [1048576, ' MiB'], [1073741824, ' GiB'], [1099511627776, ' TiB']]);
    case 'percent':
      return [1, '%'];
    case 'seconds':
      return pick([[1e-9, ' ns'], [1e-6, ' µs'], [1e-3, ' ms'], [1, ' s']]);
    case 'count': {
      const s = pick([[1, ''], [1e3, 'k'], [1e6, 'M'], [1e9, 'G']]);
      return [s[0], s[1] + (u.label ? ' ' + u.label : '')];
    }
    default:
      return [1, u.label ? ' ' + u.label : ''];
    }
  }

  // About n round tick values (1, 2 or 5 times a power of ten apart) from the last one at or
  // below lo to the first one at or above hi.
  function ticks(lo, hi, n) {
    const raw = (hi - lo) / n;
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw) || 10 * p;
    const out = [];
    const first = Math.floor(lo / step + 1e-9), last = Math.ceil(hi / step - 1e-9);
    for (let k = first; k <= last; k++) {
      out.push(k === 0 ? 0 : k * step);
    }
    return { step, values: out };
  }

  function label(v, div, suffix, step) {
    const x = v / div;
    const digits = Math.max(0, Math.min(3, -Math.floor(Math.log10(step / div) + 1e-9)));
    return x.toFixed(digits) + suffix;
  }

  function clock(t) {
    const d = new Date(t);
    return [d.getHours(), d.getMinutes(), d.getSeconds()].map((x) => String(x).padStart(2, '0')).join(':');
  }

  const SVG = 'http://www.w3.org/2000/svg';
  function svgEl(parent, tag, attrs, text) {
    const el = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) {
      el.setAttribute(k, String(v));
    }
    if (text !== undefined) {
      el.textContent = text;
    }
    parent.appendChild(el);
    return el;
  }

  // A line chart of the metric's last values: the title with the last value, a y axis with
  // gridlines and labels in the metric's unit, an x axis of clock times.
  function drawChart(svg, name) {
    svg.textContent = '';
    const W = svg.clientWidth || 600, H = svg.clientHeight || 220;
    svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
    const s = series.get(name);
    svg.dataset.metric = name || '';
    svg.dataset.points = String(s ? s.points.length : 0);
    if (!s || s.points.length === 0) {
      svgEl(svg, 'text', { x: 8, y: 20, class: 'waiting' }, (name || 'metric') + ': waiting for values…');
      return;
    }
    const u = unitOf(s.unit, name);
    const pts = s.points.map((p) => [p[0], p[1] * u.factor]);
    const vals = pts.map((p) => p[1]);
    let lo = Math.min(...vals), hi = Math.max(...vals);
    if (u.zero) {
      lo = Math.min(0, lo);
      hi = Math.max(0, hi);
    } else {
      const pad = (hi - lo) * 0.1 || Math.abs(hi) * 0.1 || 1;
      lo -= pad;
      hi += pad;
    }
    if (hi <= lo) {
      hi = lo + 1;
    }
    const [div, suffix] = scaleOf(u, Math.max(Math.abs(hi), Math.abs(lo)));
    const yt = ticks(lo / div, hi / div, 4);
    yt.values = yt.values.map((v) => v * div);
    yt.step *= div;
    lo = yt.values[0];
    hi = yt.values[yt.values.length - 1];
    svg.dataset.unit = suffix.trim();
    const last = pts[pts.length - 1][1];
    const fine = ticks(0, Math.max(Math.abs(last), Math.abs(hi)) / div || 1, 40).step * div;
    svgEl(svg, 'text', { x: 8, y: 16, class: 'title' }, s.display + ': ' + label(last, div, suffix, fine));
    const L = 64, R = 12, T = 28, B = 24;
    const t0 = pts[0][0], t1 = Math.max(pts[pts.length - 1][0], t0 + 1000);
    const X = (t) => L + (W - L - R) * (t - t0) / (t1 - t0);
    const Y = (v) => T + (H - T - B) * (1 - (v - lo) / (hi - lo));
    const yAxis = svgEl(svg, 'g', { class: 'axis y-axis' });
    for (const v of yt.values) {
      const y = Y(v).toFixed(1);
      svgEl(svg, 'line', { class: 'grid', x1: L, x2: W - R, y1: y, y2: y });
      svgEl(yAxis, 'line', { class: 'tick', x1: L - 4, x2: L, y1: y, y2: y });
      svgEl(yAxis, 'text', { x: L - 6, y: Number(y) + 4, 'text-anchor': 'end' }, label(v, div, suffix, yt.step));
    }
    svgEl(yAxis, 'line', { class: 'base', x1: L, x2: L, y1: T, y2: H - B });
    const xAxis = svgEl(svg, 'g', { class: 'axis x-axis' });
    svgEl(xAxis, 'line', { class: 'base', x1: L, x2: W - R, y1: H - B, y2: H - B });
    const span = (t1 - t0) / 1000;
    const want = Math.max(2, Math.floor((W - L - R) / 90));
    const step = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600].find((x) => span / x <= want) || 3600;
    for (let t = Math.ceil(t0 / 1000 / step) * step * 1000; t <= t1; t += step * 1000) {
      const x = X(t).toFixed(1);
      svgEl(xAxis, 'line', { class: 'tick', x1: x, x2: x, y1: H - B, y2: H - B + 4 });
      svgEl(xAxis, 'text', { x, y: H - 6, 'text-anchor': 'middle' }, clock(t));
    }
    const line = pts.map((p, i) => (i === 0 ? 'M' : 'L') + X(pts.length === 1 ? t1 : p[0]).toFixed(1) + ',' + Y(p[1]).toFixed(1)).join(' ');
    if (pts.length > 1) {
      svgEl(svg, 'path', { class: 'area', d: line + ' L' + X(t1).toFixed(1) + ',' + Y(Math.max(lo, 0)).toFixed(1) + ' L' +
        X(t0).toFixed(1) + ',' + Y(Math.max(lo, 0)).toFixed(1) + ' Z' });
    }
    svgEl(svg, 'path', { class: 'line', d: pts.length === 1 ? line + ' h-3' : line });
  }

  // ---- downloads: fetched with the token, then saved from a Blob URL ----

  async function download(kind) {
    if (!selected) {
      return;
    }
    const params = { uid: selected.uid };
    if (kind === 'trace') {
      params.durationSeconds = Math.max(1, Math.min(300, parseInt($('duration').value, 10) || 3));
    } else if (kind === 'dump') {
      params.type = $('dump-type').value;
    }
    const state = $('download-state');
    state.textContent = kind + ': collecting…';
    try {
      const r = await api('/' + kind + '?' + q(params));
      const blob = await r.blob();
      const cd = r.headers.get('Content-Disposition') || '';
      const m = /filename="?([^";]+)"?/.exec(cd);
      const a = document.createElement('a');
      a.href = URL.createObjectURL(blob);
      a.download = m ? m[1] : kind + '_' + selected.pid;
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 60000);
      state.textContent = kind + ': ' + blob.size + ' bytes saved as ' + a.download;
    } catch (e) {
      state.textContent = kind + ': failed';
      showError('GET /' + kind, e);
    }
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('connect').addEventListener('click', useToken);
    $('token').addEventListener('keydown', (e) => {
      if (e.key === 'Enter') {
        useToken();
      }
    });
    $('refresh').addEventListener('click', loadProcesses);
    $('profile').addEventListener('click', profile);
    $('metrics-toggle').addEventListener('click', () => (metricsAbort ? stopMetrics() : startMetrics()));
    $('metric-a').addEventListener('change', drawCharts);
    $('metric-b').addEventListener('change', drawCharts);
    $('flame-thread').addEventListener('change', (e) => {
      if (flameView.doc) {
        selectThread(e.target.value);
      }
    });
    $('flame-search').addEventListener('input', highlight);
    let resize = 0;
    window.addEventListener('resize', () => {
      clearTimeout(resize);
      resize = setTimeout(() => {
        drawCharts();
        if (flameView.root) {
          renderFlame();
        }
      }, 100);
    });
    for (const b of document.querySelectorAll('button[data-artifact]')) {
      b.addEventListener('click', () => download(b.dataset.artifact));
    }
  });
})();
