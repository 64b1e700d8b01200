// rlpipe UI: a single page over the JSON API (/api/...), routed by the
// URL hash. No framework and no build step: views fetch JSON and build the
// DOM with h(); charts are inline SVG. Text from the store only ever goes
// into textContent or attributes, never into HTML.
'use strict';

const app = document.getElementById('app');
const live = document.getElementById('live');
const SVG = 'http://www.w3.org/2000/svg';
// EXACT_COLOR draws exact_pass@1, dashed: near black, apart from every
// pass@k colour (it is a different estimate of pass@1, not another k).
const EXACT_COLOR = '#111827';
const EXACT_NOTE = 'exact_pass@1: the expected pass@1 computed from the token probabilities, with no sampling noise ' +
  '(dashed where it differs from pass@1); pass@k: estimated from the n samples drawn per problem.';
const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777', '#4b5563', '#65a30d'];

// ---- DOM helpers -----------------------------------------------------------

// h builds an element: h('a', {href: '#/'}, 'text', child, [more children]).
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'style') el.style.cssText = v; // CSSOM: allowed by the page's CSP, unlike a style attribute
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined) el.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// table builds a table in a box that scrolls sideways when the table is
// wider than the page, so the page keeps its width.
function table(headers, rows, cls) {
  return h('div', {class: 'scroll'}, h('table', {class: cls || ''},
    h('thead', {}, h('tr', {}, headers.map((x) => h('th', {}, x)))),
    h('tbody', {}, rows)));
}

function section(title, ...children) {
  return h('section', {}, h('h2', {}, title), children);
}

// ---- formatting ------------------------------------------------------------

const short = (id) => (id || '').slice(0, 12);

function fmtNum(v, digits) {
  if (typeof v !== 'number') return v === null || v === undefined ? '' : String(v);
  if (Number.isInteger(v)) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(2);
  return v.toFixed(digits === undefined ? 4 : digits);
}

function fmtSecs(v) {
  if (typeof v !== 'number') return '';
  if (v < 1) return (v * 1000).toFixed(0) + ' ms';
  if (v < 120) return v.toFixed(2) + ' s';
  return (v / 60).toFixed(1) + ' min';
}

function fmtBytes(n) {
  if (typeof n !== 'number') return '';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(1)) + ' ' + units[i];
}

function fmtDate(s) {
  if (!s || s.startsWith('0001-')) return '';
  const d = new Date(s);
  return isNaN(d) ? s : d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

function lockText(l) {
  if (!l) return h('span', {class: 'muted'}, 'idle');
  if (!l.alive) return h('span', {class: 'badge stale', title: 'the holder is gone; the next run takes the lock over'}, `stale lock (pid ${l.pid} on ${l.host})`);
  return h('span', {class: 'badge running', title: `heartbeat ${fmtDate(l.heartbeat)}`}, `running: pid ${l.pid} on ${l.host}`);
}

// ---- routes ----------------------------------------------------------------

const enc = encodeURIComponent;
const encPath = (p) => p.split('/').map(enc).join('/');
const href = {
  runs: () => '#/',
  run: (r) => `#/runs/${enc(r)}`,
  iteration: (r, n) => `#/runs/${enc(r)}/iterations/${n}`,
  compare: (runs, rescored) => `#/compare?runs=${runs.map(enc).join(',')}` + (rescored && rescored.length ? `&rescored=${rescored.map(enc).join(',')}` : ''),
  branches: () => '#/branches',
  log: (ref) => `#/log/${enc(ref)}`,
  tree: (ref, prefix) => `#/tree/${enc(ref)}/${encPath(prefix || '')}`,
  table: (ref, path, offset) => `#/table/${enc(ref)}/${encPath(path)}` + (offset ? `?offset=${offset}` : ''),
  object: (ref, path) => `#/object/${enc(ref)}/${encPath(path)}`,
  episode: (ref, path, row) => `#/episode/${enc(ref)}/${encPath(path)}?row=${row}`,
};

function artifactLink(ref, path, label) {
  const isTable = path.endsWith('.parquet');
  return h('a', {href: isTable ? href.table(ref, path) : href.object(ref, path), title: `${ref}:${path}`}, label || path);
}

// cleanup runs when the route changes (closes event streams).
let cleanup = [];
let routeSeq = 0;

async function route() {
  cleanup.forEach((f) => f());
  cleanup = [];
  live.hidden = true;
  const seq = ++routeSeq;
  const raw = location.hash.replace(/^#/, '') || '/';
  const [pathPart, queryPart] = raw.split('?');
  const parts = pathPart.split('/').filter(Boolean).map(decodeURIComponent);
  const query = new URLSearchParams(queryPart || '');
  for (const a of document.querySelectorAll('[data-nav]')) {
    a.classList.toggle('active', a.dataset.nav === (parts[0] === 'branches' || parts[0] === 'log' || parts[0] === 'tree' ? 'branches' : parts[0] ? '' : 'runs'));
  }
  let view;
  try {
    if (parts.length === 0 || (parts[0] === 'runs' && parts.length === 1)) view = await runsView();
    else if (parts[0] === 'runs' && parts.length === 2) view = await runView(parts[1], seq);
    else if (parts[0] === 'compare') view = await compareView((query.get('runs') || '').split(',').filter(Boolean), (query.get('rescored') || '').split(',').filter(Boolean));
    else if (parts[0] === 'runs' && parts[2] === 'iterations' && parts.length === 4) view = await iterationView(parts[1], Number(parts[3]));
    else if (parts[0] === 'branches') view = await branchesView();
    else if (parts[0] === 'log' && parts.length === 2) view = await logView(parts[1]);
    else if (parts[0] === 'tree' && parts.length >= 2) view = await treeView(parts[1], parts.slice(2).join('/'));
    else if (parts[0] === 'table' && parts.length >= 3) view = await tableView(parts[1], parts.slice(2).join('/'), Number(query.get('offset') || 0), Number(query.get('limit') || 100));
    else if (parts[0] === 'object' && parts.length >= 3) view = await objectView(parts[1], parts.slice(2).join('/'));
    else if (parts[0] === 'episode' && parts.length >= 3) view = await episodeView(parts[1], parts.slice(2).join('/'), Number(query.get('row') || 0));
    else view = errorBox(`no page ${location.hash}`);
  } catch (e) {
    view = errorBox(e.message);
  }
  if (seq !== routeSeq) return; // the user moved on while this loaded
  app.replaceChildren(view);
}

function errorBox(msg) {
  return h('div', {class: 'error', role: 'alert'}, msg);
}

async function api(path) {
  const res = await fetch(path, {headers: {Accept: 'application/json'}, credentials: 'same-origin'});
  let body;
  try { body = await res.json(); } catch (e) { throw new Error(`${path}: ${res.status} ${res.statusText}`); }
  if (!res.ok) throw new Error(body.error || `${path}: ${res.status}`);
  return body;
}

// ---- runs ------------------------------------------------------------------

async function runsView() {
  const {runs} = await api('/api/runs');
  document.title = 'rlpipe: runs';
  if (runs.length === 0) {
    return section('Runs', h('p', {class: 'muted'}, 'No runs yet: `rlpipe run -f pipeline.yaml` starts one.'));
  }
  const held = (r) => {
    const x = r.heldout;
    if (!x) return '–';
    const gain = x.has_base ? ` (${x.gain_points >= 0 ? '+' : ''}${x.gain_points.toFixed(1)} over base)` : '';
    return h('span', {title: `${x.set} ${x.metric}: last at ${x.last_checkpoint}, best at ${x.best_checkpoint}`},
      `${x.last.toFixed(4)} / ${x.best.toFixed(4)}${gain}`);
  };
  const picked = new Set();
  const go = h('button', {type: 'button', id: 'compare', disabled: true,
    onclick: () => { location.hash = href.compare([...picked]); }}, 'compare selected runs');
  const pick = (run) => h('input', {type: 'checkbox', 'aria-label': `compare ${run}`, 'data-run': run, onchange: (ev) => {
    if (ev.target.checked) picked.add(run); else picked.delete(run);
    go.disabled = picked.size < 2;
  }});
  return section('Runs', h('p', {}, go, ' ', h('span', {class: 'muted'}, 'tick two or more runs (a run and its rescoring branch too) to overlay their curves')),
    table(['', 'run', 'last iteration', 'last reward', 'held-out (last / best)', 'commit', 'date', 'state'], runs.map((r) => h('tr', {},
    h('td', {}, pick(r.run)),
    h('td', {}, h('a', {href: href.run(r.run)}, r.run)),
    h('td', {class: 'num'}, r.iteration ? h('a', {href: href.iteration(r.run, r.iteration)}, r.iteration) : '–'),
    h('td', {class: 'num'}, r.last_reward == null ? '–' : r.last_reward.toFixed(3)),
    h('td', {class: 'num'}, held(r)),
    h('td', {}, h('a', {class: 'mono', href: href.tree(r.commit, '')}, short(r.commit))),
    h('td', {}, fmtDate(r.date)),
    h('td', {}, lockText(r.lock)))), 'runs'));
}

// The train metrics charted first when present; any other can be picked.
const TRAIN_CHARTS = [
  {title: 'reward (mean)', keys: ['reward.mean', 'mean_reward']},
  {title: 'accuracy', keys: ['reward_components.correct.mean', 'accuracy']},
  {title: 'loss', keys: ['loss']},
  {title: 'KL', keys: ['kl'], absent: 'not computed: at beta 0 the loss has no KL term'},
];

async function runView(run, seq) {
  const d = await api(`/api/runs/${enc(run)}`);
  document.title = `rlpipe: ${run}`;
  const root = h('div', {class: 'run'});
  renderRun(root, d);
  // Live: re-render when the run's branch moves.
  if (window.EventSource) {
    const es = new EventSource(`/api/events?run=${enc(run)}`);
    let shown = d.commit;
    es.addEventListener('head', async (ev) => {
      const head = JSON.parse(ev.data);
      live.hidden = false;
      const at = head.iteration ? 'iteration ' + head.iteration : short(head.commit);
      live.textContent = `${head.live ? 'live' : 'idle'} · ${at}`;
      live.classList.toggle('idle', !head.live);
      live.title = head.live
        ? `a driver holds ${head.branch}; last change ${fmtDate(head.date)}`
        : `no driver holds ${head.branch}: the page still follows it; last change ${fmtDate(head.date)}`;
      if (head.commit === shown) return;
      shown = head.commit;
      try {
        const nd = await api(`/api/runs/${enc(run)}`);
        if (seq === routeSeq) renderRun(root, nd);
      } catch (e) { /* keep the last view; the next event retries */ }
    });
    es.addEventListener('gone', () => { live.textContent = 'run deleted'; es.close(); });
    es.onerror = () => { live.textContent = 'reconnecting…'; };
    cleanup.push(() => es.close());
  }
  return root;
}

function renderRun(root, d) {
  const its = d.iterations;
  const last = its.length ? its[its.length - 1] : null;
  const head = h('div', {class: 'head'},
    h('h1', {}, 'run ', h('span', {class: 'name'}, d.run)),
    h('dl', {},
      h('dt', {}, 'branch'), h('dd', {}, h('a', {href: href.log(d.branch)}, d.branch), ' at ', h('a', {class: 'mono', href: href.tree(d.commit, '')}, short(d.commit))),
      h('dt', {}, 'state'), h('dd', {}, d.state ? `iteration ${d.state.iteration}, cursor ${d.state.cursor}, seed ${d.state.seed}` : 'no iteration committed yet'),
      h('dt', {}, 'process'), h('dd', {}, lockText(d.lock)),
      d.config_hash ? [h('dt', {}, 'config'), h('dd', {}, artifactLink(d.commit, d.config_path, d.config_hash),
        d.config ? ' (as written; the effective config, defaults filled in, is below)' : d.trainer ? ' (as written; the trainer\'s options with defaults filled in are below)' : '')] : null,
      last ? [h('dt', {}, 'last iteration'), h('dd', {}, h('a', {href: href.iteration(d.run, last.iteration)}, last.iteration), ' · ', fmtDate(last.date))] : null));

  const charts = h('div', {class: 'charts'});
  const used = new Set();
  charts.append(...trainCharts(its, used));
  charts.append(...evalCharts(d.evals));
  if (its.some((it) => it.tasks.length)) charts.append(taskBars(its));
  const keys = [...new Set(its.flatMap((it) => Object.keys(it.train || {})))].filter((k) => !used.has(k)).sort();
  let picker = null;
  if (keys.length) {
    const slot = h('div', {class: 'picked'});
    const sel = h('select', {'aria-label': 'chart another train metric', onchange: () => {
      const k = sel.value;
      slot.replaceChildren(k ? lineChart(k, [{name: k, points: its.filter((it) => typeof (it.train || {})[k] === 'number').map((it) => [it.iteration, it.train[k]])}], {xlabel: 'iteration'}) : '');
    }}, h('option', {value: ''}, 'chart another train metric…'), keys.map((k) => h('option', {value: k}, k)));
    picker = h('div', {class: 'picker'}, sel, slot);
  }
  // replaceChildren would print a null as "null": sections left out are dropped.
  root.replaceChildren(...[head,
    d.config ? effectiveConfig(d) : null,
    d.trainer ? trainerOptions(d) : null,
    section('Charts', charts.childElementCount ? charts : h('p', {class: 'muted'}, 'Nothing to chart yet.'), picker),
    d.evals.length ? section('Evaluations', evalTable(d.evals, d.commit)) : null,
    (d.rescorings || []).length ? section('Rescorings', rescoringTable(d)) : null,
    section(`Iterations (${its.length})`, iterationTable(d.run, its))].filter(Boolean));
}

// effectiveConfig shows the run's pipeline config as it runs: the
// recorded config with every default filled in (what rlpipe compare
// diffs and the trackers get), one row per dotted key.
function effectiveConfig(d) {
  const c = d.config;
  const keys = Object.keys(c.keys || {}).sort();
  return h('details', {class: 'effective-config'},
    h('summary', {}, 'Effective pipeline config (defaults filled in)'),
    h('p', {class: 'muted'}, 'The recorded ', artifactLink(d.commit, c.path),
      ' with the default of every key it leaves out, as rlpipe compare diffs it and the trackers get it'),
    c.error ? h('p', {class: 'error'}, c.error)
      : table(['key', 'value'], keys.map((k) => h('tr', {'data-key': k}, h('td', {class: 'mono'}, k), h('td', {class: 'mono'}, c.keys[k]))), 'config'));
}

// trainerOptions shows the options the trainer's last update ran with,
// defaults filled in (the config file names only what it sets), from the
// record beside its checkpoint.
function trainerOptions(d) {
  const rows = [];
  const walk = (prefix, v) => {
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      for (const k of Object.keys(v).sort()) walk(prefix ? `${prefix}.${k}` : k, v[k]);
      return;
    }
    rows.push(h('tr', {'data-key': prefix}, h('td', {class: 'mono'}, prefix),
      h('td', {class: typeof v === 'number' ? 'num' : 'mono'}, typeof v === 'string' ? v : JSON.stringify(v))));
  };
  walk('', d.trainer.options);
  return h('details', {class: 'trainer-options'},
    h('summary', {}, `Effective trainer options (defaults filled in), iteration ${d.trainer.iteration}`),
    h('p', {class: 'muted'}, 'As the trainer applied them, from ', artifactLink(d.commit, d.trainer.path),
      d.trainer.base_model ? ` · base model ${d.trainer.base_model}` : ''),
    table(['option', 'value'], rows, 'trainer'));
}

// trainCharts draws the TRAIN_CHARTS a run reports, adding the keys it
// charts to used. Reward and accuracy equal at every iteration (a reward
// that is its 0/1 correct component) are one chart with a note, as in
// the report; when they differ each has its own.
function trainCharts(its, used) {
  const found = TRAIN_CHARTS.map((c) => {
    const key = c.keys.find((k) => its.some((it) => it.train && typeof it.train[k] === 'number'));
    return key ? {c, key, series: {name: key, points: its.filter((it) => it.train && typeof it.train[key] === 'number').map((it) => [it.iteration, it.train[key]])}} : {c};
  });
  const [reward, accuracy] = found;
  const sameCurve = (a, b) => a.series && b.series && JSON.stringify(a.series.points) === JSON.stringify(b.series.points);
  const out = [];
  for (const f of found) {
    if (!f.key) {
      // A metric every iteration reports as null was not computed: say so
      // rather than leave the panel out or draw it as 0.
      const nulls = f.c.absent && f.c.keys.find((k) => its.some((it) => (it.not_computed || []).includes(k)));
      if (nulls) { used.add(nulls); out.push(noteChart(f.c.title, f.c.absent)); }
      continue;
    }
    used.add(f.key);
    if (f === accuracy && sameCurve(reward, accuracy)) continue; // drawn with the reward
    if (f === reward && sameCurve(reward, accuracy)) {
      out.push(lineChart(`${reward.c.title} and ${accuracy.c.title}`, [reward.series, accuracy.series], {xlabel: 'iteration',
        why: {[`${reward.key} = ${accuracy.key}`]: 'the reward is its 0/1 correct component'}}));
      continue;
    }
    out.push(lineChart(f.c.title, [f.series], {xlabel: 'iteration'}));
  }
  return out;
}

// rescoringTable lists the branches that rescored the run, each with a
// link to its reward curve overlaid on the run's.
function rescoringTable(d) {
  return table(['branch', 'spec', 'iterations', ''], d.rescorings.map((r) => h('tr', {'data-branch': r.branch},
    h('td', {}, h('a', {href: href.log(r.branch)}, r.branch)),
    h('td', {class: 'mono', title: r.spec_digest}, short(r.spec_digest.replace(/^sha256:/, ''))),
    h('td', {class: 'num'}, r.iterations),
    h('td', {}, h('a', {class: 'compare-rescored', href: href.compare([d.run], [r.branch])}, 'compare with the run')))));
}

// compareView overlays the curves of several runs: each train metric of
// TRAIN_CHARTS and the headline evaluation, one series per run (runs whose
// curves are equal point for point are drawn once, named together).
async function compareView(names, rescored) {
  if (names.length < 2 && !(names.length === 1 && rescored.length)) {
    return errorBox('compare needs two or more runs, or a run and its rescorings: #/compare?runs=a,b or #/compare?runs=a&rescored=rescore-1a2b');
  }
  const ds = await Promise.all(names.map((r) => api(`/api/runs/${enc(r)}`)));
  const rs = await Promise.all(rescored.map((b) => api(`/api/runs/${enc(names[0])}/rescorings/${enc(b)}`)));
  document.title = `rlpipe: compare ${names.concat(rescored).join(', ')}`;
  const charts = h('div', {class: 'charts'});
  if (rs.length) {
    // The run's curve comes from its rewards tables here, as the
    // rescorings' do, so both sides are the same figure: the mean total
    // over the scored rows of each iteration.
    const pts = (r, side) => r.per_iteration.filter((p) => typeof p[side] === 'number').map((p) => [p.iteration, p[side]]);
    charts.append(lineChart(`reward (mean of the rewards tables): ${names[0]} and its rescorings`,
      [{name: `${names[0]} (as run)`, points: pts(rs[0], 'old')}, ...rs.map((r) => ({name: r.branch, points: pts(r, 'new')}))],
      {xlabel: 'iteration'}));
  }
  // With one run (and its rescorings) there is nothing else to overlay.
  for (const c of ds.length > 1 ? TRAIN_CHARTS : []) {
    const series = [];
    for (const d of ds) {
      const key = c.keys.find((k) => d.iterations.some((it) => it.train && typeof it.train[k] === 'number'));
      if (key) series.push({name: d.run, points: d.iterations.filter((it) => it.train && typeof it.train[key] === 'number').map((it) => [it.iteration, it.train[key]])});
    }
    if (series.length) charts.append(lineChart(`${c.title} by run`, series, {xlabel: 'iteration'}));
  }
  const heads = ds.map((d) => {
    const set = d.evals.length ? d.evals[0].set : '';
    const es = d.evals.filter((e) => e.set === set);
    const metric = es.length && es.every((e) => 'exact_pass@1' in e.metrics) ? 'exact_pass@1' : 'pass@1';
    return {run: d.run, set, metric, points: es.filter((e) => metric in e.metrics).map((e) => [e.iteration, e.metrics[metric]])};
  }).filter((x) => x.points.length);
  if (heads.length > 1) {
    const metric = heads.every((x) => x.metric === heads[0].metric) ? heads[0].metric : 'pass@1 / exact_pass@1';
    charts.append(lineChart(`held-out ${metric} per checkpoint by run`, heads.map((x) => ({name: `${x.run} (${x.set})`, points: x.points})),
      {xlabel: 'checkpoint (iteration)', ymin: 0, ymax: 1}));
  }
  return h('div', {class: 'compare'},
    h('h1', {}, 'compare ', names.map((n, i) => [i ? ', ' : '', h('a', {href: href.run(n)}, n)]),
      rescored.map((b) => [', ', h('a', {href: href.log(b)}, b)])),
    section('Charts', charts.childElementCount ? charts : h('p', {class: 'muted'}, 'Nothing to chart yet.')));
}

// evalCharts draws pass@k (and the other eval metrics) per checkpoint, one
// chart per eval set.
function evalCharts(evals) {
  const sets = [...new Set(evals.map((e) => e.set))];
  return sets.map((set) => {
    const es = evals.filter((e) => e.set === set);
    // pass@k, then the exact pass@1 (dashed, its own colour, and a note
    // saying how it differs); the table below has every metric.
    const names = [...new Set(es.flatMap((e) => Object.keys(e.metrics)))].filter((m) => /^(exact_)?pass@\d+$/.test(m))
      .sort((a, b) => a.startsWith('exact_') - b.startsWith('exact_') || metricOrder(a, b));
    const exact = (m) => m.startsWith('exact_');
    const series = names.map((m) => ({name: m, color: exact(m) ? EXACT_COLOR : undefined, dash: exact(m),
      points: es.filter((e) => m in e.metrics).map((e) => [e.iteration, e.metrics[m]])}));
    return lineChart(`pass@k on ${set} per checkpoint`, series, {xlabel: 'checkpoint (iteration)', ymin: 0, ymax: 1,
      about: names.some(exact) ? EXACT_NOTE : ''});
  });
}

function metricOrder(a, b) {
  const ka = a.match(/^(.*?)(\d+)$/), kb = b.match(/^(.*?)(\d+)$/);
  if (ka && kb && ka[1] === kb[1]) return Number(ka[2]) - Number(kb[2]);
  return a < b ? -1 : a > b ? 1 : 0;
}

// metricRank orders the evaluations table's columns: pass@k first (the
// figure RL papers report), then the exact pass@1, pass^k, maj@k, avg@k
// and the rest.
function metricRank(m) {
  const i = [/^pass@\d+$/, /^exact_pass@\d+$/, /^pass\^\d+$/, /^maj@\d+$/, /^avg@\d+$/].findIndex((re) => re.test(m));
  return i < 0 ? 5 : i;
}

// evalColumns lists the table's metrics in metricRank order, metrics equal
// at every checkpoint (value and interval; avg@k does not depend on k)
// collapsed into one column named "avg@1 = avg@2 = avg@4".
function evalColumns(evals) {
  const names = [...new Set(evals.flatMap((e) => Object.keys(e.metrics)))].sort((a, b) => metricRank(a) - metricRank(b) || metricOrder(a, b));
  const cell = (e, m) => JSON.stringify([e.metrics[m], (e.intervals || {})[m]]);
  const cols = [];
  for (const m of names) {
    const twin = cols.find((c) => evals.every((e) => cell(e, c.names[0]) === cell(e, m)));
    if (twin) twin.names.push(m); else cols.push({names: [m]});
  }
  return cols;
}

function evalTable(evals, ref) {
  const cols = evalColumns(evals);
  const head = cols.map((c) => h('span', {title: c.names.length > 1 ? 'equal at every checkpoint: one column' : null}, c.names.join(' = ')));
  return table(['checkpoint', 'set', 'problems', 'n', ...head], evals.map((e) => h('tr', {},
    h('td', {}, artifactLink(ref, e.path, e.checkpoint)),
    h('td', {}, e.set), h('td', {class: 'num'}, e.problems), h('td', {class: 'num'}, e.n),
    cols.map((c) => {
      const m = c.names[0];
      const ci = (e.intervals || {})[m];
      // Fixed decimals, so 1 reads 1.0000 beside 0.2500.
      const fixed = (v, d) => (typeof v === 'number' ? v.toFixed(d) : '–');
      return h('td', {class: 'num', 'data-metric': m}, fixed(e.metrics[m], 4),
        ci ? h('small', {class: 'ci', title: '95% interval'}, ` [${fixed(ci[0], 3)}, ${fixed(ci[1], 3)}]`) : null);
    }))), 'evals');
}

function iterationTable(run, its) {
  const names = taskNames(its);
  const rows = its.slice().reverse().map((it) => {
    const byName = Object.fromEntries(it.tasks.map((t) => [t.name, t]));
    const reward = it.train && (it.train['reward.mean'] ?? it.train['mean_reward']);
    return h('tr', {},
      h('td', {class: 'num'}, h('a', {href: href.iteration(run, it.iteration)}, it.iteration)),
      h('td', {}, h('a', {class: 'mono', href: href.tree(it.commit, it.dir)}, short(it.commit))),
      h('td', {}, fmtDate(it.date)),
      names.map((n) => {
        const t = byName[n];
        if (!t) return h('td', {});
        return h('td', {class: 'num' + (t.cached ? ' cached' : ''), title: `${t.attempts} attempt(s)${t.cached ? ', cached' : ''}`}, fmtSecs(t.seconds), t.attempts > 1 ? h('sup', {}, '×' + t.attempts) : null);
      }),
      h('td', {class: 'num'}, fmtSecs(it.seconds)),
      h('td', {class: 'num'}, reward === undefined ? '' : fmtNum(reward, 3)));
  });
  return table(['iteration', 'commit', 'date', ...names, 'task time', 'reward'], rows, 'iterations');
}

function taskNames(its) {
  const seen = [];
  for (const it of its) for (const t of it.tasks) if (!seen.includes(t.name)) seen.push(t.name);
  const rank = (n) => ['sample', 'generate', 'reward', 'train'].indexOf(n) >= 0 ? ['sample', 'generate', 'reward', 'train'].indexOf(n) : n.startsWith('eval') ? 5 : 4;
  return seen.sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : 1));
}

// ---- charts ----------------------------------------------------------------

const CW = 440, CH = 220, ML = 52, MR = 12, MT = 10, MB = 30;

// niceTicks returns about n round numbers covering [lo, hi]: the first is
// at or below lo and the last at or above hi, so an axis drawn from the
// first tick to the last holds every value (a ticks' range, not a range's
// ticks). Callers that want ticks within [lo, hi] filter them.
function niceTicks(lo, hi, n) {
  if (!(hi > lo)) { const c = lo; lo = c - 1; hi = c + 1; }
  const raw = (hi - lo) / n;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((st) => st >= raw) || 10 * mag;
  const tick = (i) => Number((i * step).toPrecision(12));
  let first = Math.floor(lo / step), last = Math.ceil(hi / step);
  while (tick(first) > lo) first--; // rounding can land a tick just inside the data
  while (tick(last) < hi) last++;
  const out = [];
  for (let i = first; i <= last; i++) out.push(tick(i));
  return out;
}

// tickLabels formats an axis's ticks alike: each with the decimals the
// finest of them needs ("0.00", "0.25", "0.50"), never "1" beside "0.800".
function tickLabels(ts) {
  const decimals = (v) => {
    for (let d = 0; d < 6; d++) if (Math.abs(Number(v.toFixed(d)) - v) <= 1e-9 * Math.max(1, Math.abs(v))) return d;
    return 6;
  };
  const d = Math.max(0, ...ts.map(decimals));
  return ts.map((v) => v.toFixed(d));
}

// at rounds a coordinate to the 0.1 px the SVG is written with.
const at = (v) => Math.round(v * 10) / 10;

// frame is a chart's figure: the title (wrapping, its full text as a
// tooltip), the plot, then the legend and any notes, each in its own row,
// so none can overlap another. A legend shows with two entries or more, or
// when an entry names series drawn once.
function frame(title, legend) {
  const svg = s('svg', {viewBox: `0 0 ${CW} ${CH}`, width: CW, height: CH, role: 'img', 'aria-label': title, class: 'chart'});
  const fig = h('figure', {class: 'chart'}, h('figcaption', {title}, title), svg);
  if (legend && (legend.length > 1 || legend.some((l) => l.names && l.names.length > 1))) {
    fig.append(h('div', {class: 'legend'}, legend.map((l) => h('span', {'data-color': l.color},
      h('i', {class: l.dash ? 'dashed' : null, style: l.dash ? `border-color:${l.color}` : `background:${l.color}`}), l.name))));
  }
  return {fig, svg};
}

// mergeIdentical draws series that are equal point for point once: the
// first keeps its place and colour and is named after all of them
// ("pass@1 = exact_pass@1"; names lists them); merged lists those names.
function mergeIdentical(series) {
  const eq = (u, v) => u === v || (Number.isNaN(u) && Number.isNaN(v));
  const same = (a, b) => a.points.length === b.points.length && a.points.every((p, i) => eq(p[0], b.points[i][0]) && eq(p[1], b.points[i][1]));
  const out = [], merged = [], used = new Set();
  series.forEach((se, i) => {
    if (used.has(i)) return;
    const names = [se.name];
    series.forEach((o, j) => {
      if (j > i && !used.has(j) && same(se, o)) { used.add(j); names.push(o.name); }
    });
    if (names.length > 1) merged.push(names.join(' = '));
    out.push({...se, label: names.join(' = '), names});
  });
  return {series: out, merged};
}

function axes(svg, x, y, xt, yt, xlabel) {
  const g = s('g', {class: 'axes'});
  const labels = tickLabels(yt);
  yt.forEach((v, i) => {
    g.append(s('line', {x1: ML, x2: CW - MR, y1: y(v), y2: y(v), class: 'grid'}));
    g.append(s('text', {x: ML - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'ytick'}, labels[i]));
  });
  for (const v of xt) {
    g.append(s('text', {x: x(v), y: CH - MB + 16, 'text-anchor': 'middle'}, v));
  }
  g.append(s('line', {x1: ML, x2: CW - MR, y1: CH - MB, y2: CH - MB, class: 'axis'}));
  if (xlabel) g.append(s('text', {x: CW - MR, y: CH - 2, 'text-anchor': 'end', class: 'label'}, xlabel));
  svg.append(g);
}

// lineChart draws series of [x, y] points as lines with a dot per point
// (its <title> gives the exact value).
// noteChart is a chart's frame holding only a note.
function noteChart(title, note) {
  const {fig, svg} = frame(title, []);
  svg.append(s('text', {class: 'note', x: CW / 2, y: CH / 2, 'text-anchor': 'middle'}, note));
  return fig;
}

// Series equal point for point are drawn once, named "a = b" in the
// legend, with a note under the chart. The y axis runs from the first tick
// to the last, which cover the data.
function lineChart(title, series, opts) {
  opts = opts || {};
  series = series.filter((se) => se.points.length);
  let free = 0;
  series.forEach((se) => { se.color = se.color || COLORS[free++ % COLORS.length]; });
  const {series: drawn, merged} = mergeIdentical(series);
  const {fig, svg} = frame(title, drawn.map((se) => ({name: se.label, names: se.names, color: se.color, dash: se.dash})));
  if (merged.length) {
    const why = merged.map((m) => (opts.why && opts.why[m] ? `${m} (${opts.why[m]})` : m));
    fig.append(h('p', {class: 'same'}, `identical series drawn once: ${why.join('; ')}`));
  }
  if (opts.about) fig.append(h('p', {class: 'about'}, opts.about));
  const pts = drawn.flatMap((se) => se.points);
  if (!pts.length) { svg.append(s('text', {x: CW / 2, y: CH / 2, 'text-anchor': 'middle'}, 'no data')); return fig; }
  let [x0, x1] = [Math.min(...pts.map((p) => p[0])), Math.max(...pts.map((p) => p[0]))];
  let [y0, y1] = [Math.min(...pts.map((p) => p[1])), Math.max(...pts.map((p) => p[1]))];
  if (opts.ymin !== undefined) y0 = Math.min(y0, opts.ymin);
  if (opts.ymax !== undefined) y1 = Math.max(y1, opts.ymax);
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  const yt = niceTicks(y0, y1, 4);
  [y0, y1] = [yt[0], yt[yt.length - 1]];
  const x = (v) => ML + (v - x0) / (x1 - x0) * (CW - ML - MR);
  const y = (v) => MT + (1 - (v - y0) / (y1 - y0)) * (CH - MT - MB);
  axes(svg, x, y, niceTicks(x0, x1, 6).filter((v) => Number.isInteger(v) && v >= x0 && v <= x1), yt, opts.xlabel);
  for (const se of drawn) {
    const g = s('g', {class: 'series', 'data-name': se.name, 'data-names': se.label});
    g.append(s('polyline', {points: se.points.map((p) => `${at(x(p[0]))},${at(y(p[1]))}`).join(' '), stroke: se.color,
      'stroke-dasharray': se.dash ? '5 3' : null}));
    if (se.points.length <= 400) {
      for (const p of se.points) {
        g.append(s('circle', {class: 'pt', cx: at(x(p[0])), cy: at(y(p[1])), r: 2.5, fill: se.color, 'data-x': p[0], 'data-y': p[1]},
          s('title', {}, `${se.label} at ${p[0]}: ${fmtNum(p[1])}`)));
      }
    }
    svg.append(g);
  }
  return fig;
}

// taskBars stacks each iteration's task times, one bar per iteration. The
// y axis's top tick is at or above the tallest stack (summed here as the
// bars are stacked).
function taskBars(its) {
  const names = taskNames(its);
  const color = Object.fromEntries(names.map((n, i) => [n, COLORS[i % COLORS.length]]));
  const {fig, svg} = frame('time in tasks per iteration (s)', names.map((n) => ({name: n, color: color[n]})));
  const stacked = (it) => names.reduce((acc, n) => acc + ((it.tasks.find((t) => t.name === n) || {}).seconds || 0), 0);
  const ymax = Math.max(...its.map(stacked), 1e-3);
  const yt = niceTicks(0, ymax, 4);
  const top = yt[yt.length - 1];
  const n = its.length;
  const x0 = its[0].iteration, x1 = its[n - 1].iteration;
  const bw = Math.max(1, (CW - ML - MR) / Math.max(n, 1) * 0.8);
  const x = (v) => ML + bw / 2 + (x1 === x0 ? 0 : (v - x0) / (x1 - x0) * (CW - ML - MR - bw));
  const y = (v) => MT + (1 - v / top) * (CH - MT - MB);
  axes(svg, x, y, niceTicks(x0, x1, 6).filter((v) => Number.isInteger(v) && v >= x0 && v <= x1), yt, 'iteration');
  const g = s('g', {class: 'bars'});
  for (const it of its) {
    let acc = 0;
    for (const name of names) {
      const t = it.tasks.find((tt) => tt.name === name);
      if (!t) continue;
      // Top and bottom are rounded apart, so a bar ends where the next
      // begins; a very short task still shows, growing up (not below the
      // axis or above the top tick).
      const bottom = at(y(acc)), top = Math.max(MT, Math.min(at(y(acc + t.seconds)), bottom - 0.5));
      g.append(s('rect', {x: at(x(it.iteration) - bw / 2), y: top, width: at(bw),
        height: at(bottom - top), fill: color[name], class: t.cached ? 'cached' : ''},
      s('title', {}, `iteration ${it.iteration} ${name}: ${fmtSecs(t.seconds)}${t.cached ? ' (cached)' : ''}`)));
      acc += t.seconds;
    }
  }
  svg.append(g);
  return fig;
}

// gantt places an iteration's tasks on its timeline (from the event log),
// or, without one, one after another by duration.
function gantt(tasks, wall) {
  const placed = tasks.every((t) => typeof t.start === 'number' && typeof t.end === 'number');
  let at = 0;
  const spans = tasks.map((t) => {
    if (placed) return [t.start, t.end];
    const sp = [at, at + t.seconds]; at += t.seconds; return sp;
  });
  const total = Math.max(wall || 0, ...spans.map((sp) => sp[1]), 1e-3);
  const rowH = 22, W = 720, L = 130, R = 70;
  const H = tasks.length * rowH + 26;
  const svg = s('svg', {viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'gantt', role: 'img', 'aria-label': 'task timeline'});
  const x = (v) => L + v / total * (W - L - R);
  const xt = niceTicks(0, total, 6).filter((v) => v <= total);
  const labels = tickLabels(xt);
  xt.forEach((v, i) => {
    svg.append(s('line', {x1: x(v), x2: x(v), y1: 0, y2: H - 20, class: 'grid'}));
    svg.append(s('text', {x: x(v), y: H - 6, 'text-anchor': 'middle', class: 'xtick'}, labels[i] + ' s'));
  });
  tasks.forEach((t, i) => {
    const [a, b] = spans[i];
    const yy = i * rowH + 4;
    svg.append(s('text', {x: L - 8, y: yy + 13, 'text-anchor': 'end'}, t.name));
    svg.append(s('rect', {x: x(a).toFixed(1), y: yy, width: Math.max(1, x(b) - x(a)).toFixed(1), height: rowH - 8, rx: 2,
      fill: COLORS[i % COLORS.length], class: 'task' + (t.cached ? ' cached' : '') + (t.error ? ' failed' : ''), 'data-task': t.name},
    s('title', {}, `${t.name}: ${fmtSecs(t.seconds)}, ${t.attempts} attempt(s)${t.cached ? ', cached' : ''}`)));
    svg.append(s('text', {x: x(b) + 6, y: yy + 13}, fmtSecs(t.seconds) + (t.cached ? ' (cached)' : '')));
  });
  return h('figure', {class: 'chart wide'}, h('figcaption', {}, placed ? 'task timeline (from the event log)' : 'task durations'), svg);
}

// ---- iteration -------------------------------------------------------------

async function iterationView(run, n) {
  const d = await api(`/api/runs/${enc(run)}/iterations/${n}`);
  document.title = `rlpipe: ${run} iteration ${n}`;
  const trainKeys = Object.keys(d.train || {}).sort();
  return h('div', {class: 'iteration'},
    h('div', {class: 'head'},
      h('p', {class: 'crumbs'}, h('a', {href: href.runs()}, 'runs'), ' / ', h('a', {href: href.run(run)}, run)),
      h('h1', {}, `iteration ${n}`),
      h('p', {class: 'pager'},
        n > 1 ? h('a', {href: href.iteration(run, n - 1)}, '← previous') : null, ' ',
        h('a', {href: href.iteration(run, n + 1)}, 'next →')),
      h('dl', {},
        h('dt', {}, 'commit'), h('dd', {}, h('a', {class: 'mono', href: href.tree(d.commit, d.dir)}, short(d.commit)), ' · ', fmtDate(d.date)),
        d.parent ? [h('dt', {}, 'parent'), h('dd', {}, h('a', {class: 'mono', href: href.tree(d.parent, '')}, short(d.parent)))] : null,
        h('dt', {}, 'time in tasks'), h('dd', {}, fmtSecs(d.seconds), d.wall_seconds ? ` · ${fmtSecs(d.wall_seconds)} wall` : ''))),
    section('Tasks', d.tasks.length ? gantt(d.tasks, d.wall_seconds) : null,
      table(['task', 'stage', 'env', 'start', 'time', 'attempts', 'cached', 'error'], d.tasks.map((t) => h('tr', {'data-task': t.name},
        h('td', {}, t.name), h('td', {}, t.stage || ''), h('td', {}, t.env || ''),
        h('td', {class: 'num'}, typeof t.start === 'number' ? fmtNum(t.start, 3) + ' s' : ''),
        h('td', {class: 'num'}, fmtSecs(t.seconds)), h('td', {class: 'num'}, t.attempts),
        h('td', {}, t.cached ? 'yes' : ''), h('td', {class: 'err'}, t.error || ''))), 'tasks')),
    trainKeys.length ? section('Train metrics', table(['metric', 'value'], trainKeys.map((k) => h('tr', {}, h('td', {}, k), h('td', {class: 'num'}, fmtNum(d.train[k])))), 'kv')) : null,
    section(`Artifacts written (${d.artifacts.length})`, table(['path', 'size', 'change'], d.artifacts.map((a) => h('tr', {},
      h('td', {}, artifactLink(d.commit, a.path)), h('td', {class: 'num'}, fmtBytes(a.size_bytes)), h('td', {}, a.change))), 'artifacts')));
}

// ---- branches, log, tree ---------------------------------------------------

async function branchesView() {
  const d = await api('/api/branches');
  document.title = 'rlpipe: branches';
  return h('div', {},
    section(`Branches of ${d.repository.name || 'the store'}`, table(['branch', 'head', 'date', 'message', ''], d.branches.map((b) => h('tr', {},
      h('td', {}, h('a', {href: href.log(b.name)}, b.name), b.default ? h('span', {class: 'badge'}, 'default') : null),
      h('td', {}, h('a', {class: 'mono', href: href.tree(b.commit, '')}, short(b.commit))),
      h('td', {}, fmtDate(b.date)), h('td', {}, b.message),
      h('td', {}, h('a', {href: href.tree(b.name, '')}, 'files')))), 'branches')),
    d.tags.length ? section('Tags', table(['tag', 'commit'], d.tags.map((t) => h('tr', {},
      h('td', {}, h('a', {href: href.log(t.name)}, t.name)), h('td', {}, h('a', {class: 'mono', href: href.tree(t.commit_id, '')}, short(t.commit_id))))))) : null);
}

async function logView(ref) {
  document.title = `rlpipe: log ${ref}`;
  const body = h('tbody');
  const more = h('button', {type: 'button'}, 'more');
  const load = async (offset) => {
    const d = await api(`/api/log?ref=${enc(ref)}&offset=${offset}&limit=50`);
    for (const c of d.commits) {
      const meta = c.metadata || {};
      body.append(h('tr', {},
        h('td', {}, h('a', {class: 'mono', href: href.tree(c.id, ''), title: c.id}, short(c.id))),
        h('td', {}, fmtDate(c.creation_date)), h('td', {}, c.committer),
        h('td', {}, meta['rlpipe.run'] && meta['rlpipe.iteration']
          ? h('a', {href: href.iteration(meta['rlpipe.run'], meta['rlpipe.iteration'])}, c.message.split('\n')[0])
          : c.message.split('\n')[0])));
    }
    more.hidden = d.next_offset === undefined;
    more.onclick = () => load(d.next_offset).catch((e) => more.replaceWith(errorBox(e.message)));
  };
  await load(0);
  return section(`History of ${ref}`, h('div', {class: 'scroll'}, h('table', {class: 'log'},
    h('thead', {}, h('tr', {}, ['commit', 'date', 'committer', 'message'].map((x) => h('th', {}, x)))), body)), more);
}

async function treeView(ref, prefix) {
  const d = await api(`/api/ls?ref=${enc(ref)}&prefix=${enc(prefix)}`);
  document.title = `rlpipe: ${ref}:${prefix}`;
  const crumbs = [h('a', {href: href.tree(ref, '')}, ref), ':'];
  let acc = '';
  for (const p of d.prefix.split('/').filter(Boolean)) {
    acc += p + '/';
    crumbs.push(h('a', {href: href.tree(ref, acc)}, p + '/'));
  }
  return section(h('span', {}, 'Files at ', crumbs),
    h('p', {}, h('a', {href: href.log(ref)}, 'history of ' + ref)),
    table(['path', 'size', 'modified'], d.entries.map((e) => h('tr', {},
      h('td', {}, e.common_prefix ? h('a', {href: href.tree(ref, e.path)}, e.path.slice(d.prefix.length)) : artifactLink(ref, e.path, e.path.slice(d.prefix.length))),
      h('td', {class: 'num'}, e.common_prefix ? '' : fmtBytes(e.size_bytes)),
      h('td', {}, e.common_prefix ? '' : fmtDate(e.mtime)))), 'tree'),
    d.truncated ? h('p', {class: 'muted'}, 'Listing cut short; use `rlpipe ls` for all of it.') : null);
}

// ---- table browser ---------------------------------------------------------

async function tableView(ref, path, offset, limit) {
  const d = await api(`/api/table?ref=${enc(ref)}&path=${enc(path)}&offset=${offset}&limit=${limit}`);
  document.title = `rlpipe: ${ref}:${path}`;
  const last = Math.min(d.offset + d.rows.length, d.num_rows);
  const pager = h('p', {class: 'pager'},
    d.offset > 0 ? h('a', {href: href.table(ref, path, Math.max(0, d.offset - d.limit))}, '← previous') : null, ' ',
    `rows ${d.rows.length ? d.offset + 1 : 0}–${last} of ${d.num_rows}`, ' ',
    last < d.num_rows ? h('a', {href: href.table(ref, path, d.offset + d.limit)}, 'next →') : null);
  // A trajectories table's rows open as episodes: turn by turn, with
  // the tokens a trainer learns from marked.
  const episodes = (d.table || '').startsWith('trajectories ');
  return h('div', {class: 'table-browser'},
    h('h1', {class: 'mono'}, `${ref}:${path}`),
    h('p', {class: 'muted'}, d.table ? `rlpipe table ${d.table} · ` : '', `${d.columns.length} columns · ${d.num_rows} rows`),
    pager,
    h('div', {class: 'scroll'}, h('table', {class: 'rows'},
      h('thead', {}, h('tr', {}, h('th', {}, '#'), d.columns.map((c) => h('th', {title: c.type}, c.name, h('small', {}, c.short || c.type))))),
      h('tbody', {}, d.rows.map((row, i) => h('tr', {}, h('td', {class: 'num muted'},
        episodes ? h('a', {class: 'episode-link', href: href.episode(ref, path, d.offset + i), title: 'turn by turn'}, d.offset + i) : d.offset + i),
      row.map(cellView)))))),
    d.truncated_cells ? h('p', {class: 'muted'}, `Long values are cut; \`rlpipe cat ${ref}:${path}\` prints them whole.`) : null);
}

function cellView(v) {
  if (v === null || v === undefined) return h('td', {class: 'null'}, 'null');
  if (typeof v === 'number') return h('td', {class: 'num'}, fmtNum(v));
  const text = typeof v === 'object' ? JSON.stringify(v, null, 1) : String(v);
  const td = h('td', {class: 'text', title: 'click to expand'}, text);
  td.addEventListener('click', () => td.classList.toggle('open'));
  return td;
}

// ---- an episode, turn by turn ----------------------------------------------

async function episodeView(ref, path, row) {
  const d = await api(`/api/episode?ref=${enc(ref)}&path=${enc(path)}&row=${row}`);
  document.title = `rlpipe: ${d.prompt_id} #${d.sample_index}`;
  const pager = h('p', {class: 'pager'},
    row > 0 ? h('a', {href: href.episode(ref, path, row - 1)}, '← previous') : null, ' ',
    `row ${row} of ${d.rows}`, ' ',
    row + 1 < d.rows ? h('a', {href: href.episode(ref, path, row + 1)}, 'next →') : null);
  const turns = d.turns.map((t) => h('div', {class: `turn ${t.role}`},
    h('div', {class: 'who'}, t.role,
      t.tokens !== null && t.tokens !== undefined ? h('span', {class: 'badge trained', title: 'sampled by the policy: trained on'}, `trained · ${t.tokens} tokens`)
        : t.role === 'assistant' ? null : h('span', {class: 'badge given', title: 'given to the policy: not trained on'}, 'given')),
    h('pre', {class: 'content'}, t.content),
    t.calls ? t.calls.map((c) => h('pre', {class: 'call'}, h('b', {}, c.name), ' ', c.arguments))
      : t.tool_calls ? h('pre', {class: 'calls'}, t.tool_calls) : null));
  // Spelled, each token is its text (its id in the tooltip); without the
  // policy's tokenizer, the ids.
  const tokens = (sg) => (d.spelled ? sg.ids.map((id, i) => h('span', {class: 'tok', title: `token id ${id}`}, sg.text[i])) : sg.ids.join(' '));
  const strip = d.exact
    ? h('div', {class: 'tokens' + (d.spelled ? ' spelled' : '')}, d.segments.map((sg) => h('span', {class: sg.trainable ? 'seg trainable' : 'seg given',
      title: `${sg.ids.length} ${sg.trainable ? 'trainable' : 'given'} tokens`}, tokens(sg))))
    : h('p', {class: 'muted'}, 'No exact token sequence: the policy returned no prompt token ids, or its prompts did not extend the turns before them. Nothing of this episode is trained on.');
  return h('div', {class: 'episode'},
    h('h1', {}, h('span', {class: 'mono'}, d.prompt_id), ` · episode ${d.sample_index}`),
    h('p', {class: 'crumbs'}, artifactLink(ref, path, `${ref}:${path}`)),
    pager,
    h('dl', {},
      h('dt', {}, 'status'), h('dd', {class: d.status === 'ok' ? '' : 'err'}, d.status, d.error ? ` — ${d.error}` : ''),
      h('dt', {}, 'policy'), h('dd', {class: 'mono'}, d.policy_version),
      h('dt', {}, 'outcome'), h('dd', {class: 'mono'}, d.env_outcome === null ? '—' : JSON.stringify(d.env_outcome)),
      h('dt', {}, 'tokens'), h('dd', {}, d.exact ? `${d.tokens}, of which ${d.trainable} trainable (the replies) and ${d.tokens - d.trainable} given` : '—')),
    section('Turns', turns),
    section('Token sequence', h('p', {class: 'muted'}, d.spelled ? 'The tokens in order, as the policy\'s tokenizer spells them (hover for the id); '
      : d.spell_error ? `Token ids in order: ${d.spell_error}; `
      : `Token ids in order (the UI has no tokenizer for ${d.policy_version || 'this policy'} to spell them: set the openai policy's tokenizer key or pass rlpipe ui --tokenizer); `,
    h('span', {class: 'seg trainable'}, 'trainable'), ' tokens enter the loss, ',
    h('span', {class: 'seg given'}, 'given'), ' ones do not.'), strip));
}

async function objectView(ref, path) {
  const d = await api(`/api/object?ref=${enc(ref)}&path=${enc(path)}`);
  document.title = `rlpipe: ${ref}:${path}`;
  return h('div', {},
    h('h1', {class: 'mono'}, `${ref}:${path}`),
    h('p', {class: 'muted'}, `${fmtBytes(d.size_bytes)} · sha256 ${d.checksum}`, d.truncated ? ' · first MiB shown' : ''),
    d.binary ? h('p', {}, 'Binary content; `rlpipe cat` writes its bytes.') : h('pre', {class: 'object'}, d.text));
}

// ---- start -----------------------------------------------------------------

document.getElementById('open').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const v = document.getElementById('open-input').value.trim();
  const i = v.indexOf(':');
  if (i <= 0) { location.hash = href.tree(v || 'main', ''); return; }
  const ref = v.slice(0, i), path = v.slice(i + 1);
  location.hash = !path || path.endsWith('/') ? href.tree(ref, path) : href.table(ref, path).replace('#/table/', path.endsWith('.parquet') ? '#/table/' : '#/object/');
});
window.addEventListener('hashchange', route);
route();
