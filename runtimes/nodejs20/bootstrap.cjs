'use strict';
// sless runtime shim for Node.js 20 (standard library only). The contract is ../PROTOCOL.md.
//
//   node bootstrap.cjs [--check]
//
// Loads the handler named by SLESS_HANDLER (Lambda's rule) as dynamic import() loads it, so
// CommonJS and ESM load exactly as Node loads them (a file import() would load as CommonJS goes
// straight to the CommonJS loader, as import() itself does, without starting the ESM loader),
// then serves `invoke` frames from the inherited Unix socket (SLESS_CONTROL_FD, normally 3), up
// to SLESS_CONCURRENCY (default 1) at a time: builds the Lambda-style context, calls the handler
// (sync, async, callback, context.succeed/fail/done) and answers with `result` or `error`.
// process.stdout/process.stderr writes (and so console.*) are sent as `log` frames tagged with
// the request being served, always before that request's result (concurrency 1: the request
// being served, whoever writes; > 1: the request whose async context writes, through
// AsyncLocalStorage). An `error` after which the process exits (uncaughtException,
// unhandledRejection, process.exit() during a request) carries `"fatal": true` so the
// supervisor does not reuse the instance.
//
// Started without SLESS_HANDLER, the shim is a generic warm-pool process: it says
// {"type":"ready","generic":true} and waits for a `load` frame that gives it the function
// (handler, code root, environment, concurrency); from then on it is a normal instance.

const fs = require('fs');
const path = require('path');
const Module = module.constructor; // require('module'), without loading its public wrapper

const CHECK = process.argv.slice(2).includes('--check');
const MAX_FRAME = 64 * 1024 * 1024; // larger frames are a protocol error (both directions)
const LOG_CHUNK = 1024 * 1024; // characters per log frame (<= 6 MiB of JSON even if all escaped)

const env = process.env;
// A process started without a function: it gets one from a `load` frame (PROTOCOL.md).
const GENERIC = !CHECK && env.SLESS_HANDLER === undefined;
// From the environment, by configure(): at start, or after `load` in a generic process.
let codeDir = '';
let handlerSpec = '';
let concurrency = 1; // SLESS_CONCURRENCY: invokes in flight at once
let als = null; // concurrency > 1: AsyncLocalStorage holding the invocation of the running code

let handler = null; // the user's function, once loaded
let ready = false; // `ready` was sent (the non-generic one)
let awaitingLoad = false; // generic, `load` not received yet
let sock = null; // the control socket
let controlFd = 3;
let current = null; // concurrency 1: the invocation being served {id, deadline, claimed, sent, onEmpty}
const inflight = new Set(); // invocations started and not answered yet
const queue = []; // invokes received while busy
let eof = false; // the supervisor closed its side
let dying = false; // a fatal error happened: serve nothing more
let closing = false; // shutdown() was called

// ---------------------------------------------------------------------------------------------
// Errors

function runtimeError(name, message) {
  const e = new Error(message);
  e.name = name;
  return e;
}

function isError(v) {
  return v instanceof Error || Object.prototype.toString.call(v) === '[object Error]';
}

// -> {errorType, errorMessage, stackTrace: [lines], text: what goes to stderr}
function describeError(err) {
  try {
    if (isError(err)) {
      let type = typeof err.name === 'string' && err.name ? err.name : '';
      if (!type) type = (err.constructor && err.constructor.name) || 'Error';
      const message = err.message == null ? '' : String(err.message);
      const stack = typeof err.stack === 'string' && err.stack ? err.stack : `${type}: ${message}`;
      return { errorType: type, errorMessage: message, stackTrace: stack.split('\n'), text: stack };
    }
    let message;
    if (typeof err === 'string') message = err;
    else {
      try {
        message = JSON.stringify(err);
      } catch (_) {
        message = undefined;
      }
      if (typeof message !== 'string') message = String(err);
    }
    return { errorType: 'Error', errorMessage: message, stackTrace: [], text: `Error: ${message}` };
  } catch (_) {
    const m = 'the handler failed with a value that could not be described';
    return { errorType: 'Error', errorMessage: m, stackTrace: [], text: `Error: ${m}` };
  }
}

function rawStderr(text) {
  try {
    fs.writeSync(2, `sless nodejs20 bootstrap: ${text}\n`);
  } catch (_) {
    /* nothing else to do */
  }
}

// ---------------------------------------------------------------------------------------------
// Frames out

function frame(json) {
  const len = Buffer.byteLength(json);
  const buf = Buffer.allocUnsafe(4 + len);
  buf.writeUInt32BE(len, 0);
  buf.write(json, 4, len, 'utf8');
  return buf;
}

function send(json) {
  if (sock && !sock.destroyed && sock.writable) sock.write(frame(json));
}

// The invocation the running code belongs to (null outside any, and once it was answered).
function currentInv() {
  if (als === null) return current;
  const inv = als.getStore();
  return inv !== undefined && !inv.sent ? inv : null;
}

// `inv`: the invocation to tag the output with (default: the one the running code belongs to).
function sendLog(stream, text, inv = currentInv()) {
  if (!text) return;
  const id = JSON.stringify(inv ? inv.id : null);
  for (let i = 0; i < text.length; ) {
    let end = Math.min(text.length, i + LOG_CHUNK);
    if (end < text.length) {
      const c = text.charCodeAt(end - 1);
      if (c >= 0xd800 && c <= 0xdbff) end -= 1; // do not split a surrogate pair
    }
    send(`{"type":"log","id":${id},"stream":"${stream}","data":${JSON.stringify(text.slice(i, end))}}`);
    i = end;
  }
}

// console.* write through process.stdout/stderr.write, so patching those captures everything
// written from JavaScript. Writes at the descriptor level still reach the real stdout/stderr.
function captureStream(stream, name) {
  let decoder = null;
  stream.write = function write(chunk, encoding, cb) {
    if (typeof encoding === 'function') {
      cb = encoding;
      encoding = undefined;
    }
    let text;
    if (typeof chunk === 'string') {
      text =
        encoding && encoding !== 'utf8' && encoding !== 'utf-8' && Buffer.isEncoding(encoding)
          ? Buffer.from(chunk, encoding).toString('utf8')
          : chunk;
    } else if (chunk instanceof Uint8Array) {
      if (!decoder) decoder = new TextDecoder('utf-8');
      text = decoder.decode(chunk, { stream: true }); // keeps a split UTF-8 sequence for later
    } else {
      const e = new TypeError(
        'The "chunk" argument must be of type string or an instance of Buffer or Uint8Array.' +
          ` Received ${chunk === null ? 'null' : typeof chunk}`
      );
      e.code = 'ERR_INVALID_ARG_TYPE';
      throw e;
    }
    sendLog(name, text);
    if (typeof cb === 'function') process.nextTick(cb, null);
    return true;
  };
}

// ---------------------------------------------------------------------------------------------
// Loading the handler

const IMPORT_ERROR_CODES = new Set([
  'MODULE_NOT_FOUND',
  'ERR_MODULE_NOT_FOUND',
  'ERR_UNSUPPORTED_DIR_IMPORT',
  'ERR_PACKAGE_PATH_NOT_EXPORTED',
  'ERR_UNKNOWN_FILE_EXTENSION',
  'ERR_REQUIRE_ESM',
]);

function wrapLoadError(e) {
  if (!isError(e)) return e;
  let type = null;
  if (e instanceof SyntaxError || e.name === 'SyntaxError') type = 'Runtime.UserCodeSyntaxError';
  else if (IMPORT_ERROR_CODES.has(e.code)) type = 'Runtime.ImportModuleError';
  if (!type) return e; // any other error thrown while loading is reported as itself
  const w = runtimeError(type, `${e.name}: ${e.message}`);
  w.stack = `${type}: ${e.stack || `${e.name}: ${e.message}`}`;
  return w;
}

function walk(obj, keys) {
  for (const k of keys) {
    if (obj === null || obj === undefined) return undefined;
    obj = obj[k];
  }
  return obj;
}

// The "type" of the package scope of `file` (Node's rule: the nearest package.json above it,
// not looking past a node_modules folder): 'module', 'commonjs', '' (none, or another value),
// or null when a package.json cannot be read or parsed (import() then reports it as Node does).
function packageType(file) {
  let dir = path.dirname(file);
  for (;;) {
    if (path.basename(dir) === 'node_modules') return '';
    let text = null;
    try {
      text = fs.readFileSync(path.join(dir, 'package.json'), 'utf8');
    } catch (e) {
      if (!e || (e.code !== 'ENOENT' && e.code !== 'ENOTDIR')) return null;
    }
    if (text !== null) {
      try {
        const pkg = JSON.parse(text);
        const type = pkg !== null && typeof pkg === 'object' ? pkg.type : undefined;
        return type === 'module' || type === 'commonjs' ? type : '';
      } catch (_) {
        return null;
      }
    }
    const parent = path.dirname(dir);
    if (parent === dir) return '';
    dir = parent;
  }
}

// Whether `file` is a CommonJS module for import() itself, so that loading it with the CommonJS
// loader gives exactly what import() gives. .cjs always; .js in a "type": "commonjs" scope; a .js
// with no "type" (or a file without an extension outside a "type": "module" scope) only if it
// compiles as a CommonJS module body: Node (20.19+) loads such a file as an ES module only when
// it does not (module syntax detection), and import() also prints its warnings about it, so
// anything else, including a syntax error, is left to import().
function loadsAsCommonJS(file) {
  let real;
  try {
    real = fs.realpathSync.native(file); // both loaders resolve symlinks before looking at the scope
  } catch (_) {
    return false;
  }
  const ext = path.extname(real);
  if (ext === '.cjs') return true;
  if (ext !== '.js' && ext !== '') return false;
  const type = packageType(real);
  if (type === null || type === 'module') return false;
  if (type === 'commonjs' && ext === '.js') return true;
  try {
    return compilesAsFunctionBody(fs.readFileSync(real, 'utf8'));
  } catch (_) {
    return false;
  }
}

// Whether `source` compiles as the body of the function the CommonJS loader wraps a module in.
// The Function constructor parses it as vm.compileFunction() and the loader do, except for a
// leading #! line (which the loader allows), and needs no `vm` module (compiled from source at
// every start when V8 heap flags disable the builtins' code cache).
function compilesAsFunctionBody(source) {
  const body = source.startsWith('#!') ? `//${source.slice(2)}` : source;
  try {
    new Function('exports', 'require', 'module', '__filename', '__dirname', body);
    return true;
  } catch (_) {
    return false;
  }
}

// Lambda's rule: folder before the last '/', module up to the first '.', the rest a property path.
async function loadHandler() {
  const spec = handlerSpec;
  if (!spec) throw runtimeError('Runtime.MalformedHandlerName', 'SLESS_HANDLER is not set');
  if (spec.includes('..')) {
    throw runtimeError(
      'Runtime.MalformedHandlerName',
      `'${spec}' is not a valid handler name. Use absolute paths when specifying root directories in handler names.`
    );
  }
  const slash = spec.lastIndexOf('/');
  const folder = spec.slice(0, slash + 1);
  const rest = spec.slice(slash + 1);
  const dot = rest.indexOf('.');
  const moduleName = dot > 0 ? rest.slice(0, dot) : '';
  const props = dot > 0 ? rest.slice(dot + 1).split('.') : [];
  if (!moduleName || props.length === 0 || props.some((p) => p === '')) {
    throw runtimeError('Runtime.MalformedHandlerName', `Bad handler ${spec}`);
  }

  const base = path.resolve(codeDir, folder, moduleName);
  let file = null;
  for (const ext of ['.js', '.mjs', '.cjs', '']) {
    const st = fs.statSync(base + ext, { throwIfNoEntry: false });
    if (!st) continue;
    if (st.isFile()) {
      file = base + ext;
      break;
    }
    if (ext === '' && st.isDirectory()) {
      try {
        file = require.resolve(base); // a folder: its package.json "main" or index.js
      } catch (_) {
        /* not loadable */
      }
    }
  }
  if (!file) {
    throw runtimeError(
      'Runtime.ImportModuleError',
      `Error: Cannot find module '${folder}${moduleName}' (looked for ${moduleName}.js, ${moduleName}.mjs,` +
        ` ${moduleName}.cjs and ${moduleName} in ${path.dirname(base)})`
    );
  }

  let fn;
  if (loadsAsCommonJS(file)) {
    // What import() would do for a CommonJS file, without starting the ESM loader (≈ 10 ms,
    // and a cjs-module-lexer pass over the source): the CommonJS loader, with no parent, as
    // import() loads it. Its namespace would be module.exports plus the named exports Node
    // detects (a snapshot of the same properties), so walking module.exports finds the same.
    let exp;
    try {
      exp = Module._load(file, undefined, false);
    } catch (e) {
      throw wrapLoadError(e);
    }
    fn = walk(exp, props);
    loadedExports = exp;
  } else {
    let ns;
    try {
      ns = await import(require('url').pathToFileURL(file).href);
    } catch (e) {
      throw wrapLoadError(e);
    }
    // An ESM module may also `export default {handler}`; a CommonJS module's namespace holds
    // `default` (module.exports) plus the named exports Node could detect.
    fn = walk(ns, props);
    loadedExports = ns.default !== undefined && ns.default !== null && typeof ns.default === 'object' ? { ...ns.default, ...ns } : ns;
    if (typeof fn !== 'function' && ns.default !== undefined && ns.default !== null) {
      const alt = walk(ns.default, props);
      if (fn === undefined || typeof alt === 'function') fn = alt;
    }
  }
  if (fn === undefined) throw runtimeError('Runtime.HandlerNotFound', `${spec} is undefined or not exported`);
  if (typeof fn !== 'function') throw runtimeError('Runtime.HandlerNotFound', `${spec} is not a function`);
  return fn;
}

// ---------------------------------------------------------------------------------------------
// Context

// Identity values exactly as the Python shim computes them (see PROTOCOL.md, "The context").
let memoryMB, functionName, functionVersion, invokedFunctionArn, logGroupName, logStreamName, functionFolderId, token;

// Everything read from the environment: at start, or after `load` in a generic process.
function configure() {
  codeDir = path.resolve(env.SLESS_CODE_DIR || process.cwd());
  handlerSpec = env.SLESS_HANDLER || '';
  const raw = env.SLESS_CONCURRENCY;
  concurrency = raw === undefined || raw === '' ? 1 : /^[0-9]+$/.test(raw.trim()) ? Number(raw) : 0;
  if (!(concurrency >= 1)) {
    rawStderr(`SLESS_CONCURRENCY=${JSON.stringify(raw)} is not an integer >= 1; serving one invoke at a time`);
    concurrency = 1;
  }
  if (concurrency > 1 && als === null && !CHECK) {
    als = new (require('node:async_hooks').AsyncLocalStorage)();
  }
  memoryMB = String(env.SLESS_MEMORY_MB || env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE || '128');
  functionName = env.SLESS_FUNCTION_NAME || env.AWS_LAMBDA_FUNCTION_NAME || '';
  functionVersion = env.SLESS_FUNCTION_VERSION || env.AWS_LAMBDA_FUNCTION_VERSION || '$LATEST';
  const namespace = env.SLESS_NAMESPACE || 'default';
  functionFolderId = namespace;
  token = env.YC_IAM_TOKEN
    ? {
        access_token: env.YC_IAM_TOKEN,
        expires_in: /^[0-9]+$/.test(env.YC_IAM_TOKEN_EXPIRES_IN || '') ? Number(env.YC_IAM_TOKEN_EXPIRES_IN) : 43200,
        token_type: 'Bearer',
      }
    : undefined;
  invokedFunctionArn = `arn:aws:lambda:local:${namespace}:function:${functionName}`;
  logGroupName = `/aws/lambda/${functionName}`;
  const d = new Date();
  const p = (n) => String(n).padStart(2, '0');
  let hex = '';
  for (let i = 0; i < 4; i++) hex += Math.floor(Math.random() * 0x100000000).toString(16).padStart(8, '0');
  logStreamName = `${d.getUTCFullYear()}/${p(d.getUTCMonth() + 1)}/${p(d.getUTCDate())}/[${functionVersion}]${hex}`;
}

// Yandex's context.getPayload(): the HTTP event's body as Yandex's HTTP integration gives it
// (JSON.parse for application/json, querystring.parse for a form, else the text; base64 bodies
// decoded first); for any other event (cron, job), the event itself.
function payloadOf(event) {
  if (event === null || typeof event !== 'object' || !('body' in event) || !('httpMethod' in event || 'rawPath' in event)) {
    return event;
  }
  let body = event.body;
  if (body === null || body === undefined) return body;
  if (event.isBase64Encoded) body = Buffer.from(String(body), 'base64').toString('utf8');
  const headers = event.headers || {};
  const name = Object.keys(headers).find((k) => k.toLowerCase() === 'content-type');
  const type = name === undefined ? '' : String(headers[name]).split(';')[0].trim().toLowerCase();
  if (type === 'application/json') return JSON.parse(body);
  if (type === 'application/x-www-form-urlencoded') return require('node:querystring').parse(body);
  return body;
}

function alias(obj, name, value) {
  Object.defineProperty(obj, name, { value, enumerable: false, writable: true, configurable: true });
}

function makeContext(inv, done, event) {
  const remaining = () => Math.max(0, inv.deadline - Date.now());
  const ctx = {
    // concurrency > 1: the event loop is shared, so nothing can wait for it to be empty
    callbackWaitsForEmptyEventLoop: als === null,
    functionName,
    functionVersion,
    invokedFunctionArn,
    memoryLimitInMB: memoryMB,
    awsRequestId: inv.id,
    requestId: inv.id,
    logGroupName,
    logStreamName,
    identity: undefined,
    clientContext: undefined,
    getRemainingTimeInMillis: remaining,
    // Yandex Cloud Functions' names
    functionFolderId,
    token,
    getPayload: () => payloadOf(event),
    done,
    succeed: (result) => done(null, result),
    fail: (err) => done(err === undefined || err === null ? 'handled' : err),
  };
  alias(ctx, 'request_id', inv.id);
  alias(ctx, 'aws_request_id', inv.id);
  alias(ctx, 'function_name', functionName);
  alias(ctx, 'function_version', functionVersion);
  alias(ctx, 'memory_limit_in_mb', memoryMB);
  alias(ctx, 'invoked_function_arn', invokedFunctionArn);
  alias(ctx, 'log_group_name', logGroupName);
  alias(ctx, 'log_stream_name', logStreamName);
  alias(ctx, 'get_remaining_time_in_millis', remaining);
  return ctx;
}

// ---------------------------------------------------------------------------------------------
// Invocations

function sendResult(inv, value) {
  let json;
  try {
    json = JSON.stringify(value === undefined ? null : value);
  } catch (e) {
    sendError(inv, runtimeError('Runtime.MarshalError', `Unable to stringify response body: ${e && e.message}`));
    return;
  }
  if (json === undefined) json = 'null'; // a function or symbol
  const msg = `{"type":"result","id":${JSON.stringify(inv.id)},"result":${json}}`;
  if (msg.length > MAX_FRAME / 3 && Buffer.byteLength(msg) > MAX_FRAME) {
    sendError(
      inv,
      runtimeError('Function.ResponseSizeTooLarge', `Response payload size exceeded maximum allowed payload size (${MAX_FRAME} bytes).`)
    );
    return;
  }
  send(msg);
}

// An `error` frame; `fatal`: this process exits right after it (the supervisor discards it).
function errorFrame(id, d, stackTrace, fatal) {
  const f = { type: 'error', id, errorType: d.errorType, errorMessage: d.errorMessage, stackTrace };
  if (fatal) f.fatal = true;
  return f;
}

function sendError(inv, err, fatal = false) {
  const d = describeError(err);
  sendLog('stderr', `${d.text}\n`, inv);
  let msg = JSON.stringify(errorFrame(inv.id, d, d.stackTrace, fatal));
  if (Buffer.byteLength(msg) > MAX_FRAME) {
    msg = JSON.stringify(errorFrame(inv.id, { ...d, errorMessage: d.errorMessage.slice(0, 1024 * 1024) }, [], fatal));
  }
  send(msg);
}

// While a request is in flight the socket does not keep the process alive, so 'beforeExit'
// tells when the event loop ran dry: nothing in flight can settle any more. Each in-flight
// invocation then gets its `onEmpty` answer (null, or the result a callback left waiting).
function updateRef() {
  if (!sock) return;
  if (inflight.size > 0) sock.unref();
  else sock.ref();
}

process.on('beforeExit', () => {
  if (inflight.size === 0 || dying) return;
  for (const inv of [...inflight]) {
    const fn = inv.onEmpty;
    inv.onEmpty = null;
    if (fn) fn();
  }
  updateRef();
});

// The end of a call's output at the descriptor level (PROTOCOL.md, "Fences"): written to fd 1
// and fd 2 before the call's answer, so that the supervisor knows every byte before it in
// those pipes (child processes, fs.writeSync) was written during the call.
function writeFence(id) {
  const fence = Buffer.from(`\u001esless-fence:${id}\u001e\n`);
  for (const fd of [1, 2]) {
    for (let tries = 0; tries < 1000; tries++) {
      try {
        fs.writeSync(fd, fence);
        break;
      } catch (e) {
        if (!e || e.code !== 'EAGAIN') break; // a pipe set non-blocking and full: the supervisor drains it
      }
    }
  }
}

function finish(inv, isError, value, fatal = false) {
  if (inv.sent) return;
  inv.sent = true;
  writeFence(inv.id);
  if (isError) sendError(inv, value, fatal);
  else sendResult(inv, value);
  inv.onEmpty = null;
  inflight.delete(inv);
  if (current === inv) current = null;
  updateRef();
  setImmediate(pump);
}

function invoke(msg) {
  let deadline = Number(msg.deadline_ms);
  if (!Number.isFinite(deadline)) deadline = Date.now() + 1000 * (Number(env.SLESS_TIMEOUT_SEC) || 3);
  const inv = { id: msg.id === undefined ? null : msg.id, deadline, claimed: false, sent: false, onEmpty: null };
  inflight.add(inv);
  if (als === null) {
    current = inv;
    start(inv, msg);
  } else {
    als.run(inv, start, inv, msg); // everything the handler starts carries `inv`
  }
}

function start(inv, msg) {
  // The first way of finishing wins: the callback, context.succeed/fail/done, the returned promise.
  const claim = () => {
    if (inv.claimed) return false;
    inv.claimed = true;
    return true;
  };
  const done = (err, result) => {
    if (!claim()) return;
    if (err !== undefined && err !== null) finish(inv, true, err);
    else finish(inv, false, result);
  };
  const ctx = makeContext(inv, done, msg.event);
  const callback = (err, result) => {
    if (!claim()) return;
    if (err !== undefined && err !== null) finish(inv, true, err);
    else if (als !== null || !ctx.callbackWaitsForEmptyEventLoop) finish(inv, false, result);
    else inv.onEmpty = () => finish(inv, false, result); // Lambda: answer once the loop is idle
  };

  const fn = handler;
  let ret;
  try {
    ret = fn(msg.event, ctx, callback);
  } catch (e) {
    done(e);
    return;
  }
  if (ret !== null && (typeof ret === 'object' || typeof ret === 'function') && typeof ret.then === 'function') {
    Promise.resolve(ret).then(
      (v) => done(null, v),
      (e) => done(e === undefined || e === null ? runtimeError('Error', String(e)) : e)
    );
  } else if (fn.length < 3 && ret !== undefined) {
    done(null, ret); // a plain synchronous return value
  }
  // Nothing settled yet: like Lambda, answer null if the event loop runs dry first.
  if (!inv.sent) {
    if (!inv.onEmpty) {
      inv.onEmpty = () => {
        if (claim()) finish(inv, false, null);
      };
    }
    updateRef(); // only the function's own work keeps the loop alive now
  }
}

function pump() {
  if (dying || !ready) return;
  while (inflight.size < concurrency && queue.length > 0) {
    invoke(queue.shift());
    if (als === null) return; // one at a time: the next starts from finish()'s setImmediate
  }
  if (eof && inflight.size === 0 && queue.length === 0) shutdown(0);
}

// ---------------------------------------------------------------------------------------------
// Frames in

const inChunks = [];
let inTotal = 0;
let inNeed = -1; // body length of the frame being read, -1 while reading its header

function take(n) {
  const buf = inChunks.length === 1 ? inChunks[0] : Buffer.concat(inChunks, inTotal);
  inChunks.length = 0;
  inTotal = buf.length - n;
  if (inTotal > 0) inChunks.push(buf.subarray(n));
  return buf.subarray(0, n);
}

function protocolError(message) {
  rawStderr(`protocol error: ${message}`);
  dying = true;
  shutdown(1);
}

function onData(chunk) {
  inChunks.push(chunk);
  inTotal += chunk.length;
  while (!closing) {
    if (inNeed < 0) {
      if (inTotal < 4) return;
      inNeed = take(4).readUInt32BE(0);
      if (inNeed > MAX_FRAME) return protocolError(`incoming frame of ${inNeed} bytes`);
    }
    if (inTotal < inNeed) return;
    const body = take(inNeed);
    inNeed = -1;
    let msg;
    try {
      msg = JSON.parse(body.toString('utf8'));
    } catch (e) {
      return protocolError(`bad JSON frame: ${e.message}`);
    }
    const type = msg && msg.type;
    if (awaitingLoad) {
      if (type !== 'load') return protocolError(`a generic process expects a load frame first, got ${JSON.stringify(type)}`);
      awaitingLoad = false;
      load(msg);
    } else if (type === 'invoke') {
      queue.push(msg);
      pump();
    } else if (type === 'load') {
      return protocolError('load frame in a process that is not generic or already loaded');
    } else {
      rawStderr(`ignoring frame of type ${JSON.stringify(type)}`);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Exit paths

function shutdown(code) {
  if (closing) return;
  closing = true;
  process.exitCode = code;
  setTimeout(() => process.exit(code), 2000).unref();
  if (!sock || sock.destroyed) {
    process.exit(code);
    return;
  }
  sock.end(() => process.exit(code)); // after every queued frame is written
}

function initError(err) {
  dying = true;
  const e = wrapLoadError(err);
  const d = describeError(e);
  sendLog('stderr', `${d.text}\n`, null);
  send(
    JSON.stringify({
      type: 'init_error',
      errorType: d.errorType,
      errorMessage: d.errorMessage,
      stackTrace: d.stackTrace,
    })
  );
  shutdown(1);
}

// unhandledRejection / uncaughtException: report it for the request being served (concurrency
// > 1: the one whose async context failed, if any), then exit 1. The supervisor fails the other
// requests in flight when the socket closes.
function fatal(err) {
  if (dying) return;
  if (!ready) {
    initError(err);
    return;
  }
  dying = true;
  const inv = currentInv();
  if (inv && !inv.sent) {
    inv.claimed = true;
    finish(inv, true, err, true);
  } else {
    sendLog('stderr', `${describeError(err).text}\n`, null);
  }
  shutdown(1);
}

// ---------------------------------------------------------------------------------------------
// What the entrypoint's module exported, once loaded (for the build check's hint).
let loadedExports = null;

// At build time only (a call's error stays Lambda's): the functions the module exports and
// the entrypoint to set, e.g. "; it exports main: set the entrypoint to index.main (sless
// deploy --entrypoint index.main)".
function handlerHint() {
  const spec = process.env.SLESS_HANDLER || '';
  const prefix = spec.slice(0, spec.lastIndexOf('.'));
  if (!loadedExports || typeof loadedExports !== 'object') return '';
  const names = Object.keys(loadedExports).filter((n) => n !== 'default' && typeof loadedExports[n] === 'function');
  if (names.length === 0) return `; ${prefix} exports no function`;
  names.sort((a, b) => (b.includes('andler') - a.includes('andler')) || a.localeCompare(b));
  return `; it exports ${names.slice(0, 5).join(', ')}: set the entrypoint to ${prefix}.${names[0]} (sless deploy --entrypoint ${prefix}.${names[0]})`;
}

// --check: import the entrypoint, check the handler is a function, exit 0 / 1.

function check() {
  let atLineStart = true;
  const write = process.stdout.write;
  process.stdout.write = function (chunk) {
    if (chunk && chunk.length) {
      atLineStart =
        typeof chunk === 'string' ? chunk.endsWith('\n') : chunk[chunk.length - 1] === 10;
    }
    return write.apply(this, arguments);
  };
  let failed = false;
  const fail = (err) => {
    if (failed) return;
    failed = true;
    process.exitCode = 1;
    const d = describeError(wrapLoadError(err));
    if (d.errorType === 'Runtime.HandlerNotFound') d.errorMessage += handlerHint();
    process.stderr.write(`${d.text}\n`);
    const line = JSON.stringify({ errorType: d.errorType, errorMessage: d.errorMessage });
    write.call(process.stdout, `${atLineStart ? '' : '\n'}${line}\n`, () => process.exit(1));
    setTimeout(() => process.exit(1), 2000).unref();
  };
  process.on('uncaughtException', fail);
  process.on('unhandledRejection', fail);
  loadHandler().then(() => {
    if (!failed) process.exit(0);
  }, fail);
}

// ---------------------------------------------------------------------------------------------
// Start

// Working directory and the variables Lambda code expects (after configure()).
function prepare() {
  if (process.cwd() !== codeDir) {
    try {
      process.chdir(codeDir);
    } catch (_) {
      /* the import reports a missing code root */
    }
  }
  if (env.LAMBDA_TASK_ROOT === undefined) env.LAMBDA_TASK_ROOT = codeDir;
  if (env._HANDLER === undefined) env._HANDLER = handlerSpec;
  if (env.AWS_LAMBDA_LOG_GROUP_NAME === undefined) env.AWS_LAMBDA_LOG_GROUP_NAME = logGroupName;
  if (env.AWS_LAMBDA_LOG_STREAM_NAME === undefined) env.AWS_LAMBDA_LOG_STREAM_NAME = logStreamName;
}

function openSocket() {
  controlFd = Number(env.SLESS_CONTROL_FD || 3);
  try {
    sock = new (require('net').Socket)({ fd: controlFd, readable: true, writable: true, allowHalfOpen: true });
  } catch (e) {
    rawStderr(`cannot open control socket fd ${controlFd}: ${e && e.message}`);
    process.exit(1);
  }
  sock.on('error', (e) => {
    if (!closing) rawStderr(`control socket: ${e && e.message}`);
    const gone = e && (e.code === 'EPIPE' || e.code === 'ECONNRESET');
    process.exit(closing ? process.exitCode : gone ? 0 : 1);
  });

  captureStream(process.stdout, 'stdout');
  captureStream(process.stderr, 'stderr');
  process.on('uncaughtException', fatal);
  process.on('unhandledRejection', fatal);
  // process.exit() called by the function while a request is open: tell the supervisor why.
  process.on('exit', (code) => {
    const inv = currentInv();
    if (!inv || inv.sent || closing || !sock || sock.destroyed || sock.writableLength > 0) return;
    const e = runtimeError('Runtime.ExitError', `RequestId: ${inv.id} Error: Runtime exited with error: exit status ${code}`);
    const d = describeError(e);
    writeFence(inv.id);
    try {
      fs.writeSync(controlFd, frame(JSON.stringify(errorFrame(inv.id, d, [], true))));
    } catch (_) {
      /* the supervisor sees the exit anyway */
    }
  });
}

function listen() {
  sock.on('data', onData);
  sock.on('end', () => {
    eof = true;
    if (awaitingLoad) shutdown(0);
    else if (inflight.size === 0) pump();
  });
}

function loadAndServe() {
  loadHandler().then(
    (fn) => {
      if (dying) return;
      handler = fn;
      ready = true;
      send('{"type":"ready"}');
      if (GENERIC) pump(); // invokes sent right after `load` may be queued already
      else listen();
    },
    (e) => {
      if (!dying) initError(e);
    }
  );
}

// `uid`/`gid` of a `load` frame: the function's credentials, taken before anything of the
// function is read (PROTOCOL.md, "Warm pool"). A process that cannot drop them exits.
function dropPrivileges(uid, gid) {
  try {
    process.setgroups([]);
    process.setgid(gid);
    process.setuid(uid);
  } catch (e) {
    return protocolError(`cannot take uid ${uid} / gid ${gid}: ${e && e.message}`);
  }
  if (process.getuid() !== uid || process.geteuid() !== uid || process.getegid() !== gid) {
    return protocolError(`still uid ${process.geteuid()} / gid ${process.getegid()} after dropping to ${uid} / ${gid}`);
  }
  return true;
}

// A generic process becomes the function's instance (PROTOCOL.md, "Warm pool").
function load(msg) {
  const { handler: spec, code_dir: dir, deps_dir: deps, env: newEnv, concurrency: n, uid, gid } = msg;
  const id = (v) => v === undefined || v === null || (Number.isInteger(v) && v > 0);
  if (!id(uid) || !id(gid) || (uid == null) !== (gid == null)) {
    return protocolError('bad load frame (want uid and gid: both positive integers, or neither)');
  }
  if (uid != null && dropPrivileges(uid, gid) !== true) return;
  const strings = (o) => o !== null && typeof o === 'object' && !Array.isArray(o) && Object.values(o).every((v) => typeof v === 'string');
  if (
    typeof spec !== 'string' ||
    typeof dir !== 'string' ||
    !dir ||
    (deps !== undefined && deps !== null && typeof deps !== 'string') ||
    !strings(newEnv) ||
    (n !== undefined && n !== null && !(Number.isInteger(n) && n >= 1))
  ) {
    return protocolError('bad load frame (want handler: str, code_dir: str, deps_dir: str|null, env: {str: str}, concurrency: int >= 1)');
  }
  try {
    for (const k of Object.keys(env)) delete env[k];
    Object.assign(env, newEnv);
    // the frame's fields win over the same variables in env: the environment a normal start sees
    env.SLESS_CODE_DIR = dir;
    env.SLESS_HANDLER = spec;
    if (deps) env.SLESS_DEPS_DIR = deps;
    else delete env.SLESS_DEPS_DIR;
    if (n !== undefined && n !== null) env.SLESS_CONCURRENCY = String(n);
    env.SLESS_CONTROL_FD = String(controlFd);
  } catch (e) {
    return protocolError(`bad load frame env: ${e && e.message}`);
  }
  // CommonJS global folders (NODE_PATH, $HOME/.node_modules) are computed at start: redo it.
  if (typeof Module._initPaths === 'function') Module._initPaths();
  configure();
  prepare();
  loadAndServe();
}

// A generic process waits for its `load`: meanwhile run once, on the shim's own file, what loading
// a handler runs (V8 compiles each function at its first call), then start the ESM loader (the
// first import() takes ≈ 10 ms) on a module with no file, for ES module handlers and import() in
// CommonJS ones. Each step only if no `load` came first (setImmediate runs after the event loop
// polled the socket); nothing of it is visible to the function.
function warmUp() {
  if (!awaitingLoad) return;
  try {
    const self = fs.realpathSync.native(__filename);
    fs.statSync(self, { throwIfNoEntry: false });
    packageType(self);
    compilesAsFunctionBody('');
    require.resolve(self);
    if (typeof Module._initPaths === 'function') Module._initPaths(); // again at `load`
  } catch (_) {
    /* only a warm-up */
  }
  setImmediate(() => {
    if (awaitingLoad) import('data:text/javascript,').catch(() => {});
  });
}

function main() {
  if (GENERIC) {
    openSocket();
    awaitingLoad = true;
    send('{"type":"ready","generic":true}');
    listen();
    setImmediate(warmUp);
    return;
  }
  configure();
  prepare();
  if (CHECK) {
    check();
    return;
  }
  openSocket();
  loadAndServe();
}

main();
