// unwindlab's explorer: steps through a run event by event. The data (in
// the page, element #data) holds every event, the state cells each event
// changed, the timeline's slices and the samples; the state at an event is
// rebuilt from the nearest checkpoint (one every CHECK events, made at
// load) plus the changes after it, and only what is on screen is drawn.
'use strict';
(function () {
  const D = JSON.parse(document.getElementById('data').textContent);
  const N = D.ev.length;
  const CHECK = 256;
  const COLOURS = { u: '#4c9a2a', k: '#3867d6', s: '#a0a0a0', n: '#d63031' };
  const NAMES = { u: 'user', k: 'kernel', s: 'sleeping', n: 'NMI' };
  const el = (tag, attrs, text) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const fmt = (n) => n.toLocaleString('en-US');
  // Shared tables: strings, and stacks as nodes [parent, frame, rule].
  const S = D.str;
  function stack(n) {
    const out = [];
    for (; n >= 0; n = D.nodes[n][0]) out.push([S[D.nodes[n][1]], D.nodes[n][2] >= 0 ? S[D.nodes[n][2]] : null]);
    return out;
  }
  // A cell's value: a string's index, or [node] for a stack of code.
  const shown = (v) => (Array.isArray(v) ? stack(v[0]).map((f) => f[0]).join(' ← ') : S[v]);

  // Checkpoints: the state after events CHECK-1, 2*CHECK-1, ...
  const checkpoints = [];
  (function () {
    const st = new Array(D.keys.length).fill(null);
    for (let i = 0; i < N; i++) {
      for (const [k, v] of D.ch[i]) st[k] = v;
      if ((i + 1) % CHECK === 0) checkpoints.push(st.slice());
    }
  })();
  let cur = -1;
  let state = new Array(D.keys.length).fill(null);
  // The state after event `i`: the next one's changes from here when
  // stepping forward, else from the checkpoint below.
  function stateAt(i) {
    if (i === cur + 1) {
      for (const [k, v] of D.ch[i]) state[k] = v;
      return state;
    }
    const m = Math.floor((i + 1) / CHECK);
    const st = m > 0 ? checkpoints[m - 1].slice() : new Array(D.keys.length).fill(null);
    for (let j = m * CHECK; j <= i; j++) for (const [k, v] of D.ch[j]) st[k] = v;
    state = st;
    return state;
  }

  // Slices by row, sorted by start (a row's slices do not overlap).
  const rows = D.rows.map(() => []);
  for (const s of D.slices) rows[s[0]].push(s);
  // Samples by event: the sample an event belongs to, and by NMI order.
  const sampleOf = new Map();
  const byNmi = [];
  D.samples.forEach((s, k) => {
    for (const i of [s.nmi, s.unwind, s.callback]) if (i !== null && !sampleOf.has(i)) sampleOf.set(i, k);
    if (s.nmi !== null) byNmi.push([s.nmi, k]);
  });
  byNmi.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  function sampleFor(i) {
    if (sampleOf.has(i)) return sampleOf.get(i);
    let lo = 0, hi = byNmi.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (byNmi[m][0] <= i) lo = m + 1; else hi = m; }
    const tid = D.ev[i] ? D.ev[i][3] : null;
    for (let j = lo - 1; j >= 0 && j >= lo - 200; j--) {
      const s = D.samples[byNmi[j][1]];
      if (tid === null || s.tid === tid) return byNmi[j][1];
    }
    return lo > 0 ? byNmi[lo - 1][1] : null;
  }

  // The page.
  const app = document.getElementById('app');
  app.textContent = '';
  const header = el('header');
  header.append(el('h1', {}, 'unwindlab explorer: ' + D.title), el('p', { class: 'about' }, D.about));
  if (D.description) header.append(el('p', {}, D.description));
  app.append(header);
  const bar = el('div', { class: 'bar' });
  const prev = el('button', { id: 'prev', title: 'previous event (←)' }, '◀ event');
  const next = el('button', { id: 'next', title: 'next event (→)' }, 'event ▶');
  const tourButton = el('button', { id: 'tour-button', title: 'play the narration step by step (t)' }, 'Tour');
  const where = el('span', { class: 'where', id: 'where' });
  const help = el('span', { class: 'help' },
    '←/→ event · Shift ×10 · PgUp/PgDn ×100 · Home/End · +/− zoom · t tour, n/p its steps · s next sample');
  bar.append(prev, next, tourButton, where, help);
  app.append(bar);
  const scrub = el('input', { id: 'scrub', type: 'range', min: '0', max: String(Math.max(N - 1, 0)), value: '0' });
  app.append(scrub);
  const tourBox = el('div', { id: 'tour' });
  app.append(tourBox);
  const canvas = el('canvas', { id: 'timeline' });
  app.append(canvas);
  const legend = el('div', { class: 'legend' });
  for (const [k, name] of Object.entries(NAMES)) {
    const sw = el('span');
    sw.style.background = COLOURS[k];
    legend.append(sw, document.createTextNode(name));
  }
  legend.append(document.createTextNode('   → request to its callback · | the current event'));
  app.append(legend);
  const list = el('div', { id: 'events' });
  app.append(list);
  const panels = el('div', { id: 'panels' });
  const statePanel = el('div', { id: 'state' });
  const stackPanel = el('div', { id: 'stack' });
  panels.append(statePanel, stackPanel);
  app.append(panels);

  let zoom = 120; // events across the timeline
  const LABEL = 130, ROW = 18, TOP = 14;
  function drawTimeline() {
    const width = Math.max(600, canvas.parentElement.clientWidth - 2);
    const height = TOP + ROW * D.rows.length + 6;
    const ratio = window.devicePixelRatio || 1;
    canvas.width = width * ratio; canvas.height = height * ratio;
    canvas.style.height = height + 'px';
    const g = canvas.getContext('2d');
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, width, height);
    const lo = Math.max(0, cur - Math.floor(zoom / 2));
    const hi = Math.min(N, lo + zoom);
    const span = Math.max(hi - lo, 1);
    const x = (i) => LABEL + ((i - lo) / span) * (width - LABEL - 4);
    g.font = '11px DejaVu Sans, sans-serif';
    g.fillStyle = '#222';
    D.rows.forEach((name, r) => {
      g.fillStyle = '#222';
      g.fillText(name.slice(0, 20), 4, TOP + r * ROW + 12);
      const slices = rows[r];
      // Slices overlapping [lo, hi): binary search on start, then back.
      let a = 0, b = slices.length;
      while (a < b) { const m = (a + b) >> 1; if (slices[m][1] < hi) a = m + 1; else b = m; }
      for (let j = a - 1; j >= 0; j--) {
        const s = slices[j];
        if (s[2] <= lo) break; // a row's slices do not overlap
        g.fillStyle = COLOURS[s[3]] || '#ddd';
        const x0 = x(Math.max(s[1], lo)), x1 = x(Math.min(s[2], hi));
        g.fillRect(x0, TOP + r * ROW + 2, Math.max(x1 - x0, 1), ROW - 5);
      }
    });
    g.strokeStyle = '#8250df';
    g.fillStyle = '#8250df';
    const rowOf = (i) => D.ev[i][2];
    for (const [a, b] of D.flows) {
      if (b < lo || a >= hi) continue;
      const x0 = x(a), x1 = x(b);
      const y0 = TOP + rowOf(a) * ROW + 8, y1 = TOP + rowOf(b) * ROW + 8;
      g.beginPath(); g.moveTo(x0, y0); g.lineTo(x1, y1); g.stroke();
      g.beginPath(); g.arc(x1, y1, 2.5, 0, 7); g.fill();
    }
    g.strokeStyle = '#000';
    g.beginPath(); g.moveTo(x(cur) + 0.5, 0); g.lineTo(x(cur) + 0.5, height); g.stroke();
    g.fillStyle = '#222';
    g.fillText('events ' + fmt(lo) + '–' + fmt(hi - 1), LABEL, 10);
    canvas.onmousedown = canvas.onmousemove = (ev) => {
      if (ev.type === 'mousemove' && !(ev.buttons & 1)) return;
      const r = canvas.getBoundingClientRect();
      const i = Math.round(lo + ((ev.clientX - r.left - LABEL) / (width - LABEL - 4)) * span);
      go(Math.min(Math.max(i, 0), N - 1));
    };
  }

  function drawList() {
    list.textContent = '';
    const from = Math.max(0, Math.min(cur - 4, N - 10));
    for (let i = from; i < Math.min(N, from + 10); i++) {
      const [seq, time, cpu, tid, kind, words] = D.ev[i];
      const row = el('div', { class: i === cur ? 'cur' : '', 'data-event': String(i) });
      row.append(el('span', { class: 'at' }, '#' + seq + ' t=' + fmt(time) + ' CPU ' + cpu + (tid === null ? '' : ' task ' + tid)),
        el('span', { class: 'k' }, S[kind]), document.createTextNode(S[words]));
      row.onclick = () => go(i);
      list.append(row);
    }
  }

  function drawState() {
    statePanel.textContent = '';
    statePanel.append(el('h2', { class: 'p' }, 'Kernel state after this event'));
    const changed = new Set(cur >= 0 ? D.ch[cur].map((c) => c[0]) : []);
    const bySection = new Map();
    D.keys.forEach(([label, rank, field], k) => {
      // A section's label already says its task's and tracer's names.
      if (state[k] === null || state[k] === undefined || field === 'comm' || field === 'name') return;
      if (!bySection.has(label)) bySection.set(label, { rank, cells: [] });
      bySection.get(label).cells.push([field, shown(state[k]), k]);
    });
    const sections = [...bySection.entries()].sort((a, b) => a[1].rank - b[1].rank
      || a[0].localeCompare(b[0], 'en', { numeric: true }));
    const table = el('table');
    for (const [label, { cells }] of sections) {
      const head = el('tr');
      head.append(el('th', { class: 'sec', colspan: '2' }, label));
      table.append(head);
      for (const [field, value, k] of cells) {
        const tr = el('tr', { 'data-section': label, 'data-field': field, class: changed.has(k) ? 'changed' : '' });
        tr.append(el('td', { class: 'f' }, field), el('td', { class: 'v' }, value));
        table.append(tr);
      }
    }
    statePanel.append(table);
  }

  function drawStack() {
    stackPanel.textContent = '';
    const k = cur >= 0 ? sampleFor(cur) : null;
    stackPanel.append(el('h2', { class: 'p' }, 'User stack of the sample at hand'));
    if (k === null || k === undefined) {
      stackPanel.append(el('p', {}, 'No sample yet.'));
      return;
    }
    const s = D.samples[k];
    const p = el('p', { id: 'sample' });
    p.append(document.createTextNode('Sample ' + s.n + ' (' + s.tracer + ', task ' + s.tid + ', CPU ' + s.cpu
      + (s.cookie ? ', cookie ' + s.cookie : '') + '): '));
    const v = el('b', { class: s.verdict }, S[s.why]);
    p.append(v);
    stackPanel.append(p);
    const links = el('p');
    for (const [name, i] of [['its NMI', s.nmi], ['its walk', s.unwind], ['its callback', s.callback]]) {
      if (i === null) continue;
      const a = el('button', {}, name + ' (event ' + fmt(i) + ')');
      a.onclick = () => go(i);
      links.append(a, document.createTextNode(' '));
    }
    stackPanel.append(links);
    const table = el('table');
    const head = el('tr');
    head.append(el('th', {}, '#'), el('th', {}, 'ground truth (the emulator)'), el('th', {}, 'what the walk delivered, and the rule that found it'));
    table.append(head);
    const got = s.got === null ? [] : stack(s.got);
    const truth = stack(s.truth).map((f) => f[0]);
    for (let j = 0; j < Math.max(truth.length, got.length); j++) {
      const tr = el('tr');
      tr.append(el('td', {}, String(j)), el('td', {}, truth[j] || ''));
      const td = el('td', { class: got[j] ? (got[j][0] === truth[j] ? 'ok' : 'no') : '' });
      if (got[j]) {
        td.append(document.createTextNode(got[j][0]), el('br'), el('span', { class: 'rule' }, got[j][1]));
      }
      tr.append(td);
      table.append(tr);
    }
    stackPanel.append(table);
    stackPanel.append(el('p', {}, s.got !== null ? 'The walk stopped: ' + (s.stop || 'in the NMI') + '.'
      : s.cookie_frame ? 'No stack reached the tracer: perf script shows the cookie as its user frame, '
        + s.cookie_frame + '.' : 'No stack reached the tracer.'));
  }

  // The tour: the narration's steps, each at its event.
  let tourStep = -1;
  function drawTour() {
    tourBox.className = tourStep >= 0 ? 'on' : '';
    tourBox.textContent = '';
    if (tourStep < 0) return;
    const [, text] = D.tour[tourStep];
    tourBox.append(el('span', { class: 'n' }, 'Tour ' + (tourStep + 1) + ' of ' + D.tour.length + ' · '),
      document.createTextNode(text), el('br'));
    const b = (label, f) => { const x = el('button', {}, label); x.onclick = f; tourBox.append(x, document.createTextNode(' ')); };
    b('◀ step (p)', () => tour(tourStep - 1));
    b('step ▶ (n)', () => tour(tourStep + 1));
    b('end tour (Esc)', () => tour(-1));
  }
  function tour(k) {
    if (!D.tour.length) return;
    tourStep = k < 0 ? -1 : Math.min(k, D.tour.length - 1);
    if (tourStep >= 0) go(D.tour[tourStep][0]); else drawTour();
  }

  function go(i) {
    if (N === 0) return;
    i = Math.min(Math.max(i, 0), N - 1);
    stateAt(i);
    cur = i;
    scrub.value = String(i);
    const [seq, time, cpu, tid, kind] = D.ev[i];
    where.textContent = 'event ' + fmt(i + 1) + ' of ' + fmt(N) + ' · seq ' + seq + ' · t=' + fmt(time)
      + ' · CPU ' + cpu + (tid === null ? '' : ' · task ' + tid) + ' · ' + S[kind];
    document.body.setAttribute('data-event', String(i));
    drawTimeline(); drawList(); drawState(); drawStack(); drawTour();
  }

  prev.onclick = () => go(cur - 1);
  next.onclick = () => go(cur + 1);
  tourButton.onclick = () => tour(tourStep >= 0 ? -1 : 0);
  scrub.oninput = () => go(Number(scrub.value));
  window.addEventListener('resize', drawTimeline);
  document.addEventListener('keydown', (e) => {
    const step = e.shiftKey ? 10 : 1;
    const keys = {
      ArrowRight: () => go(cur + step), ArrowLeft: () => go(cur - step),
      PageDown: () => go(cur + 100), PageUp: () => go(cur - 100),
      Home: () => go(0), End: () => go(N - 1),
      '+': () => { zoom = Math.max(20, Math.floor(zoom / 2)); drawTimeline(); },
      '-': () => { zoom = Math.min(N + 1, zoom * 2); drawTimeline(); },
      t: () => tour(tourStep >= 0 ? -1 : 0), n: () => tour(tourStep + 1), p: () => tour(Math.max(tourStep - 1, 0)),
      Escape: () => tour(-1),
      s: () => { const k = byNmi.find(([i]) => i > cur); if (k) go(k[0]); },
    };
    const f = keys[e.key];
    if (f) { e.preventDefault(); f(); }
  });
  go(0);
  // For scripts that wait for the page: ready, and how long opening took.
  window.explorer = { ready: true, events: N, openMs: performance.now(), current: () => cur };
})();
