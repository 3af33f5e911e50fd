// SPDX-License-Identifier: MIT
// The /ui page (agent/api_ui.c): processes, a CPU flame graph, live metrics, downloads.
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
    $('flame-top').textContent = '';
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

  // The method part of "Module!Namespace.Type.Method(args)".
  function methodOf(name) {
    const i = name.indexOf('!');
    return i >= 0 ? name.slice(i + 1) : name;
  }

  function shortName(name) {
    const m = methodOf(name);
    const i = m.indexOf('(');
    return i > 0 ? m.slice(0, i) : m;
  }

  // The profile's stacks as a tree (leaf helpers such as Thread.PollGC folded into their caller,
  // as /profile counts them), and the self samples per frame.
  function buildTree(doc) {
    const skips = doc.exclusiveSkips || [];
    const skipped = doc.frames.map((n) => skips.some((s) => methodOf(n).startsWith(s)));
    const root = { name: 'all', value: 0, children: new Map() };
    const self = new Map();
    for (const st of doc.stacks) {
      const count = st[0];
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
          child = { name, value: 0, children: new Map() };
          node.children.set(name, child);
        }
        child.value += count;
        node = child;
      }
      if (end > 1) {
        const leaf = doc.frames[st[end - 1]];
        self.set(leaf, (self.get(leaf) || 0) + count);
      }
    }
    return { root, self };
  }

  function drawFlame(doc) {
    const flame = $('flame');
    const { root, self } = buildTree(doc);
    let top = null;
    for (const [name, n] of self) {
      if (!top || n > top[1] || (n === top[1] && name < top[0])) {
        top = [name, n];
      }
    }
    const total = root.value;
    $('flame-status').textContent = total + ' samples in managed code on ' + doc.threads + ' threads over ' +
      doc.durationSeconds + ' s (' + doc.externalSamples + ' samples of waiting threads left out). ' +
      'Width is the share of samples; hover for the numbers, click to zoom.';
    if (top) {
      const pct = (100 * top[1] / total).toFixed(1);
      $('flame-top').textContent = 'Hottest (self): ' + top[0] + ' — ' + pct + '% of samples';
      flame.dataset.topFrame = top[0];
      flame.dataset.topPercent = pct;
    }
    flame.dataset.state = total > 0 ? 'done' : 'empty';
    flame.rootNode = root;
    render(flame, root, total, top ? top[0] : null);
  }

  // An icicle graph (callers on top) of node, in absolutely placed divs.
  function render(flame, node, total, hot) {
    flame.textContent = '';
    const rowH = 17;
    let depth = 0;
    const place = (n, x, level, full) => {
      const w = n.value / full;
      if (w < 0.002) {
        return;
      }
      depth = Math.max(depth, level + 1);
      const el = document.createElement('div');
      const pct = (100 * n.value / total).toFixed(1);
      el.className = 'frame ' + (level === 0 ? 'root' : 'c' + (hash(n.name) % 5));
      if (n.name === hot) {
        el.classList.add('hot');
        el.dataset.hot = 'true';
      }
      el.style.left = (100 * x) + '%';
      el.style.width = (100 * w) + '%';
      el.style.top = (level * rowH) + 'px';
      el.textContent = level === 0 ? 'all (' + n.value + ' samples)' : shortName(n.name);
      el.title = n.name + '\n' + n.value + ' samples, ' + pct + '%';
      el.dataset.name = n.name;
      el.dataset.percent = pct;
      el.addEventListener('click', () => render(flame, level === 0 ? flame.rootNode : n, total, hot));
      flame.appendChild(el);
      let cx = x;
      const kids = [...n.children.values()].sort((a, b) => b.value - a.value);
      for (const c of kids) {
        place(c, cx, level + 1, full);
        cx += c.value / full;
      }
    };
    place(node, 0, 0, node.value || 1);
    flame.style.height = (depth * rowH + 2) + 'px';
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

  function drawChart(canvas, name) {
    const g = canvas.getContext('2d');
    const W = canvas.width, H = canvas.height, pad = 22;
    g.clearRect(0, 0, W, H);
    g.font = '11px sans-serif';
    g.fillStyle = '#444';
    const s = series.get(name);
    canvas.dataset.metric = name || '';
    canvas.dataset.points = String(s ? s.points.length : 0);
    if (!s || s.points.length === 0) {
      g.fillText((name || 'metric') + ': waiting for values…', 6, 14);
      return;
    }
    const pts = s.points;
    const t0 = pts[0][0], t1 = Math.max(pts[pts.length - 1][0], t0 + 1);
    let lo = Math.min(0, ...pts.map((p) => p[1])), hi = Math.max(...pts.map((p) => p[1]));
    if (hi <= lo) {
      hi = lo + 1;
    }
    const last = pts[pts.length - 1][1];
    g.fillText(s.display + ': ' + fmt(last) + ' ' + s.unit + '   (max ' + fmt(hi) + ')', 6, 14);
    g.strokeStyle = '#ddd';
    g.beginPath();
    g.moveTo(pad, H - pad);
    g.lineTo(W - 4, H - pad);
    g.stroke();
    g.strokeStyle = '#2a6ebb';
    g.lineWidth = 2;
    g.beginPath();
    pts.forEach((p, i) => {
      const x = pad + (W - pad - 4) * (pts.length === 1 ? 1 : (p[0] - t0) / (t1 - t0));
      const y = H - pad - (H - pad - 22) * (p[1] - lo) / (hi - lo);
      if (i === 0) {
        g.moveTo(x, y);
      } else {
        g.lineTo(x, y);
      }
    });
    g.stroke();
    g.fillStyle = '#888';
    g.fillText(((t1 - t0) / 1000).toFixed(0) + ' s', W - 40, H - 6);
  }

  function fmt(v) {
    return Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(2);
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
    for (const b of document.querySelectorAll('button[data-artifact]')) {
      b.addEventListener('click', () => download(b.dataset.artifact));
    }
  });
})();
