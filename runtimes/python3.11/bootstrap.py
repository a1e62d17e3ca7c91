"""sless Python runtime shim (standard library only).

For contributors
================

The local supervisor (``crates/sless-runtime``) starts one process per function instance::

    python3 runtimes/python3.11/bootstrap.py          # serve: talk frames on SLESS_CONTROL_FD
    python3 runtimes/python3.11/bootstrap.py --check  # build: import the entrypoint, report, exit

``runtimes/PROTOCOL.md`` is the contract; this file implements it and nothing more. In short:

* **Start.** Put ``<folder>``, the code root and ``SLESS_DEPS_DIR`` at the front of
  ``sys.path`` (the shim's own folder is removed so it cannot shadow user modules), import the
  module of ``SLESS_HANDLER`` (``src/hello_world.app.handler`` -> folder ``src``, module
  ``hello_world.app``, function ``handler``; hyphenated module names import fine because the
  path finder looks files up by name) and send ``{"type": "ready"}``. A failure is reported
  with Lambda's error types (``Runtime.ImportModuleError``, ``Runtime.UserCodeSyntaxError``,
  ``Runtime.HandlerNotFound``, ...) in an ``init_error`` frame, then the process exits 1.
* **Generic start.** Without ``SLESS_HANDLER`` the process is a warm-pool process: it sends
  ``{"type": "ready", "generic": true}``, waits for a ``load`` frame, takes on the function's
  environment from it (``_apply_load``) and then starts as above.
* **Serve.** Read ``invoke`` frames (4-byte big-endian length + UTF-8 JSON) one by one, call
  ``handler(event, context)``; when it returns an awaitable (``async def`` handlers) run it to
  completion on one event loop kept for the life of the process. Reply with a ``result`` frame,
  or an ``error`` frame (``errorType``/``errorMessage``/``stackTrace`` as Lambda builds them;
  ``Runtime.MarshalError`` when the result is not JSON). ``sys.exit()`` in the handler is a
  ``Runtime.ExitError`` frame with ``"fatal": true``, then the process exits with that status.
  EOF on the socket: exit 0 quietly.
* **Concurrency.** With ``SLESS_CONCURRENCY`` > 1 the main thread only reads frames: each invoke
  runs in a ``ThreadPoolExecutor`` worker, in a ``contextvars`` context holding its ``_Req``;
  awaitables run on one event loop that runs forever in a thread of its own
  (``run_coroutine_threadsafe``, the task inherits the context). Replies go out in completion
  order. Concurrency 1 never creates a thread.
* **Output.** ``sys.stdout``/``sys.stderr`` are replaced by line-flushed text streams that send
  ``log`` frames tagged with the request being served (``null`` outside a request; with
  concurrency > 1 the request of the writing context, one line buffer per request); a request's
  buffered output is flushed before its ``result``/``error`` frame, under one lock, so every
  log frame of a request precedes its reply even when other threads print. The real fds 1 and 2
  are left alone (the supervisor reads them too), so fd-level writes from C code or child
  processes still arrive and can never corrupt the protocol, which lives only on the control
  socket. A forked child (multiprocessing) drops the socket and writes to the real fds instead.
* **Logging.** Like Lambda, a handler is added to the root logger with Lambda's line format
  ``[LEVEL]\\t<UTC time>Z\\t<request id>\\t<message>\\n`` (root level stays WARNING). To keep
  ``logging`` (~10 ms of imports) off the cold start of functions that never use it, the
  handler is installed by a one-shot import hook the moment ``logging`` is first imported.

Cold start matters: the shim itself imports only builtin / already-loaded modules (``os``,
``sys``, ``io``, ``time``, ``codecs``, ``_thread``, ``_json``). It encodes and decodes JSON with
the C accelerator ``_json`` directly (the ``json`` package would pull in ``re``) and falls back to
``json`` if that is unavailable. ``asyncio`` is imported only for coroutine handlers (before
``ready`` when the handler is visibly ``async def``), ``traceback`` only when an error is
reported, ``contextvars``/``concurrent.futures``/``threading`` only with concurrency > 1 (at the
first invoke).

Test: ``python3 -m unittest discover -s runtimes/tests -p 'test_python*.py' -v``.
"""

import io
import os
import sys
import time
import _thread

MAX_FRAME = 64 * 1024 * 1024  # protocol limit, both directions
_LOG_CHUNK = 1 << 20  # characters per log frame (<= ~6 MiB of JSON even when fully escaped)
_STREAM_BUFFER = 8192  # flush a stream without a newline once this many characters wait
_CO_COROUTINE = 0x80
_MAX_ERROR_MESSAGE = 1 << 20  # characters

_THIS_FILE = (lambda: None).__code__.co_filename


# --------------------------------------------------------------------------------------------
# JSON (via the C accelerator, without importing the json package and therefore re)

def _make_json():
    try:
        from _json import encode_basestring, make_encoder, make_scanner

        class _Ctx(object):
            strict = True
            object_hook = None
            object_pairs_hook = None
            parse_float = float
            parse_int = int
            parse_constant = float

        scan = make_scanner(_Ctx())
        ws = " \t\n\r"

        def loads(text):
            start = len(text) - len(text.lstrip(ws))
            try:
                obj, end = scan(text, start)
            except StopIteration as e:
                raise ValueError("invalid JSON at offset %s" % (e.value,))
            if text[end:].strip(ws):
                raise ValueError("extra data after JSON value at offset %d" % end)
            return obj

        def dumps(obj, default=None):
            # allow_nan=False: NaN/Infinity are not JSON and the supervisor could not parse them.
            encode = make_encoder({}, default, encode_basestring, None, ":", ",", False, False, False)
            return "".join(encode(obj, 0))

        if dumps({"a": [1, "\u00e9", None]}) != '{"a":[1,"\u00e9",null]}' or loads(' {"a":[1]} ') != {"a": [1]}:
            raise ValueError("unexpected _json behaviour")
        return loads, dumps, encode_basestring
    except Exception:
        import json

        def dumps(obj, default=None):
            return json.dumps(obj, default=default, ensure_ascii=False, separators=(",", ":"), allow_nan=False)

        return json.loads, dumps, (lambda s: json.dumps(s, ensure_ascii=False))


_loads, _dumps, _json_str = _make_json()


# --------------------------------------------------------------------------------------------
# Frames

_fd = None  # control socket; None when not serving, in a forked child, or once the peer is gone
_lock = _thread.RLock()  # serialises frames and stream buffers across threads
_cur_req = None  # concurrency 1: the request being served (a _Req), whichever thread writes
_req_var = None  # concurrency > 1: a contextvars.ContextVar holding the caller's _Req


class _Req(object):
    """One invocation: its id (raw and as JSON) and whether its reply is still to come."""

    __slots__ = ("id", "id_json", "open")

    def __init__(self, rid):
        self.id = rid
        self.id_json = _json_str(rid) if isinstance(rid, str) else _dumps(rid)
        self.open = True


def _current():
    """The request whose output this is (None outside any request)."""
    if _req_var is None:
        return _cur_req
    req = _req_var.get()
    # output of work a request left behind (a task, a thread) after its reply has no request
    return req if req is not None and req.open else None


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _send(text):
    """Send one frame. Returns False when the supervisor is gone (or there is no socket)."""
    global _fd
    fd = _fd
    if fd is None:
        return False
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates cannot be sent as UTF-8
        data = text.encode("utf-8", "replace")
    if len(data) > MAX_FRAME:
        raise OverflowError("frame of %d bytes exceeds the 64 MiB limit" % len(data))
    try:
        with _lock:
            _write_all(fd, len(data).to_bytes(4, "big") + data)
    except OSError:
        _fd = None  # peer closed; output falls back to the real fds, the main loop exits at EOF
        return False
    return True


def _read_exact(fd, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = os.readv(fd, [view[got:]])
        if k == 0:
            return None
        got += k
    return buf


def _read_frame(fd):
    """The next frame as a dict, or None at EOF."""
    head = _read_exact(fd, 4)
    if head is None:
        return None
    n = int.from_bytes(head, "big")
    if n > MAX_FRAME:
        _fatal("protocol error: incoming frame of %d bytes exceeds the 64 MiB limit" % n)
    body = _read_exact(fd, n)
    if body is None:
        return None
    try:
        msg = _loads(body.decode("utf-8"))
    except ValueError as e:
        _fatal("protocol error: bad frame: %s" % e)
    if not isinstance(msg, dict):
        _fatal("protocol error: frame is not a JSON object")
    return msg


def _warn(text):
    try:
        _write_all(2, ("sless python runtime: %s\n" % text).encode("utf-8", "replace"))
    except OSError:
        pass


def _fatal(text):
    try:
        _write_all(2, ("sless python runtime: %s\n" % text).encode("utf-8", "replace"))
    finally:
        os._exit(1)


# --------------------------------------------------------------------------------------------
# Output capture

class _LogStream(io.TextIOBase):
    """sys.stdout / sys.stderr replacement: text -> `log` frames, flushed at each newline."""

    encoding = "utf-8"
    newlines = None
    line_buffering = True
    write_through = False
    mode = "w"

    def __init__(self, stream, fd, errors):
        self._stream = stream  # "stdout" | "stderr"
        self._fd = fd  # real descriptor: fileno(), and the fallback when there is no socket
        self._errors = errors
        self._bufs = {}  # request id as JSON ("null": none) -> [size, [parts]] not yet sent
        self._binary = None

    @property
    def name(self):
        return "<%s>" % self._stream

    @property
    def errors(self):
        return self._errors

    @property
    def buffer(self):
        if self._binary is None:
            self._binary = _BinaryWriter(self)
        return self._binary

    def writable(self):
        return True

    def readable(self):
        return False

    def seekable(self):
        return False

    def isatty(self):
        return False

    def fileno(self):
        return self._fd

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        n = len(s)
        if n:
            with _lock:
                req = _current()
                rid = req.id_json if req is not None else "null"
                buf = self._bufs.get(rid)
                if buf is None:
                    buf = self._bufs[rid] = [0, []]
                buf[1].append(s)
                buf[0] += n
                if buf[0] >= _STREAM_BUFFER or "\n" in s:
                    self._flush_locked(rid)
        return n

    def flush(self):
        if self._bufs:
            with _lock:
                self._flush_locked()

    def close(self):  # never really closed: logging and the shim keep writing to it
        self.flush()

    def reconfigure(self, **kwargs):
        self.flush()

    def _flush_locked(self, rid=None):
        """Send what is buffered: everything, or only the output of request `rid` (JSON)."""
        if rid is None:
            while self._bufs:
                key = next(iter(self._bufs))
                self._send_locked(key, "".join(self._bufs.pop(key)[1]))
        else:
            buf = self._bufs.pop(rid, None)
            if buf is not None:
                self._send_locked(rid, "".join(buf[1]))

    def _send_locked(self, rid, data):
        if _fd is not None:
            stream = self._stream
            for i in range(0, len(data), _LOG_CHUNK):
                if not _send('{"type":"log","id":%s,"stream":"%s","data":%s}'
                             % (rid, stream, _json_str(data[i:i + _LOG_CHUNK]))):
                    break
            else:
                return
        try:  # no socket (forked child, supervisor gone): the real descriptor
            _write_all(self._fd, data.encode("utf-8", "backslashreplace"))
        except OSError:
            pass


class _BinaryWriter(io.BufferedIOBase):
    """`sys.stdout.buffer`: bytes are decoded as UTF-8 (invalid bytes replaced) and logged."""

    def __init__(self, text):
        import codecs

        self._text = text
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def writable(self):
        return True

    def write(self, b):
        data = bytes(b)
        s = self._decoder.decode(data)
        if s:
            self._text.write(s)
        return len(data)

    def flush(self):
        self._text.flush()

    def close(self):
        self.flush()

    def fileno(self):
        return self._text.fileno()

    def isatty(self):
        return False


_STDOUT = _LogStream("stdout", 1, "strict")
_STDERR = _LogStream("stderr", 2, "backslashreplace")


def _flush_streams(rid=None):
    """Send buffered output: all of it, or that of request `rid` (its id as JSON)."""
    with _lock:
        _STDOUT._flush_locked(rid)
        _STDERR._flush_locked(rid)


def _after_fork_in_child():
    global _fd, _lock
    _lock = _thread.RLock()
    fd, _fd = _fd, None
    for s in (_STDOUT, _STDERR):  # the parent still owns what was buffered
        s._bufs = {}
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass


# --------------------------------------------------------------------------------------------
# Logging (root handler as Lambda installs it, added when `logging` is first imported)

def _install_logging(logging):
    try:
        if getattr(logging, "_sless_handler_installed", False):
            return

        class LambdaLoggerFilter(logging.Filter):
            def filter(self, record):
                req = _current()
                record.aws_request_id = req.id if req is not None and req.id is not None else ""
                return True

        class LambdaLoggerHandler(logging.Handler):
            def emit(self, record):
                try:
                    msg = self.format(record)
                    if not msg.endswith("\n"):
                        msg += "\n"
                    _STDOUT.write(msg)
                except RecursionError:
                    raise
                except Exception:
                    self.handleError(record)

        formatter = logging.Formatter(
            "[%(levelname)s]\t%(asctime)s.%(msecs)03dZ\t%(aws_request_id)s\t%(message)s\n",
            "%Y-%m-%dT%H:%M:%S",
        )
        formatter.converter = time.gmtime
        handler = LambdaLoggerHandler()
        handler.setFormatter(formatter)
        handler.addFilter(LambdaLoggerFilter())
        logging.getLogger().addHandler(handler)
        logging._sless_handler_installed = True
    except Exception:  # e.g. a user module called logging.py shadows the standard one
        pass


class _LoggingLoader(object):
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self._loader
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self._loader
        self._loader.exec_module(module)
        _install_logging(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _LoggingHook(object):
    """One-shot meta path finder: wraps the loader of `logging` to install the root handler."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "logging":
            return None
        try:
            sys.meta_path.remove(cls)
        except ValueError:
            pass
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _LoggingLoader(spec.loader)
                return spec
        return None


def _setup_logging():
    if "logging" in sys.modules:
        _install_logging(sys.modules["logging"])
    else:
        sys.meta_path.insert(0, _LoggingHook)


# --------------------------------------------------------------------------------------------
# Function identity and the context object

def _env(*names, default=""):
    for n in names:
        v = os.environ.get(n)
        if v:
            return v
    return default


def _env_number(conv, default, *names):
    try:
        return conv(_env(*names))
    except ValueError:
        return default


_TIMEOUT_SEC = 3.0
_LOG_GROUP = _LOG_STREAM = ""


def _init_identity():
    """Read the function's identity from the environment (at start; after `load` when generic)."""
    global _TIMEOUT_SEC, _LOG_GROUP, _LOG_STREAM
    name = _env("SLESS_FUNCTION_NAME", "AWS_LAMBDA_FUNCTION_NAME")
    version = _env("SLESS_FUNCTION_VERSION", "AWS_LAMBDA_FUNCTION_VERSION", default="$LATEST")
    namespace = _env("SLESS_NAMESPACE", default="default")
    _TIMEOUT_SEC = _env_number(float, 3.0, "SLESS_TIMEOUT_SEC")
    _LOG_GROUP = "/aws/lambda/" + name
    _LOG_STREAM = "%s/[%s]%s" % (time.strftime("%Y/%m/%d", time.gmtime()), version, os.urandom(16).hex())
    c = LambdaContext
    c.function_name = name
    c.function_version = version
    c.memory_limit_in_mb = _env_number(int, 128, "SLESS_MEMORY_MB", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE")
    c.invoked_function_arn = "arn:aws:lambda:local:%s:function:%s" % (namespace, name)
    c.log_group_name = _LOG_GROUP
    c.log_stream_name = _LOG_STREAM
    c.function_folder_id = namespace
    c.token = _yandex_token()


def _yandex_token():
    """Yandex's `context.token`: the IAM token given as YC_IAM_TOKEN, else None (PROTOCOL.md)."""
    access = os.environ.get("YC_IAM_TOKEN")
    if not access:
        return None
    return {"access_token": access, "expires_in": _env_number(int, 43200, "YC_IAM_TOKEN_EXPIRES_IN"),
            "token_type": "Bearer"}


def _concurrency():
    """SLESS_CONCURRENCY: how many invokes may be in flight at once (an integer >= 1, default 1)."""
    raw = os.environ.get("SLESS_CONCURRENCY") or "1"
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        _warn("SLESS_CONCURRENCY=%r is not an integer >= 1; serving one invoke at a time" % (raw,))
        return 1
    return n


class CognitoIdentity(object):
    cognito_identity_id = None
    cognito_identity_pool_id = None

    def __repr__(self):
        return "CognitoIdentity([cognito_identity_id=None,cognito_identity_pool_id=None])"


class LambdaContext(object):
    """The `context` argument, with Lambda's attribute names."""

    # identity: set by _init_identity()
    function_name = ""
    function_version = "$LATEST"
    memory_limit_in_mb = 128
    invoked_function_arn = ""
    log_group_name = ""
    log_stream_name = ""
    client_context = None
    tenant_id = None
    # Yandex Cloud Functions' names: set by _init_identity()
    function_folder_id = "default"
    token = None

    def __init__(self, request_id, deadline_ms):
        self.aws_request_id = request_id
        self.request_id = request_id
        self.identity = CognitoIdentity()
        self._deadline_ms = deadline_ms
        self.deadline_ms = int(deadline_ms)

    def get_remaining_time_in_millis(self):
        return max(0, int(self._deadline_ms - time.time() * 1000))

    def log(self, msg):
        _STDOUT.write(str(msg))
        _STDOUT.flush()

    def __repr__(self):
        return (
            "LambdaContext([aws_request_id=%s,log_group_name=%s,log_stream_name=%s,function_name=%s,"
            "memory_limit_in_mb=%s,function_version=%s,invoked_function_arn=%s,client_context=%s,identity=%r])"
            % (self.aws_request_id, self.log_group_name, self.log_stream_name, self.function_name,
               self.memory_limit_in_mb, self.function_version, self.invoked_function_arn,
               self.client_context, self.identity)
        )


# --------------------------------------------------------------------------------------------
# Errors

class _Fault(Exception):
    def __init__(self, error_type, message, stack=None):
        Exception.__init__(self, message)
        self.error_type = error_type
        self.message = message
        self.stack = stack or []


def _internal_file(name):
    if name == _THIS_FILE or name.startswith("<frozen importlib"):
        return True
    aio = sys.modules.get("asyncio")
    if aio is not None:
        aio_dir = os.path.dirname(getattr(aio, "__file__", None) or "/nonexistent/") + os.sep
        return name.startswith(aio_dir)
    return False


def _describe(exc):
    """(errorType, errorMessage, stackTrace) for an exception, Lambda style; shim frames dropped."""
    import traceback

    tb = exc.__traceback__
    while tb is not None and _internal_file(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    try:
        message = str(exc)
    except Exception:
        message = "<unprintable %s object>" % type(exc).__name__
    try:
        stack = traceback.format_list(traceback.extract_tb(tb))
    except Exception:
        stack = []
    return type(exc).__name__, message, stack


def _error_log_text(error_type, message, stack):
    lines = ["[ERROR] " + error_type + (": " + message if message else "")]
    if stack:
        lines.append("Traceback (most recent call last):")
        for element in stack:
            lines.extend(element.splitlines())
    return "\n".join(lines) + "\n"


def _error_frame(kind, rid_json, error_type, message, stack, fatal=False):
    """An `error`/`init_error` frame; `fatal` marks an error after which this process exits."""
    if len(message) > _MAX_ERROR_MESSAGE:
        message = message[:_MAX_ERROR_MESSAGE] + "... (truncated)"
    stack = stack[-1000:]
    head = '{"type":"%s"' % kind + (',"id":%s' % rid_json if rid_json is not None else "")
    return head + ',"errorType":%s,"errorMessage":%s,"stackTrace":%s%s}' % (
        _json_str(error_type), _json_str(message), _dumps([str(s) for s in stack]),
        ',"fatal":true' if fatal else "")


def _exit_status(exc):
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        _write_all(2, ("%s\n" % (code,)).encode("utf-8", "replace"))
    except Exception:
        pass
    return 1


# --------------------------------------------------------------------------------------------
# Loading the handler

def _code_dir():
    return os.path.abspath(os.environ.get("SLESS_CODE_DIR") or os.getcwd())


def _setup_paths(code_dir, folder):
    front = []
    if folder:
        front.append(os.path.normpath(os.path.join(code_dir, folder)))
    front.append(code_dir)
    deps = os.environ.get("SLESS_DEPS_DIR")
    if deps:
        front.append(os.path.abspath(deps))
    own_dir = os.path.dirname(os.path.abspath(_THIS_FILE))
    rest = [p for p in sys.path if p not in front and p and os.path.abspath(p) != own_dir]
    seen = []
    for p in front:
        if p not in seen:
            seen.append(p)
    sys.path[:] = seen + rest


def _load_handler(entrypoint, code_dir):
    """Import the entrypoint and return the handler; raises _Fault for Lambda's known faults."""
    folder, _, spec = entrypoint.rpartition("/")
    modname, dot, fname = spec.rpartition(".")
    label = entrypoint.rpartition(".")[0]
    if not dot or not modname or not fname:
        raise _Fault("Runtime.MalformedHandlerName",
                     "Bad handler '%s': expected '[folder/]module.function'" % entrypoint)
    _setup_paths(code_dir, folder)
    if modname.split(".")[0] in sys.builtin_module_names:
        raise _Fault("Runtime.BuiltInModuleConflict",
                     "Cannot use built-in module %s as a handler module" % modname)
    try:
        __import__(modname)
        module = sys.modules[modname]
    except ImportError as e:
        raise _Fault("Runtime.ImportModuleError",
                     "Unable to import module '%s': %s" % (label, e), _describe(e)[2])
    except SyntaxError as e:
        text = (e.text or "").strip("\n")
        raise _Fault("Runtime.UserCodeSyntaxError",
                     "Syntax error in module '%s': %s" % (label, e),
                     ['  File "%s" Line %s\n    %s\n' % (e.filename, e.lineno, text)])
    try:
        handler = getattr(module, fname)
    except AttributeError:
        raise _Fault("Runtime.HandlerNotFound", "Handler '%s' missing on module '%s'" % (fname, label))
    if not callable(handler):
        raise _Fault("Runtime.HandlerNotFound",
                     "Handler '%s' on module '%s' is not callable (it is %s)"
                     % (fname, label, type(handler).__name__))
    return handler


def _init_failure(exc):
    """(errorType, errorMessage, stackTrace) for any exception raised while loading."""
    if isinstance(exc, _Fault):
        return exc.error_type, exc.message, exc.stack
    if isinstance(exc, SystemExit):
        return "Runtime.ExitError", "Runtime exited with error: exit status %s" % _exit_status(exc), []
    return _describe(exc)


def _looks_async(fn):
    try:
        return _looks_async_unchecked(fn)
    except Exception:
        return False


def _looks_async_unchecked(fn):
    for _ in range(8):
        code = getattr(fn, "__code__", None)
        if code is not None:
            return bool(code.co_flags & _CO_COROUTINE)
        inner = getattr(fn, "func", None) or getattr(fn, "__func__", None)  # partial / method
        if inner is None:
            inner = getattr(type(fn), "__call__", None)  # callable instance
            if inner is None or getattr(inner, "__code__", None) is None:
                return False
        fn = inner
    return False


# --------------------------------------------------------------------------------------------
# Serving

_loop = None


def _event_loop():
    global _loop
    import asyncio

    if _loop is None or _loop.is_closed():
        # Adopt a loop the module made at import time (asyncio.get_event_loop() at top level),
        # so objects bound to it keep working; otherwise start a new one.
        loop = None
        try:
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                loop = asyncio.get_event_loop_policy().get_event_loop()
        except Exception:
            pass
        if loop is None or loop.is_closed() or loop.is_running():
            loop = asyncio.new_event_loop()
        _loop = loop
    asyncio.set_event_loop(_loop)  # asyncio.run() in an earlier call may have unset it
    return _loop


# Concurrency > 1: invokes run in worker threads; awaitables all run on one event loop that runs
# forever in its own thread (adopting the loop from init or module import when there is one).
_loop_lock = _thread.allocate_lock()
_loop_thread = None


def _threaded_loop():
    global _loop, _loop_thread
    with _loop_lock:
        if _loop_thread is None:
            import asyncio
            import threading

            loop = _loop
            if loop is None or loop.is_closed() or loop.is_running():
                loop = asyncio.new_event_loop()
            _loop = loop
            t = threading.Thread(target=_run_loop_forever, args=(loop,), name="sless-asyncio", daemon=True)
            t.start()
            _loop_thread = t
    return _loop


def _run_loop_forever(loop):
    import asyncio

    asyncio.set_event_loop(loop)
    try:
        while not loop.is_closed():
            loop.run_forever()  # returns when the function calls loop.stop(): keep serving
    except SystemExit as e:  # raised by a task that is no request's (each request's is caught)
        _warn("SystemExit in the event loop thread")
        _exit(_exit_status(e))
    except BaseException as e:
        _warn("the event loop thread failed: %r" % (e,))
        _exit(1)
    _warn("the event loop was closed by the function; exiting")
    _exit(1)


async def _settle(awaitable):
    """Await on the loop thread; never raises there (SystemExit would stop the loop)."""
    try:
        return True, await awaitable
    except BaseException as e:
        return False, e


def _await_threaded(awaitable):
    import asyncio

    # run_coroutine_threadsafe copies this thread's context: the task sees the request's _Req.
    ok, value = asyncio.run_coroutine_threadsafe(_settle(awaitable), _threaded_loop()).result()
    if ok:
        return value
    try:
        raise value
    finally:
        value = None


_decimal_token = None


def _encode_result(result):
    global _decimal_token
    found = []

    def default(o):
        decimal = sys.modules.get("decimal")
        if decimal is not None and isinstance(o, decimal.Decimal):  # as a number, like Lambda
            if not o.is_finite():
                raise ValueError("Out of range Decimal values are not JSON compliant: %s" % o)
            found.append(True)
            return _decimal_token + str(o) + _decimal_token
        raise TypeError("Object of type %s is not JSON serializable" % type(o).__name__)

    if _decimal_token is None:
        _decimal_token = "sless-decimal-" + os.urandom(12).hex()
    text = _dumps(result, default)
    if found:
        text = text.replace('"' + _decimal_token, "").replace(_decimal_token + '"', "")
    return text


def _invoke(handler, msg):
    """Serve one invoke frame. Concurrency 1: in the main thread; > 1: in a worker thread."""
    global _cur_req
    rid = msg.get("id")
    deadline = msg.get("deadline_ms")
    if not isinstance(deadline, (int, float)) or isinstance(deadline, bool):
        deadline = time.time() * 1000 + _TIMEOUT_SEC * 1000
    req = _Req(rid)
    rid_json = req.id_json
    threaded = _req_var is not None
    if threaded:
        _req_var.set(req)  # this call runs in a context of its own (see _serve_concurrently)
    else:
        with _lock:  # output written so far belongs to no request
            _flush_streams()
            _cur_req = req

    frame = None
    exit_code = None
    try:
        result = handler(msg.get("event"), LambdaContext(rid, deadline))
        if getattr(type(result), "__await__", None) is not None:
            if threaded:
                result = _await_threaded(result)
            else:
                result = _event_loop().run_until_complete(result)
    except SystemExit as e:
        exit_code = _exit_status(e)
        error = ("Runtime.ExitError",
                 "RequestId: %s Error: Runtime exited with error: exit status %d" % (rid, exit_code), [])
    except BaseException as e:
        error = _describe(e)
        e.__traceback__ = None
    else:
        try:
            body = _encode_result(result)
        except Exception as e:
            error = ("Runtime.MarshalError", "Unable to marshal response: %s" % (e,), [])
        else:
            error = None
            frame = '{"type":"result","id":%s,"result":%s}' % (rid_json, body)
            body = result = None
    with _lock:
        if error is not None:
            _STDERR.write(_error_log_text(*error))
            # sys.exit() in the handler ends the process: the supervisor must not reuse it.
            frame = _error_frame("error", rid_json, *error, fatal=exit_code is not None)
        # all of this request's output goes before its reply (with concurrency > 1 the other
        # requests' unfinished lines stay buffered)
        flush_id = rid_json if threaded else None
        _flush_streams(flush_id)
        _write_fence(rid)
        try:
            sent = _send(frame)
        except OverflowError:
            frame = None
            error = ("Function.ResponseSizeTooLarge",
                     "Response payload size exceeded the maximum frame size (%d bytes)" % MAX_FRAME, [])
            _STDERR.write(_error_log_text(*error))
            _flush_streams(flush_id)
            sent = _send(_error_frame("error", rid_json, *error, fatal=exit_code is not None))
        req.open = False
        if not threaded:
            _cur_req = None
    if exit_code is not None:
        _exit(exit_code)  # with concurrency > 1 this ends the other requests too
    if not sent:
        _exit(0)  # supervisor gone


def _write_fence(rid):
    """Marks the end of a call's descriptor-level output (PROTOCOL.md, "Fences"): written to fd 1
    and fd 2 before the call's answer, so every byte before it in those pipes (child processes,
    os.write, C code) was written during the call."""
    fence = ("\x1esless-fence:%s\x1e\n" % (rid,)).encode("utf-8", "replace")
    for fd in (1, 2):
        try:
            _write_all(fd, fence)
        except OSError:
            pass


def _invoke_in_worker(handler, msg):
    try:
        _invoke(handler, msg)
    except BaseException as e:  # a shim bug: never leave the request unanswered
        _warn("internal error serving an invoke: %r" % (e,))
        _exit(1)


def _exit(code):
    try:
        _flush_streams()
        for s in (sys.__stdout__, sys.__stderr__):
            if s is not None:
                s.flush()
    except BaseException:
        pass
    os._exit(code)


def _prepare():
    _init_identity()
    code_dir = _code_dir()
    try:
        os.chdir(code_dir)
    except OSError:
        pass
    entrypoint = os.environ.get("SLESS_HANDLER", "")
    for key, value in (("LAMBDA_TASK_ROOT", code_dir), ("_HANDLER", entrypoint),
                       ("AWS_LAMBDA_LOG_GROUP_NAME", _LOG_GROUP),
                       ("AWS_LAMBDA_LOG_STREAM_NAME", _LOG_STREAM)):
        if key not in os.environ:
            os.environ[key] = value
    return code_dir, entrypoint


def check():
    """--check: import the entrypoint; on failure the JSON error is the last line of stdout."""
    code_dir, entrypoint = _prepare()
    saved_stdout = os.dup(1)
    os.dup2(2, 1)  # anything the module prints goes to stderr; stdout is ours alone
    failure = None
    try:
        _load_handler(entrypoint, code_dir)
    except BaseException as e:
        failure = _init_failure(e)
    try:
        for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            if s is not None:
                s.flush()
    except BaseException:
        pass
    os.dup2(saved_stdout, 1)
    if failure is None:
        os._exit(0)
    error_type, message, stack = failure
    if error_type == "Runtime.HandlerNotFound":
        message += _handler_hint(entrypoint)
    _write_all(2, _error_log_text(error_type, message, stack).encode("utf-8", "replace"))
    line = '{"errorType": %s, "errorMessage": %s}\n' % (_json_str(error_type), _json_str(message))
    _write_all(1, line.encode("utf-8", "replace"))
    os._exit(1)


def _handler_hint(entrypoint):
    """At build time only (a call's error stays Lambda's): the functions the entrypoint's module
    defines, and the entrypoint to set, e.g. "; main.py defines lambda_handler: set the
    entrypoint to main.lambda_handler (sless deploy --entrypoint main.lambda_handler)"."""
    folder, _, rest = entrypoint.rpartition("/")
    modname = rest.rpartition(".")[0]
    module = sys.modules.get(modname)
    if module is None:
        return ""
    import inspect
    names = [n for n, v in vars(module).items()
             if not n.startswith("_") and inspect.isfunction(v) and getattr(v, "__module__", None) == modname]
    if not names:
        return "; module '%s' defines no function" % modname
    names.sort(key=lambda n: (0 if "handler" in n else 1, n))
    prefix = (folder + "/" if folder else "") + modname
    return "; it defines %s: set the entrypoint to %s.%s (sless deploy --entrypoint %s.%s)" % (
        ", ".join(names[:5]), prefix, names[0], prefix, names[0])


def _drop_privileges(msg):
    """`uid`/`gid` of a `load` frame: the function's credentials, taken before anything of the
    function is read (PROTOCOL.md, "Warm pool"). A process that cannot take them exits."""
    uid, gid = msg.get("uid"), msg.get("gid")
    if uid is None and gid is None:
        return
    if not (type(uid) is int and type(gid) is int and uid > 0 and gid > 0):
        _fatal("protocol error: bad load frame (want uid and gid: both positive integers, or neither)")
    try:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    except OSError as e:
        _fatal("cannot take uid %d / gid %d: %s" % (uid, gid, e))
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid) or os.getgroups():
        _fatal("still uid %r / gid %r after dropping to %d / %d" % (os.getresuid(), os.getresgid(), uid, gid))


_SYS_LANDLOCK = (444, 445, 446)  # create_ruleset, add_rule, restrict_self: one number on every arch


_LANDLOCK_API = None


def _landlock_api():
    """(ctypes, libc, ruleset_attr, path_beneath_attr) for the Landlock calls of `_narrow`,
    made once. A generic process makes them before it says `ready` (importing ctypes takes
    ≈ 1–2 ms), so a cold start from the warm pool does not pay for it."""
    global _LANDLOCK_API
    if _LANDLOCK_API is None:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long

        class _Attr(ctypes.Structure):
            _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]

        class _Beneath(ctypes.Structure):
            _pack_ = 1
            _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]

        _LANDLOCK_API = (ctypes, libc, _Attr, _Beneath)
    return _LANDLOCK_API


def _narrow(layer):
    """`landlock` of a `load` frame: add a Landlock layer allowing only its rules, so a pool
    process started able to read every build reads only its function's (PROTOCOL.md, "Warm
    pool"). The process exits when the layer cannot be added."""
    if layer is None:
        return
    try:
        handled, scoped, rules = layer["handled"], layer.get("scoped", 0), layer["rules"]
        rules = [(str(p), int(b)) for p, b in rules]
        handled, scoped = int(handled), int(scoped)
    except (KeyError, TypeError, ValueError):
        _fatal("protocol error: bad load frame (want landlock: {handled: int, scoped: int, rules: [[path, int]]})")
    ctypes, libc, _Attr, _Beneath = _landlock_api()
    create, add, restrict = _SYS_LANDLOCK
    attr = _Attr(handled, 0, scoped)
    ruleset = libc.syscall(ctypes.c_long(create), ctypes.byref(attr), ctypes.c_size_t(24 if scoped else 8),
                           ctypes.c_uint32(0))
    if ruleset < 0:
        _fatal("cannot create the function's Landlock layer: errno %d" % ctypes.get_errno())
    for path, bits in rules:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # absent here: nothing to allow
        rule = _Beneath(bits, fd)
        added = libc.syscall(ctypes.c_long(add), ctypes.c_int(ruleset), ctypes.c_int(1), ctypes.byref(rule),
                             ctypes.c_uint32(0))
        err = ctypes.get_errno()
        os.close(fd)
        if added < 0 and err != 22:  # EINVAL: folder rights on a file, a rule not needed
            _fatal("cannot add a Landlock rule for %s: errno %d" % (path, err))
    if libc.syscall(ctypes.c_long(restrict), ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
        _fatal("cannot enforce the function's Landlock layer: errno %d" % ctypes.get_errno())
    os.close(ruleset)


def _apply_load(msg, fd):
    """Generic process: take on the function's identity from a `load` frame (see PROTOCOL.md)."""
    _narrow(msg.get("landlock"))
    _drop_privileges(msg)
    handler = msg.get("handler")
    code_dir = msg.get("code_dir")
    deps_dir = msg.get("deps_dir")
    env = msg.get("env")
    concurrency = msg.get("concurrency")
    if not (isinstance(handler, str) and isinstance(code_dir, str) and code_dir
            and (deps_dir is None or isinstance(deps_dir, str))
            and isinstance(env, dict) and all(isinstance(v, str) for v in env.values())
            and (concurrency is None or (type(concurrency) is int and concurrency >= 1))):
        _fatal("protocol error: bad load frame (want handler: str, code_dir: str, deps_dir: str|null,"
               " env: {str: str}, concurrency: int >= 1)")
    try:
        os.environ.clear()
        os.environ.update(env)
        # the frame's fields win over the same variables in env: the environment a normal start sees
        os.environ["SLESS_CODE_DIR"] = code_dir
        os.environ["SLESS_HANDLER"] = handler
        if deps_dir:
            os.environ["SLESS_DEPS_DIR"] = deps_dir
        else:
            os.environ.pop("SLESS_DEPS_DIR", None)
        if concurrency is not None:
            os.environ["SLESS_CONCURRENCY"] = str(concurrency)
        os.environ["SLESS_CONTROL_FD"] = str(fd)
    except (ValueError, TypeError) as e:  # "=" in a name, NUL bytes
        _fatal("protocol error: bad load frame env: %s" % (e,))
    # What the interpreter itself reads from the environment at start, as far as it can be redone
    # (PROTOCOL.md lists what cannot: the pool process must be started with those).
    if hasattr(time, "tzset"):
        time.tzset()
    sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    extra = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if extra:
        own_dir = os.path.dirname(os.path.abspath(_THIS_FILE))
        at = 1 if sys.path and sys.path[0] and os.path.abspath(sys.path[0]) == own_dir else 0
        sys.path[at:at] = [p for p in extra if p not in sys.path]


def serve():
    global _fd
    try:
        fd = int(os.environ.get("SLESS_CONTROL_FD") or "3")
        os.fstat(fd)
    except (ValueError, OSError) as e:
        _fatal("no control socket (SLESS_CONTROL_FD=%r): %s" % (os.environ.get("SLESS_CONTROL_FD"), e))
    os.set_inheritable(fd, False)  # child processes must not hold (or write to) the socket
    os.set_blocking(fd, True)
    _fd = fd
    os.register_at_fork(after_in_child=_after_fork_in_child)
    try:
        sys.__stdout__.reconfigure(line_buffering=True)  # fd 1 is a pipe: do not sit on output
    except Exception:
        pass
    sys.stdout = _STDOUT
    sys.stderr = _STDERR
    _setup_logging()

    generic = "SLESS_HANDLER" not in os.environ
    if generic:  # a warm pool process: interpreter up, no function yet
        try:
            _landlock_api()  # ahead of the load frame (see there)
        except Exception:
            pass  # made again, and failing loudly, if a load frame needs it
        if not _send('{"type":"ready","generic":true}'):
            _exit(0)
        msg = _read_frame(fd)
        if msg is None:
            _exit(0)
        if msg.get("type") != "load":
            _fatal("protocol error: a generic process expects a load frame first, got %r" % (msg.get("type"),))
        _apply_load(msg, fd)
    code_dir, entrypoint = _prepare()
    concurrency = _concurrency()

    try:
        handler = _load_handler(entrypoint, code_dir)
        if _looks_async(handler):
            _event_loop()  # pay for asyncio during init, not in the first request
    except BaseException as e:
        error = _init_failure(e)
        with _lock:
            _STDERR.write(_error_log_text(*error))
            _flush_streams()
            _send(_error_frame("init_error", None, *error))
        _exit(1)

    with _lock:
        _flush_streams()
        if not _send('{"type":"ready"}'):
            _exit(0)
    if concurrency > 1:
        _serve_concurrently(fd, handler, concurrency)
    while True:
        msg = _read_frame(fd)
        if msg is None:
            _exit(0)
        if msg.get("type") == "invoke":
            _invoke(handler, msg)
        else:
            _unexpected_frame(msg)


def _serve_concurrently(fd, handler, concurrency):
    """Concurrency > 1: each invoke runs in a worker thread, in a context of its own."""
    global _req_var
    import contextvars

    _req_var = contextvars.ContextVar("sless_request", default=None)
    pool = None
    while True:
        msg = _read_frame(fd)
        if msg is None:  # EOF: answer what was received, then exit
            if pool is not None:
                pool.shutdown(wait=True)
            _exit(0)
        if msg.get("type") == "invoke":
            if pool is None:
                from concurrent.futures import ThreadPoolExecutor

                pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="sless-invoke")
            pool.submit(contextvars.copy_context().run, _invoke_in_worker, handler, msg)
        else:
            _unexpected_frame(msg)


def _unexpected_frame(msg):
    if msg.get("type") == "load":
        _fatal("protocol error: load frame in a process that is not generic or already loaded")
    _warn("ignoring frame of type %r" % (msg.get("type"),))


def main(argv):
    try:
        import faulthandler  # builtin; a crash in C code then leaves a traceback on fd 2

        faulthandler.enable(file=2)
    except Exception:
        pass
    if "--check" in argv[1:]:
        check()
    else:
        serve()


if __name__ == "__main__":
    main(sys.argv)
