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
* **Serve.** Read ``invoke`` frames (4-byte big-endian length + UTF-8 JSON) one at a time, call
  ``handler(event, context)``; when it returns an awaitable (``async def`` handlers) run it to
  completion on one event loop kept for the life of the process. Reply with a ``result`` frame,
  or an ``error`` frame (``errorType``/``errorMessage``/``stackTrace`` as Lambda builds them;
  ``Runtime.MarshalError`` when the result is not JSON). ``sys.exit()`` in the handler is a
  ``Runtime.ExitError`` frame with ``"fatal": true``, then the process exits with that status.
  EOF on the socket: exit 0 quietly.
* **Output.** ``sys.stdout``/``sys.stderr`` are replaced by line-flushed text streams that send
  ``log`` frames tagged with the request being served (``null`` outside a request); both are
  flushed before the ``result``/``error`` frame, under one lock, so every log frame of a request
  precedes its reply even when other threads print. The real fds 1 and 2 are left alone (the
  supervisor reads them too), so fd-level writes from C code or child processes still arrive
  and can never corrupt the protocol, which lives only on the control socket. A forked child
  (multiprocessing) drops the socket and writes to the real fds instead.
* **Logging.** Like Lambda, a handler is added to the root logger with Lambda's line format
  ``[LEVEL]\\t<UTC time>Z\\t<request id>\\t<message>\\n`` (root level stays WARNING). To keep
  ``logging`` (~10 ms of imports) off the cold start of functions that never use it, the
  handler is installed by a one-shot import hook the moment ``logging`` is first imported.

Cold start matters: the shim itself imports only builtin / already-loaded modules (``os``,
``sys``, ``io``, ``time``, ``codecs``, ``_thread``, ``_json``). It encodes and decodes JSON with
the C accelerator ``_json`` directly (the ``json`` package would pull in ``re``) and falls back to
``json`` if that is unavailable. ``asyncio`` is imported only for coroutine handlers (before
``ready`` when the handler is visibly ``async def``), ``traceback`` only when an error is
reported.

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
_cur_id = None  # request being served
_cur_id_json = "null"


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
        self._parts = []
        self._size = 0
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
                self._parts.append(s)
                self._size += n
                if self._size >= _STREAM_BUFFER or "\n" in s:
                    self._flush_locked()
        return n

    def flush(self):
        if self._parts:
            with _lock:
                self._flush_locked()

    def close(self):  # never really closed: logging and the shim keep writing to it
        self.flush()

    def reconfigure(self, **kwargs):
        self.flush()

    def _flush_locked(self):
        if not self._parts:
            return
        data = "".join(self._parts)
        self._parts = []
        self._size = 0
        if _fd is not None:
            stream = self._stream
            rid = _cur_id_json
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


def _flush_streams():
    with _lock:
        _STDOUT._flush_locked()
        _STDERR._flush_locked()


def _after_fork_in_child():
    global _fd, _lock
    _lock = _thread.RLock()
    fd, _fd = _fd, None
    for s in (_STDOUT, _STDERR):  # the parent still owns what was buffered
        s._parts = []
        s._size = 0
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
                record.aws_request_id = _cur_id if _cur_id is not None else ""
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


_FUNCTION_NAME = _env("SLESS_FUNCTION_NAME", "AWS_LAMBDA_FUNCTION_NAME")
_FUNCTION_VERSION = _env("SLESS_FUNCTION_VERSION", "AWS_LAMBDA_FUNCTION_VERSION", default="$LATEST")
_NAMESPACE = _env("SLESS_NAMESPACE", default="default")
_MEMORY_MB = _env_number(int, 128, "SLESS_MEMORY_MB", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE")
_TIMEOUT_SEC = _env_number(float, 3.0, "SLESS_TIMEOUT_SEC")
_LOG_GROUP = "/aws/lambda/" + _FUNCTION_NAME
_LOG_STREAM = "%s/[%s]%s" % (time.strftime("%Y/%m/%d", time.gmtime()), _FUNCTION_VERSION, os.urandom(16).hex())


class CognitoIdentity(object):
    cognito_identity_id = None
    cognito_identity_pool_id = None

    def __repr__(self):
        return "CognitoIdentity([cognito_identity_id=None,cognito_identity_pool_id=None])"


class LambdaContext(object):
    """The `context` argument, with Lambda's attribute names."""

    function_name = _FUNCTION_NAME
    function_version = _FUNCTION_VERSION
    memory_limit_in_mb = _MEMORY_MB
    invoked_function_arn = "arn:aws:lambda:local:%s:function:%s" % (_NAMESPACE, _FUNCTION_NAME)
    log_group_name = _LOG_GROUP
    log_stream_name = _LOG_STREAM
    client_context = None
    tenant_id = None

    def __init__(self, request_id, deadline_ms):
        self.aws_request_id = request_id
        self.request_id = request_id
        self.identity = CognitoIdentity()
        self._deadline_ms = deadline_ms

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
    global _cur_id, _cur_id_json
    rid = msg.get("id")
    deadline = msg.get("deadline_ms")
    if not isinstance(deadline, (int, float)) or isinstance(deadline, bool):
        deadline = time.time() * 1000 + _TIMEOUT_SEC * 1000
    with _lock:  # output written so far belongs to no request
        _flush_streams()
        _cur_id = rid
        _cur_id_json = _dumps(rid) if not isinstance(rid, str) else _json_str(rid)
    rid_json = _cur_id_json

    frame = None
    exit_code = None
    try:
        result = handler(msg.get("event"), LambdaContext(rid, deadline))
        if getattr(type(result), "__await__", None) is not None:
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
        _flush_streams()
        try:
            sent = _send(frame)
        except OverflowError:
            frame = None
            error = ("Function.ResponseSizeTooLarge",
                     "Response payload size exceeded the maximum frame size (%d bytes)" % MAX_FRAME, [])
            _STDERR.write(_error_log_text(*error))
            _flush_streams()
            sent = _send(_error_frame("error", rid_json, *error, fatal=exit_code is not None))
        _cur_id = None
        _cur_id_json = "null"
    if exit_code is not None:
        _exit(exit_code)
    if not sent:
        _exit(0)  # supervisor gone


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
    _write_all(2, _error_log_text(error_type, message, stack).encode("utf-8", "replace"))
    line = '{"errorType": %s, "errorMessage": %s}\n' % (_json_str(error_type), _json_str(message))
    _write_all(1, line.encode("utf-8", "replace"))
    os._exit(1)


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
    code_dir, entrypoint = _prepare()

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
    while True:
        msg = _read_frame(fd)
        if msg is None:
            _exit(0)
        if msg.get("type") == "invoke":
            _invoke(handler, msg)
        else:
            try:
                _write_all(2, ("sless python runtime: ignoring frame of type %r\n"
                               % (msg.get("type"),)).encode("utf-8", "replace"))
            except OSError:
                pass


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
