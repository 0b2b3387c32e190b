// The Nereid dashboard's page: plain JavaScript, no library, no build step.
// It asks the dashboard's JSON endpoints (/api/snapshot, /api/rounds,
// /api/events) every POLL_MS and renders the route in the URL's #fragment:
// #/fleet, #/jobs, #/waiting, #/job/<kind>/<namespace>/<name>. It sends the
// token the printed URL gave it (?token=) as a bearer token, never as a
// cookie: a browser sends 127.0.0.1's cookies to every port of it, while
// this origin's storage is this port's alone. Everything
// is built with DOM calls and text nodes, never from HTML text, so nothing the
// cluster says is ever parsed as markup; plots are SVG drawn by hand, each
// point carrying data-node, data-round, data-metric and data-value.
'use strict';

const POLL_MS = 2000;
// The kinds whose rounds are plotted.
const ROUND_KINDS = new Set(['FederatedLearningJob', 'IncrementalLearningJob', 'LifelongLearningJob']);
const SVG_NS = 'http://www.w3.org/2000/svg';
const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2'];
// A running round's stages by stage; a finished round (stage Round: the
// status keeps its start and end, not its stages') by its result.
const STAGE_COLORS = { Train: '#1f77b4', Eval: '#ff7f0e', Deploy: '#9467bd' };
const RESULT_COLORS = { Deployed: '#2ca02c', NotDeployed: '#9e9e9e', Failed: '#d62728' };
// TOKEN_KEY names the token in this origin's localStorage, where the
// dashboard's other tabs and reloads find it.
const TOKEN_KEY = 'nereid-dashboard-token';

// seen holds, per job, the round points the page has been given since it
// opened: a federated learning job's status keeps only each node's last
// report, so earlier rounds exist only here.
const seen = new Map();
// MAX_GONE bounds the points seen that are no longer in the status: a page
// left open on a long job of many nodes (or on a worker that reports
// made-up rounds) would otherwise redraw ever more of them every POLL_MS,
// until the plot's Math.min(...) overflows. The oldest seen go first.
const MAX_GONE = 2000;
// timer is the next poll; generation counts ticks, so that a tick a route
// change overtook neither renders nor polls again.
let timer = null;
let generation = 0;

// el makes an element: attrs are attributes (data-* included), children
// are elements or text.
function el(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

function svgEl(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

function build(node, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) node.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function jobKey(kind, namespace, name) {
  return `${kind}/${namespace}/${name}`;
}

function jobLink(key) {
  const [kind, namespace, name] = key.split('/');
  return el('a', { href: `#/job/${key}`, 'data-job': key }, `${kind} ${namespace}/${name}`);
}

// ago says how long before now t was, in a few characters; '-' for no t,
// as kubectl nereid prints it.
function ago(t, now) {
  if (!t) return '-';
  const s = Math.max(0, Math.round((now - new Date(t)) / 1000));
  if (s < 120) return `${s}s ago`;
  if (s < 7200) return `${Math.round(s / 60)}m ago`;
  if (s < 172800) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86400)}d ago`;
}

function table(headers, rows, attrs) {
  return el('table', attrs, el('thead', {}, el('tr', {}, headers.map((h) => el('th', {}, h)))), el('tbody', {}, rows));
}

function section(title, attrs, ...children) {
  return el('section', attrs, el('h2', {}, title), ...children);
}

function route() {
  let parts;
  try {
    parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  } catch {
    return { page: 'fleet' }; // a malformed %-escape
  }
  if (parts[0] === 'job' && parts.length === 4) {
    return { page: 'job', kind: parts[1], namespace: parts[2], name: parts[3] };
  }
  if (parts[0] === 'jobs' || parts[0] === 'waiting') return { page: parts[0] };
  return { page: 'fleet' };
}

// urlToken is the token of this tab's URL, until the dashboard takes it:
// only then is it kept (localStorage) for the other tabs and reloads, so
// that a link of another site to this page with another token changes
// nothing.
let urlToken = null;

// takeToken takes the printed URL's token out of the address bar, so that
// it stays in neither the history nor a screen share.
function takeToken() {
  const q = new URLSearchParams(location.search);
  if (!q.has('token')) return;
  urlToken = q.get('token');
  q.delete('token');
  const rest = q.toString();
  history.replaceState(null, '', location.pathname + (rest ? `?${rest}` : '') + location.hash);
}

function token() {
  return urlToken ?? localStorage.getItem(TOKEN_KEY) ?? '';
}

// keepToken keeps the URL's token once the dashboard answered it.
function keepToken() {
  if (urlToken === null) return;
  localStorage.setItem(TOKEN_KEY, urlToken);
  urlToken = null;
}

async function getJSON(path) {
  const r = await fetch(path, { headers: { Authorization: `Bearer ${token()}` }, credentials: 'omit', cache: 'no-store' });
  if (!r.ok) {
    const why = (await r.text()).trim();
    if (r.status === 401 || r.status === 403) {
      throw new Error(`${why} (the dashboard was restarted or stopped: open the URL it printed)`);
    }
    throw new Error(`${path}: ${r.status} ${why}`);
  }
  keepToken();
  return r.json();
}

// load asks for what the route shows. A job's events and rounds may fail
// alone (the job is gone, the user may not list events): their sections
// say so, the rest of the page stays.
async function load(r) {
  const data = { snapshot: await getJSON('/api/snapshot') };
  if (r.page === 'job') {
    const q = new URLSearchParams({ kind: r.kind, namespace: r.namespace, name: r.name });
    const [events, rounds] = await Promise.allSettled([
      getJSON(`/api/events?${q}`),
      ROUND_KINDS.has(r.kind) ? getJSON(`/api/rounds?${q}`) : Promise.resolve(null),
    ]);
    data.events = events;
    data.rounds = rounds;
  }
  return data;
}

// settled is a section's content from a request that may have failed.
function settled(result, show) {
  return result.status === 'fulfilled' ? show(result.value) : el('p', { class: 'error' }, String(result.reason.message || result.reason));
}

async function tick() {
  clearTimeout(timer);
  const mine = ++generation;
  const r = route();
  const error = document.getElementById('error');
  try {
    const data = await load(r);
    if (mine !== generation) return;
    render(r, data);
    error.hidden = true;
    const taken = new Date(data.snapshot.taken);
    document.getElementById('status').textContent =
      `Read ${taken.toLocaleTimeString()}, ${scopeText(data.snapshot)}; updates every ${POLL_MS / 1000} s`;
  } catch (e) {
    if (mine !== generation) return;
    error.textContent = String(e.message || e);
    error.hidden = false;
  }
  timer = setTimeout(tick, POLL_MS);
}

function render(r, data) {
  for (const a of document.querySelectorAll('nav a')) {
    a.classList.toggle('current', a.dataset.page === r.page);
  }
  const pages = { fleet: fleetPage, jobs: jobsPage, waiting: waitingPage, job: jobPage };
  if (r.page !== 'job') seen.clear(); // leaving a job forgets its points
  const main = document.getElementById('main');
  main.dataset.page = r.page;
  main.replaceChildren(el('p', { class: 'hint', id: 'scope', 'data-namespace': data.snapshot.namespace || '' }, scopeHint(data.snapshot)),
    ...notes(data.snapshot), pages[r.page](data, r));
}

// scopeText names what the snapshot read: one namespace's jobs, workers
// and Datasets (kubectl's -n, or its context's), or every namespace's (-A).
function scopeText(snapshot) {
  return snapshot.namespace ? `namespace ${snapshot.namespace}` : 'every namespace';
}

// scopeHint says it on the page, and how to see the rest.
function scopeHint(snapshot) {
  if (!snapshot.namespace) return 'Jobs, workers and Datasets of every namespace; the nodes are the cluster\'s.';
  return `Jobs, workers and Datasets of namespace ${snapshot.namespace} only; the nodes are the cluster's. ` +
    'kubectl nereid dashboard -A shows every namespace.';
}

// notes say what the snapshot could not read.
function notes(snapshot) {
  return (snapshot.notes || []).map((n) => el('p', { class: 'note' }, n));
}

// linkText is a node's link: connected, disconnected, unknown (an edge
// node no LocalController ever connected from), '-' for a node that is no
// edge node and has none, as kubectl nereid nodes prints them.
function linkText(n) {
  return n.link || '-';
}

// outboxText is a node's outbox fill ("3% (30/10000 reports,
// 1048576/67108864 bytes)", the Lease's nereid.io/outbox) with its bytes
// in KiB, MiB or GiB; '-' until the node was heard.
function outboxText(fill) {
  if (!fill) return '-';
  return fill.replace(/(\d+)\/(\d+) bytes/, (_, used, max) => `${size(Number(used))} of ${size(Number(max))}`);
}

// size is n bytes in B, KiB, MiB or GiB, at most 3 significant digits.
function size(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${Number(n.toPrecision(3))} ${units[i]}`;
}

// MAX_WORKERS is how many of a node's workers the fleet names before it
// counts the others: a row stays a few lines high.
const MAX_WORKERS = 5;

// workerLines are the lines of a node's Workers cell: its workers that
// have not finished (the first MAX_WORKERS, then how many more), then how
// many ended: a learning cycle keeps its rounds' pods, and tens of them
// would push the other nodes off the screen.
function workerLines(n) {
  const workers = n.workers || [];
  const lines = workers.slice(0, MAX_WORKERS);
  if (workers.length > MAX_WORKERS) lines.push(`+${workers.length - MAX_WORKERS} more`);
  if (n.ended) lines.push(`${n.ended} ended`);
  return lines;
}

// The edge fleet: each node's link, when the hub last heard from it, its jobs.
function fleetPage({ snapshot }) {
  const now = new Date(snapshot.taken);
  const rows = (snapshot.nodes || []).map((n) => el('tr', { 'data-node': n.name, 'data-link': n.link },
    el('td', {}, n.name),
    el('td', {}, el('span', { class: `link ${n.link || 'none'}` }, linkText(n))),
    el('td', { title: n.lastHeard || 'never heard from' }, ago(n.lastHeard, now)),
    el('td', { title: n.outbox || '' }, outboxText(n.outbox)),
    el('td', {}, n.ready),
    el('td', {}, n.edge ? 'edge' : 'cloud'),
    el('td', {}, n.objects),
    el('td', {}, (n.jobs || []).map((j) => el('div', {}, jobLink(j)))),
    el('td', { 'data-workers': (n.workers || []).length, 'data-ended': n.ended || 0 }, workerLines(n).map((w) => el('div', {}, w)))));
  return section('Edge fleet', { id: 'fleet' },
    el('p', { class: 'hint' }, 'Link: the node\'s LocalController link to the cloud, from its Lease; last heard: the Lease\'s renewal.'),
    rows.length ? table(['Node', 'Link', 'Last heard', 'Outbox', 'Ready', 'Role', 'Objects', 'Jobs', 'Workers'], rows)
      : el('p', {}, 'No node visible to your user.'));
}

// phaseClass is the CSS class of a phase: its state, the last word, so a
// learning cycle's "Deploy Failed" is as red as a DIJob's "Failed" and
// its "Train Running" as green as "Running".
function phaseClass(phase) {
  const words = (phase || '').trim().split(/\s+/);
  return `phase ${words[words.length - 1]}`;
}

function jobsPage({ snapshot }) {
  const now = new Date(snapshot.taken);
  const rows = (snapshot.jobs || []).map((j) => {
    const key = jobKey(j.kind, j.namespace, j.name);
    return el('tr', { 'data-job': key, 'data-phase': j.phase },
      el('td', {}, j.kind), el('td', {}, j.namespace), el('td', {}, el('a', { href: `#/job/${key}` }, j.name)),
      el('td', {}, el('span', { class: phaseClass(j.phase) }, j.phase)),
      el('td', {}, j.progress || ''), el('td', {}, j.waiting ? 'waiting' : ''),
      el('td', {}, (j.nodes || []).join(', ')), el('td', {}, ago(j.created, now)));
  });
  return section('Jobs', { id: 'jobs' },
    rows.length ? table(['Kind', 'Namespace', 'Name', 'Phase', 'Progress', 'Waits', 'Nodes', 'Age'], rows)
      : el('p', {}, 'No Nereid job in the namespace shown (kubectl nereid dashboard -A shows every namespace).'));
}

function waitingPage({ snapshot }) {
  const waiting = (snapshot.jobs || []).filter((j) => j.waiting);
  const rows = waiting.map((j) => {
    const key = jobKey(j.kind, j.namespace, j.name);
    return el('tr', { 'data-job': key, 'data-waiting': j.waiting }, el('td', {}, jobLink(key)), el('td', {}, j.phase), el('td', {}, j.waiting));
  });
  return section('Waiting jobs', { id: 'waiting', 'data-count': waiting.length },
    el('p', { class: 'hint' }, 'Jobs waiting to be admitted or placed, and what they lack.'),
    waiting.length ? table(['Job', 'Phase', 'What it lacks'], rows) : el('p', {}, 'No job waits.'));
}

function jobPage(data, r) {
  const key = jobKey(r.kind, r.namespace, r.name);
  const job = (data.snapshot.jobs || []).find((j) => jobKey(j.kind, j.namespace, j.name) === key);
  if (!job) {
    return section(key, { id: 'job', 'data-job': key },
      el('p', {}, 'Not in the snapshot: deleted, or not visible to your user.'));
  }
  return section(`${job.kind} ${job.namespace}/${job.name}`, { id: 'job', 'data-job': key, 'data-phase': job.phase },
    summary(job, data.snapshot),
    conditions(job),
    job.replicas && job.replicas.length ? replicas(job) : null,
    job.stages && job.stages.length ? stages(job, data.snapshot) : null,
    ROUND_KINDS.has(job.kind) ? section('Rounds', { class: 'sub', id: 'rounds' }, settled(data.rounds, (v) => rounds(key, v))) : null,
    section('Events', { class: 'sub', id: 'events' }, settled(data.events, (v) => events(v, new Date(data.snapshot.taken)))));
}

function summary(job, snapshot) {
  const dl = el('dl', { class: 'summary' });
  const add = (k, v) => dl.append(el('dt', {}, k), el('dd', {}, v));
  add('Phase', el('span', { class: phaseClass(job.phase), id: 'phase' }, job.phase));
  if (job.progress) add('Progress', job.progress);
  add('Created', `${job.created} (${ago(job.created, new Date(snapshot.taken))})`);
  if (job.nodes && job.nodes.length) add('Nodes', job.nodes.join(', '));
  if (job.waiting) add('Waits for', el('span', { id: 'waits' }, job.waiting));
  return dl;
}

function conditions(job) {
  const rows = (job.conditions || []).map((c) => el('tr', { 'data-condition': c.type, 'data-status': c.status },
    el('td', {}, c.type), el('td', {}, c.status), el('td', {}, c.reason || ''),
    el('td', {}, c.message || ''), el('td', {}, c.since || '')));
  return section('Conditions', { class: 'sub' },
    rows.length ? table(['Type', 'Status', 'Reason', 'Message', 'Since'], rows) : el('p', {}, 'None.'));
}

function replicas(job) {
  const rows = job.replicas.map((p) => el('tr', { 'data-task': p.task, 'data-node': p.node, 'data-running': p.running, 'data-pending': p.pending, 'data-ended': p.ended },
    el('td', {}, p.task), el('td', {}, p.node || '(unscheduled)'),
    el('td', {}, p.running), el('td', {}, p.pending), el('td', {}, p.ended)));
  return section('Replicas per task and node', { class: 'sub', id: 'replicas' },
    table(['Task', 'Node', 'Running', 'Pending', 'Ended'], rows));
}

function events(list, now) {
  const rows = list.map((e) => el('tr', { 'data-reason': e.reason, class: e.type === 'Warning' ? 'warning' : '' },
    el('td', {}, e.type), el('td', {}, e.reason), el('td', { title: e.last }, ago(e.last, now)),
    el('td', {}, e.count), el('td', {}, e.from || ''), el('td', {}, e.message)));
  return rows.length ? table(['Type', 'Reason', 'Last', 'Count', 'From', 'Message'], rows) : el('p', {}, 'None (events expire after an hour).');
}

// rounds are the job's round points: a plot per metric (a line per node,
// rounds on x) and a table, both of every point seen since the page opened.
function rounds(key, data) {
  const points = accumulate(key, data.points || []);
  const metrics = [...new Set([...(data.metrics || []), ...points.flatMap((p) => Object.keys(p.metrics || {}))])].sort();
  const nodes = [...new Set(points.map((p) => p.node))].sort();
  const color = (node) => COLORS[nodes.indexOf(node) % COLORS.length];
  const fl = key.startsWith('FederatedLearningJob/');
  return el('div', {},
    el('p', { class: 'hint' }, fl
      ? `A federated learning job's status keeps only each node's last report: the points of earlier rounds are those this page has seen while open (it keeps the last ${MAX_GONE} until you leave the job). Hollow points are no longer in the status.`
      : 'A learning cycle\'s status keeps its finished rounds (history) and the current one: the plot shows them, and any the page saw while open.'),
    el('div', { class: 'legend' }, nodes.map((n) => el('span', {}, swatch(color(n)), n))),
    metrics.length ? el('div', { class: 'plots' }, metrics.map((m) => plot(m, points, nodes, color))) : el('p', {}, 'No numeric metric reported yet.'),
    pointsTable(points));
}

// accumulate merges the points into what the page has seen of the job and
// returns all of them, but the oldest beyond MAX_GONE; a point given now is
// marked current.
function accumulate(key, given) {
  if (!seen.has(key)) {
    seen.clear(); // one job at a time: leaving a job forgets its points
    seen.set(key, new Map());
  }
  const all = seen.get(key);
  for (const p of all.values()) p.current = false;
  for (const p of given) {
    const k = `${p.node}|${p.round}|${p.stage || ''}`;
    all.delete(k); // a Map keeps the order keys were set in: the oldest seen first
    all.set(k, { ...p, current: true });
  }
  forgetOldest(all, all.size - given.length - MAX_GONE);
  return [...all.values()].sort((a, b) => a.round - b.round || a.node.localeCompare(b.node));
}

// forgetOldest deletes the n points of all seen longest ago (none if n <= 0).
function forgetOldest(all, n) {
  for (const k of all.keys()) {
    if (n-- <= 0) return;
    all.delete(k);
  }
}

// short is v with at most 6 significant digits, for people (data-value
// keeps it whole).
function short(v) {
  return Number(v.toPrecision(6));
}

// swatch is a legend's square of color c.
function swatch(c) {
  return svgEl('svg', { width: 12, height: 12, class: 'swatch' }, svgEl('rect', { width: 12, height: 12, fill: c }));
}

// plot draws one metric: x the round, y the value, a line per node.
function plot(metric, points, nodes, color) {
  const W = 560, H = 240, L = 56, R = 16, T = 24, B = 36;
  const pts = points.filter((p) => p.metrics && typeof p.metrics[metric] === 'number');
  const xs = pts.map((p) => p.round), ys = pts.map((p) => p.metrics[metric]);
  // Half a round of margin on each side, a tenth of the range on top, so
  // that no point sits on an axis.
  const x0 = Math.min(...xs) - 0.5, x1 = Math.max(...xs) + 0.5;
  const y0 = Math.min(...ys, 0), y1 = Math.max(...ys) + (Math.max(...ys) - y0 || 1) * 0.1;
  const xr = (v) => L + ((v - x0) / (x1 - x0)) * (W - L - R);
  // Each node's points sit a few pixels apart, so that nodes with equal
  // values in a round all show.
  const x = (v, node) => xr(v) + (nodes.indexOf(node) - (nodes.length - 1) / 2) * 5;
  const y = (v) => H - B - ((v - y0) / (y1 - y0)) * (H - T - B);
  const svg = svgEl('svg', { viewBox: `0 0 ${W} ${H}`, class: 'plot', 'data-metric': metric, role: 'img', 'aria-label': `${metric} per round` },
    svgEl('text', { x: L, y: 16, class: 'title' }, metric),
    svgEl('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, class: 'axis' }),
    svgEl('line', { x1: L, y1: T, x2: L, y2: H - B, class: 'axis' }),
    axisLabels(x0, x1, y0, y1, xr, y, H - B, L),
    svgEl('text', { x: W - R, y: H - 4, class: 'label end' }, 'round'));
  for (const node of nodes) {
    const mine = pts.filter((p) => p.node === node);
    if (mine.length > 1) {
      svg.append(svgEl('polyline', { points: mine.map((p) => `${x(p.round, node)},${y(p.metrics[metric])}`).join(' '), stroke: color(node), class: 'series', 'data-node': node }));
    }
    for (const p of mine) {
      svg.append(svgEl('circle', {
        cx: x(p.round, node), cy: y(p.metrics[metric]), r: 4, stroke: color(node), fill: p.current ? color(node) : 'white',
        class: 'point', 'data-node': p.node, 'data-round': p.round, 'data-metric': metric,
        'data-value': p.metrics[metric], 'data-current': p.current,
      }, svgEl('title', {}, `${p.node} round ${p.round}: ${metric} ${short(p.metrics[metric])}`)));
    }
  }
  return svg;
}

function axisLabels(x0, x1, y0, y1, x, y, bottom, left) {
  const labels = [];
  const step = Math.max(1, Math.ceil((x1 - x0) / 10));
  for (let r = Math.ceil(x0); r < x1; r += step) {
    labels.push(svgEl('text', { x: x(r), y: bottom + 16, class: 'label middle' }, r));
  }
  for (const v of [y0, (y0 + y1) / 2, y1]) {
    labels.push(svgEl('text', { x: left - 6, y: y(v) + 4, class: 'label end' }, short(v)));
  }
  return labels;
}

function pointsTable(points) {
  const rows = points.map((p) => el('tr', { 'data-node': p.node, 'data-round': p.round, 'data-current': p.current },
    el('td', {}, p.node), el('td', {}, p.round), el('td', {}, p.stage || ''), el('td', {}, p.message ? `${p.state}: ${p.message}` : (p.state || '')),
    el('td', {}, p.time || ''),
    el('td', {}, Object.entries(p.metrics || {}).map(([k, v]) => `${k}=${short(v)}`).join(' '))));
  return table(['Node', 'Round', 'Stage', 'State', 'Time', 'Metrics'], rows, { class: 'points' });
}

// stages draw a learning cycle's stages on a time line: a row per round,
// a bar per stage from its start to its end (to now while it runs).
function stages(job, snapshot) {
  const now = new Date(snapshot.taken).getTime();
  const list = job.stages.map((s) => ({ ...s, t0: new Date(s.start).getTime(), t1: s.end ? new Date(s.end).getTime() : now }));
  const roundsOf = [...new Set(list.map((s) => s.round))].sort((a, b) => a - b);
  const t0 = Math.min(...list.map((s) => s.t0)), t1 = Math.max(...list.map((s) => s.t1), t0 + 1000);
  const W = 720, L = 72, R = 16, ROW = 28, T = 8, H = T + ROW * roundsOf.length + 28;
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
  const svg = svgEl('svg', { viewBox: `0 0 ${W} ${H}`, class: 'timeline', role: 'img', 'aria-label': 'stages on a time line' });
  roundsOf.forEach((round, i) => {
    const top = T + i * ROW;
    svg.append(svgEl('text', { x: L - 8, y: top + 18, class: 'label end' }, `round ${round}`));
    for (const s of list.filter((s) => s.round === round)) {
      svg.append(svgEl('rect', {
        x: x(s.t0), y: top + 4, width: Math.max(2, x(s.t1) - x(s.t0)), height: ROW - 8,
        fill: (s.stage === 'Round' ? RESULT_COLORS[s.state] : STAGE_COLORS[s.stage]) || '#888',
        class: `stage${s.end ? '' : ' running'}${s.state === 'Waiting' ? ' waiting' : ''}`,
        'data-round': s.round, 'data-stage': s.stage, 'data-state': s.state || '',
      }, svgEl('title', {}, `round ${s.round} ${s.stage} ${s.state || ''}: ${s.start} → ${s.end || 'now'}`)));
    }
  });
  const bottom = T + ROW * roundsOf.length + 16;
  svg.append(svgEl('text', { x: L, y: bottom, class: 'label' }, new Date(t0).toLocaleTimeString()),
    svgEl('text', { x: W - R, y: bottom, class: 'label end' }, new Date(t1).toLocaleTimeString()));
  return section('Stages', { class: 'sub', id: 'stages' },
    el('p', { class: 'hint' }, 'A row per round. A finished round is one bar from its start to its end, colored by its result (the status keeps no more of it); the current round has a bar per stage, pale while it waits for its trigger; a stage still running reaches now.'),
    el('div', { class: 'legend' }, Object.entries({ ...STAGE_COLORS, ...RESULT_COLORS }).map(([s, c]) => el('span', {}, swatch(c), s))),
    svg);
}

window.addEventListener('hashchange', tick);
window.addEventListener('DOMContentLoaded', () => {
  takeToken();
  document.getElementById('period').textContent = `${POLL_MS / 1000} s`;
  tick();
});
