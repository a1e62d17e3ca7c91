"""Protocol-level tests for the Node.js 20 runtime shim (runtimes/nodejs20/bootstrap.cjs).

Each test writes a handler into a temporary code root, starts `node bootstrap.cjs` the way the
supervisor does (clean environment, working directory = code root, one end of a socketpair
inherited as fd 3) and talks to it with frames as described in runtimes/PROTOCOL.md.

    python3 -m unittest discover -s runtimes/tests -p 'test_node*.py' -v
"""

import json
import re
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BOOTSTRAP = os.path.join(os.path.dirname(HERE), "nodejs20", "bootstrap.cjs")
NODE = shutil.which("node") or "/usr/bin/node"
TIMEOUT = 20.0  # generous: the machine may be busy


def now_ms():
    return int(time.time() * 1000)


def clean_env(code_dir, handler, extra=None, control_fd=True):
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": code_dir,
        "LANG": "C.UTF-8",
        "TMPDIR": tempfile.gettempdir(),
        "SLESS_CODE_DIR": code_dir,
        "SLESS_HANDLER": handler,
        "SLESS_NAMESPACE": "default",
        "SLESS_FUNCTION_NAME": "fn",
        "SLESS_FUNCTION_VERSION": "7",
        "SLESS_MEMORY_MB": "256",
        "SLESS_TIMEOUT_SEC": "30",
        "AWS_LAMBDA_FUNCTION_NAME": "fn",
        "AWS_LAMBDA_FUNCTION_VERSION": "7",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
    }
    if control_fd:
        env["SLESS_CONTROL_FD"] = "3"
    env.update(extra or {})
    return env


def pool_env(extra=None):
    """The environment of a generic (warm pool) process: no function yet."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": tempfile.gettempdir(),
        "LANG": "C.UTF-8",
        "TMPDIR": tempfile.gettempdir(),
        "SLESS_CONTROL_FD": "3",
    }
    env.update(extra or {})
    return env


class Shim:
    """One running `node bootstrap.cjs` with the supervisor's end of the socket."""

    def __init__(self, code_dir, handler, env=None, cwd=None, full_env=None):
        self.sock, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        child_fd = child.fileno()

        def put_on_fd_3():
            # In the child, between fork and exec: the inherited end becomes fd 3.
            if child_fd != 3:
                os.dup2(child_fd, 3)  # dup2 clears close-on-exec
            else:
                os.set_inheritable(3, True)

        self.out = tempfile.TemporaryFile()
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [NODE, BOOTSTRAP],
            cwd=cwd or code_dir,
            env=full_env if full_env is not None else clean_env(code_dir, handler, env),
            stdin=subprocess.DEVNULL,
            stdout=self.out,
            stderr=self.err,
            preexec_fn=put_on_fd_3,
            close_fds=False,  # our other descriptors are close-on-exec anyway
        )
        child.close()
        self.sock.settimeout(TIMEOUT)
        self.frames = []  # everything received, in order
        self._seq = 0

    # frames --------------------------------------------------------------------------------
    def send(self, obj):
        data = json.dumps(obj).encode()
        self.sock.sendall(struct.pack(">I", len(data)) + data)

    def invoke(self, event=None, rid=None, deadline_ms=None):
        self._seq += 1
        rid = rid or "req-%d" % self._seq
        if deadline_ms is None:
            deadline_ms = now_ms() + 30000
        self.send({"type": "invoke", "id": rid, "deadline_ms": deadline_ms, "event": event})
        return rid

    def _read_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                if buf:
                    raise AssertionError("EOF in the middle of a frame")
                return None
            buf += chunk
        return buf

    def recv(self):
        """The next frame, or None at EOF."""
        head = self._read_exact(4)
        if head is None:
            return None
        (n,) = struct.unpack(">I", head)
        body = self._read_exact(n)
        frame = json.loads(body.decode("utf-8"))
        self.frames.append(frame)
        return frame

    def until_final(self, rid):
        """(log frames for rid, the result/error frame for rid); fails on anything unexpected."""
        logs = []
        while True:
            f = self.recv()
            if f is None:
                raise AssertionError("EOF before the answer to %s; stderr: %s" % (rid, self.stderr()))
            if f["type"] == "log":
                if f["id"] == rid:
                    logs.append(f)
                continue
            if f["type"] in ("result", "error"):
                if f["id"] != rid:
                    raise AssertionError("answer for %r while waiting for %r" % (f["id"], rid))
                return logs, f
            raise AssertionError("unexpected frame %r" % (f,))

    def call(self, event=None, **kw):
        rid = self.invoke(event, **kw)
        return self.until_final(rid)

    def until_all(self, rids):
        """Every frame up to the answers to all of rids (in any order)."""
        waiting = set(rids)
        frames = []
        while waiting:
            f = self.recv()
            if f is None:
                raise AssertionError("EOF before the answers to %s; stderr: %s" % (sorted(waiting), self.stderr()))
            frames.append(f)
            if f["type"] in ("result", "error"):
                waiting.discard(f["id"])
        return frames

    def expect_ready(self):
        """Read up to the ready frame; returns the init log frames."""
        logs = []
        while True:
            f = self.recv()
            if f is None:
                raise AssertionError("EOF before ready; stderr: %s" % self.stderr())
            if f["type"] == "ready":
                return logs
            if f["type"] == "log":
                logs.append(f)
                continue
            raise AssertionError("expected ready, got %r; stderr: %s" % (f, self.stderr()))

    def drain(self):
        """All frames up to EOF."""
        out = []
        while True:
            f = self.recv()
            if f is None:
                return out
            out.append(f)

    # process -------------------------------------------------------------------------------
    def wait(self, timeout=TIMEOUT):
        return self.proc.wait(timeout=timeout)

    def stdout(self):
        """fd 1 as written, without the fence lines (PROTOCOL.md, "Fences"), as the supervisor logs it."""
        return strip_fences(self.raw_stdout())

    def stderr(self):
        return strip_fences(self.raw_stderr())

    def raw_stdout(self):
        self.out.seek(0)
        return self.out.read().decode("utf-8", "replace")

    def raw_stderr(self):
        self.err.seek(0)
        return self.err.read().decode("utf-8", "replace")

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.out.close()
        self.err.close()


FENCE = re.compile("\x1esless-fence:[^\x1e\n]*\x1e\n")


def strip_fences(text):
    return FENCE.sub("", text)


def stdout_text(logs):
    return "".join(f["data"] for f in logs if f["stream"] == "stdout")


def stderr_text(logs):
    return "".join(f["data"] for f in logs if f["stream"] == "stderr")


def has_package_json_above(directory):
    d = os.path.dirname(os.path.abspath(directory))
    while True:
        if os.path.exists(os.path.join(d, "package.json")):
            return True
        parent = os.path.dirname(d)
        if parent == d:
            return False
        d = parent


class NodeShimTestCase(unittest.TestCase):
    def code(self, files):
        """A fresh code root holding `files` ({relative path: text})."""
        root = tempfile.mkdtemp(prefix="sless-node-test-")
        self.addCleanup(shutil.rmtree, root, True)
        for rel, text in files.items():
            p = os.path.join(root, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w", encoding="utf-8") as fh:
                fh.write(textwrap.dedent(text))
        return root

    def start(self, files, handler="index.handler", env=None, cwd=None, ready=True):
        root = files if isinstance(files, str) else self.code(files)
        shim = Shim(root, handler, env=env, cwd=cwd)
        self.addCleanup(shim.close)
        if ready:
            shim.init_logs = shim.expect_ready()
        return shim

    def start_failing(self, files, handler="index.handler"):
        """Start a shim whose import fails: returns (init_error frame, log frames, exit code)."""
        shim = self.start(files, handler, ready=False)
        frames = shim.drain()
        rc = shim.wait()
        self.assertTrue(frames, "no frames; stderr: %s" % shim.stderr())
        self.assertNotIn("ready", [f["type"] for f in frames])
        last = frames[-1]
        self.assertEqual(last["type"], "init_error", frames)
        self.assertEqual(rc, 1)
        self.assertIsInstance(last["stackTrace"], list)
        return last, [f for f in frames if f["type"] == "log"], rc

    def run_check(self, files, handler="index.handler"):
        root = files if isinstance(files, str) else self.code(files)
        env = clean_env(root, handler, control_fd=False)
        return subprocess.run(
            [NODE, BOOTSTRAP, "--check"],
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )


# ------------------------------------------------------------------------------------------------
class HandlerStyles(NodeShimTestCase):
    def test_cjs_sync_return(self):
        shim = self.start(
            {
                "index.js": """
                console.log("init message");
                exports.handler = (event, context) => ({ echo: event, n: 42 });
                """
            }
        )
        self.assertEqual(shim.init_logs, [{"type": "log", "id": None, "stream": "stdout", "data": "init message\n"}])
        logs, f = shim.call({"a": [1, "two", None], "s": "h\u00e9llo \u2603 \U0001F600"})
        self.assertEqual(f["type"], "result")
        self.assertEqual(f["result"], {"echo": {"a": [1, "two", None], "s": "h\u00e9llo \u2603 \U0001F600"}, "n": 42})
        self.assertEqual(logs, [])
        # served again, in order
        for i in range(3):
            _, f = shim.call(i)
            self.assertEqual(f["result"]["echo"], i)

    def test_module_exports_object(self):
        shim = self.start({"index.js": "module.exports = { handler: () => 'obj' };"})
        self.assertEqual(shim.call({})[1]["result"], "obj")

    def test_cjs_exports_not_statically_detectable_fall_back_to_default(self):
        shim = self.start(
            {
                "index.js": """
                function make() { return { handler: async () => 'from default' }; }
                module.exports = make();
                """
            }
        )
        self.assertEqual(shim.call({})[1]["result"], "from default")

    def test_undefined_result_is_null(self):
        shim = self.start(
            {
                "index.js": """
                exports.handler = async () => {};
                """
            }
        )
        _, f = shim.call({})
        self.assertEqual(f, {"type": "result", "id": f["id"], "result": None})
        self.assertIn('"result":null', json.dumps(f, separators=(",", ":")))

    def test_sync_handler_returning_nothing_answers_null(self):
        shim = self.start({"index.js": "exports.handler = function (event) { console.log('side effect'); };"})
        logs, f = shim.call({})
        self.assertEqual(f["result"], None)
        self.assertEqual(stdout_text(logs), "side effect\n")

    def test_async(self):
        shim = self.start(
            {
                "index.js": """
                exports.handler = async (event) => {
                  await new Promise((r) => setTimeout(r, 30));
                  console.log("waited");
                  return { doubled: event.x * 2 };
                };
                """
            }
        )
        logs, f = shim.call({"x": 21})
        self.assertEqual(f["result"], {"doubled": 42})
        self.assertEqual(stdout_text(logs), "waited\n")

    def test_callback(self):
        shim = self.start(
            {
                "index.js": """
                exports.handler = (event, context, callback) => {
                  if (event.fail) return setTimeout(() => callback(new TypeError("bad input")), 10);
                  setTimeout(() => callback(null, { v: event.v + 1 }), 10);
                };
                """
            }
        )
        self.assertEqual(shim.call({"v": 1})[1]["result"], {"v": 2})
        _, f = shim.call({"fail": True})
        self.assertEqual(f["type"], "error")
        self.assertEqual(f["errorType"], "TypeError")
        self.assertEqual(f["errorMessage"], "bad input")
        self.assertNotIn("fatal", f)

    def test_callback_waits_for_empty_event_loop(self):
        shim = self.start(
            {
                "index.js": """
                exports.handler = (event, context, callback) => {
                  context.callbackWaitsForEmptyEventLoop = event.wait;
                  setTimeout(() => console.log("late"), 100);
                  callback(null, "done");
                };
                """
            }
        )
        # true (the default): the answer waits until the timer ran
        logs, f = shim.call({"wait": True})
        self.assertEqual(f["result"], "done")
        self.assertEqual(stdout_text(logs), "late\n")
        # false: answered at once; the timer's output comes afterwards, outside any request
        logs, f = shim.call({"wait": False})
        self.assertEqual(f["result"], "done")
        self.assertEqual(logs, [])
        after = shim.recv()
        self.assertEqual(after, {"type": "log", "id": None, "stream": "stdout", "data": "late\n"})

    def test_callback_and_promise_first_wins(self):
        shim = self.start(
            {
                "index.js": """
                exports.handler = async (event, context, callback) => {
                  if (event.first === "callback") { callback(null, "from callback"); return "from promise"; }
                  setTimeout(() => callback(null, "from callback"), 50);
                  return "from promise";
                };
                """
            }
        )
        self.assertEqual(shim.call({"first": "callback"})[1]["result"], "from callback")
        self.assertEqual(shim.call({"first": "promise"})[1]["result"], "from promise")
        # the late callback changes nothing, and the next request is answered normally
        self.assertEqual(shim.call({"first": "callback"})[1]["result"], "from callback")

    def test_legacy_context_methods(self):
        shim = self.start(
            {
                "index.js": """
                exports.handler = function (event, context) {
                  setTimeout(() => {
                    if (event.how === "succeed") context.succeed({ ok: 1 });
                    else if (event.how === "fail") context.fail(new RangeError("failed"));
                    else if (event.how === "done-ok") context.done(null, "fine");
                    else if (event.how === "done-err") context.done(new Error("not fine"));
                  }, 20);
                };
                """
            }
        )
        self.assertEqual(shim.call({"how": "succeed"})[1]["result"], {"ok": 1})
        _, f = shim.call({"how": "fail"})
        self.assertEqual((f["type"], f["errorType"], f["errorMessage"]), ("error", "RangeError", "failed"))
        self.assertEqual(shim.call({"how": "done-ok"})[1]["result"], "fine")
        _, f = shim.call({"how": "done-err"})
        self.assertEqual((f["errorType"], f["errorMessage"]), ("Error", "not fine"))

    def test_esm_mjs(self):
        shim = self.start(
            {
                "index.mjs": """
                import { readFileSync } from "node:fs";
                export const handler = async (event) => ({ esm: true, type: typeof readFileSync, event });
                """
            }
        )
        self.assertEqual(shim.call(5)[1]["result"], {"esm": True, "type": "function", "event": 5})

    def test_esm_default_export_object(self):
        shim = self.start({"index.mjs": "export default { handler: async () => 'default object' };"})
        self.assertEqual(shim.call({})[1]["result"], "default object")

    def test_type_module_package_json(self):
        shim = self.start(
            {
                "package.json": '{"name": "m", "type": "module"}',
                "index.js": """
                const top = await Promise.resolve("top-level await");
                export const handler = async () => ({ top, hasRequire: typeof require });
                """,
            }
        )
        self.assertEqual(shim.call({})[1]["result"], {"top": "top-level await", "hasRequire": "undefined"})

    def test_esm_syntax_in_js_without_type_module(self):
        # Node 20 (>= 20.19, module syntax detection on by default): a .js file outside any
        # "type": "module" package that does not parse as CommonJS because of ESM syntax is
        # re-parsed and loaded as an ES module.
        files = {"index.js": "export const handler = async () => ({ kind: typeof require });\n"}
        root = self.code(files)
        if has_package_json_above(root):
            self.skipTest("a package.json above the temp dir would change the module type")
        native = subprocess.run(
            [NODE, "--input-type=module", "-e",
             "const m = await import(process.argv[1]); console.log(JSON.stringify(Object.keys(m)))",
             "file://" + os.path.join(root, "index.js")],
            capture_output=True, text=True, timeout=TIMEOUT, env={"PATH": os.environ.get("PATH", "")},
        )
        self.assertEqual(native.returncode, 0, native.stderr)
        self.assertEqual(json.loads(native.stdout.strip().splitlines()[-1]), ["handler"])  # what Node does

        shim = self.start(root)
        self.assertEqual(shim.call({})[1]["result"], {"kind": "undefined"})  # ran as ESM
        self.assertEqual(stderr_text(shim.init_logs), "")  # no package.json: no warning

    def test_esm_syntax_in_js_with_typeless_package_json(self):
        # Same, next to a package.json without "type": still loaded as ESM, and Node emits its
        # MODULE_TYPELESS_PACKAGE_JSON warning, which reaches the supervisor as stderr output.
        shim = self.start(
            {
                "package.json": '{"name": "typeless"}',
                "index.js": "export const handler = () => 'detected';\n",
            }
        )
        _, f = shim.call({})
        self.assertEqual(f["result"], "detected")
        warnings = "".join(x["data"] for x in shim.frames + shim.init_logs if x["type"] == "log" and x["stream"] == "stderr")
        self.assertIn("MODULE_TYPELESS_PACKAGE_JSON", warnings)

    def test_extension_order_js_first(self):
        shim = self.start(
            {
                "index.js": "exports.handler = () => 'js';",
                "index.mjs": "export const handler = () => 'mjs';",
                "index.cjs": "exports.handler = () => 'cjs';",
            }
        )
        self.assertEqual(shim.call({})[1]["result"], "js")
        shim = self.start({"index.mjs": "export const handler = () => 'mjs';", "index.cjs": "exports.handler = () => 'cjs';"})
        self.assertEqual(shim.call({})[1]["result"], "mjs")
        shim = self.start({"index.cjs": "exports.handler = () => 'cjs';", "index": "exports.handler = () => 'bare';"})
        self.assertEqual(shim.call({})[1]["result"], "cjs")
        shim = self.start({"index": "exports.handler = () => 'bare';"})
        self.assertEqual(shim.call({})[1]["result"], "bare")

    def test_module_with_hyphen(self):
        shim = self.start({"my-function.js": "exports.handler = async () => 'hyphen ok';"}, handler="my-function.handler")
        self.assertEqual(shim.call({})[1]["result"], "hyphen ok")

    def test_nested_folder_and_dotted_property_path(self):
        shim = self.start(
            {
                "src/hello_world.js": """
                exports.app = { handler: async (event) => ({ where: __filename.split("/").slice(-2).join("/"), event }) };
                """
            },
            handler="src/hello_world.app.handler",
        )
        self.assertEqual(shim.call("x")[1]["result"], {"where": "src/hello_world.js", "event": "x"})
        shim = self.start(
            {"a/b/lib.mjs": "export const api = { v1: { handler: () => 'deep' } };"},
            handler="a/b/lib.api.v1.handler",
        )
        self.assertEqual(shim.call({})[1]["result"], "deep")


# ------------------------------------------------------------------------------------------------
ESM_LOADER = "NativeModule internal/modules/esm/loader"
LOADED_BUILTINS = "process.moduleLoadList.filter((m) => m.startsWith('NativeModule '))"


class ModuleLoading(NodeShimTestCase):
    """The handler loads as dynamic import() loads it; a file import() would load as CommonJS
    goes straight to the CommonJS loader (starting the ESM loader costs ~10 ms of cold start)."""

    def test_commonjs_handler_does_not_start_the_esm_loader(self):
        root = self.code({"index.js": "exports.handler = () => %s;" % LOADED_BUILTINS})
        if has_package_json_above(root):
            self.skipTest("a package.json above the temp dir would change the module type")
        shim = self.start(root)
        self.assertNotIn(ESM_LOADER, shim.call({})[1]["result"])
        # .cjs in a "type": "module" package is CommonJS too
        shim = self.start({"package.json": '{"type": "module"}',
                           "index.cjs": "exports.handler = () => [typeof require, %s];" % LOADED_BUILTINS})
        kind, loaded = shim.call({})[1]["result"]
        self.assertEqual(kind, "function")
        self.assertNotIn(ESM_LOADER, loaded)
        # an ES module needs it
        shim = self.start({"index.mjs": "export const handler = () => %s;" % LOADED_BUILTINS})
        self.assertIn(ESM_LOADER, shim.call({})[1]["result"])

    def test_commonjs_module_object_as_import_makes_it(self):
        shim = self.start(
            {
                "index.js": """
                const self = this;
                const loadedAtTop = module.loaded;
                exports.handler = () => ({
                  parent: module.parent === undefined ? "undefined" : String(module.parent),
                  mainIsTheShim: require.main.filename.endsWith("bootstrap.cjs"),
                  cached: require.cache[__filename] === module,
                  thisIsExports: self === module.exports,
                  loadedAtTop, loadedNow: module.loaded, id: module.id === __filename,
                });
                """
            }
        )
        self.assertEqual(
            shim.call({})[1]["result"],
            {"parent": "undefined", "mainIsTheShim": True, "cached": True, "thisIsExports": True,
             "loadedAtTop": False, "loadedNow": True, "id": True},
        )

    def test_hashbang_line(self):
        root = self.code({"index.js": "#!/usr/bin/env node\nexports.handler = () => typeof require;\n"})
        if has_package_json_above(root):
            self.skipTest("a package.json above the temp dir would change the module type")
        self.assertEqual(self.start(root).call({})[1]["result"], "function")

    def test_type_commonjs_package(self):
        shim = self.start({"package.json": '{"type": "commonjs"}', "index.js": "exports.handler = () => typeof require;"})
        self.assertEqual(shim.call({})[1]["result"], "function")
        # "type": "commonjs" turns module syntax detection off: ESM syntax is a syntax error
        err, _, _ = self.start_failing({"package.json": '{"type": "commonjs"}',
                                        "index.js": "import fs from 'node:fs';\nexport const handler = () => 1;\n"})
        self.assertEqual(err["errorType"], "Runtime.UserCodeSyntaxError")
        self.assertIn("Cannot use import statement outside a module", err["errorMessage"])

    def test_top_level_await_without_type_module(self):
        root = self.code({"index.js": "const top = await Promise.resolve('tla');\nexport const handler = () => [top, typeof require];\n"})
        if has_package_json_above(root):
            self.skipTest("a package.json above the temp dir would change the module type")
        self.assertEqual(self.start(root).call({})[1]["result"], ["tla", "undefined"])

    def test_symlinked_entry_file_loads_as_its_target(self):
        root = self.code({"real/lib.mjs": "export const handler = () => ['esm', typeof require];"})
        os.symlink("real/lib.mjs", os.path.join(root, "index.js"))
        self.assertEqual(self.start(root).call({})[1]["result"], ["esm", "undefined"])
        root = self.code({"package.json": '{"type": "module"}', "lib.cjs": "exports.handler = () => ['cjs', typeof require];"})
        os.symlink("lib.cjs", os.path.join(root, "index.js"))
        self.assertEqual(self.start(root).call({})[1]["result"], ["cjs", "function"])

    def test_folder_module(self):
        shim = self.start({"index/package.json": '{"main": "lib/main.js"}',
                           "index/lib/main.js": "exports.handler = () => ['folder', typeof require];"})
        self.assertEqual(shim.call({})[1]["result"], ["folder", "function"])
        shim = self.start({"index/package.json": '{"type": "module", "main": "main.js"}',
                           "index/main.js": "export const handler = () => ['folder', typeof require];"})
        self.assertEqual(shim.call({})[1]["result"], ["folder", "undefined"])

    def test_invalid_package_json(self):
        err, _, _ = self.start_failing({"package.json": '{"name": "x",', "index.js": "exports.handler = () => 1;"})
        self.assertEqual(err["errorType"], "Error")
        self.assertIn("Invalid package config", err["errorMessage"])

    def test_syntax_error_thrown_by_top_level_code_runs_the_module_once(self):
        err, logs, _ = self.start_failing({"index.js": "console.log('top level ran');\nJSON.parse('{');\nexports.handler = () => 1;\n"})
        self.assertEqual(err["errorType"], "Runtime.UserCodeSyntaxError")
        self.assertEqual(stdout_text(logs), "top level ran\n")


# ------------------------------------------------------------------------------------------------
class ContextAndEnvironment(NodeShimTestCase):
    def test_context_fields(self):
        shim = self.start(
            {
                "index.js": """
                exports.handler = async (event, context) => {
                  const r1 = context.getRemainingTimeInMillis();
                  await new Promise((r) => setTimeout(r, 50));
                  const r2 = context.getRemainingTimeInMillis();
                  return {
                    requestId: context.requestId, awsRequestId: context.awsRequestId,
                    functionName: context.functionName, functionVersion: context.functionVersion,
                    memoryLimitInMB: context.memoryLimitInMB, invokedFunctionArn: context.invokedFunctionArn,
                    logGroupName: context.logGroupName, logStreamName: context.logStreamName,
                    callbackWaitsForEmptyEventLoop: context.callbackWaitsForEmptyEventLoop,
                    request_id: context.request_id, aws_request_id: context.aws_request_id,
                    function_name: context.function_name, function_version: context.function_version,
                    memory_limit_in_mb: context.memory_limit_in_mb,
                    snake_remaining: context.get_remaining_time_in_millis(),
                    r1, r2,
                    invoked_function_arn: context.invoked_function_arn,
                    log_group_name: context.log_group_name, log_stream_name: context.log_stream_name,
                    env: { name: process.env.AWS_LAMBDA_FUNCTION_NAME, mem: process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE,
                           logGroup: process.env.AWS_LAMBDA_LOG_GROUP_NAME, logStream: process.env.AWS_LAMBDA_LOG_STREAM_NAME },
                    serialised: JSON.parse(JSON.stringify(context)),
                  };
                };
                """
            },
            env={"SLESS_NAMESPACE": "testns", "AWS_REGION": "eu-west-1"},
        )
        _, f = shim.call({}, rid="abc-123", deadline_ms=now_ms() + 5000)
        r = f["result"]
        self.assertEqual(r["requestId"], "abc-123")
        self.assertEqual(r["awsRequestId"], "abc-123")
        self.assertEqual(r["request_id"], "abc-123")
        self.assertEqual(r["aws_request_id"], "abc-123")
        self.assertEqual(r["functionName"], "fn")
        self.assertEqual(r["function_name"], "fn")
        self.assertEqual(r["functionVersion"], "7")
        self.assertEqual(r["function_version"], "7")
        self.assertEqual(r["memoryLimitInMB"], "256")  # a string, as in Lambda
        self.assertEqual(r["memory_limit_in_mb"], "256")
        # the same formats as the Python shim (test_python_shim.TestServe.test_context_fields)
        self.assertEqual(r["invokedFunctionArn"], "arn:aws:lambda:local:testns:function:fn")
        self.assertEqual(r["invoked_function_arn"], r["invokedFunctionArn"])
        self.assertEqual(r["logGroupName"], "/aws/lambda/fn")
        self.assertEqual(r["log_group_name"], "/aws/lambda/fn")
        self.assertRegex(r["logStreamName"], r"^\d{4}/\d\d/\d\d/\[7\][0-9a-f]{32}$")
        self.assertEqual(r["log_stream_name"], r["logStreamName"])
        self.assertIs(r["callbackWaitsForEmptyEventLoop"], True)
        self.assertTrue(4000 < r["r1"] <= 5000, r)
        self.assertTrue(r["r2"] <= r["r1"] - 40, r)
        self.assertTrue(0 < r["snake_remaining"] <= r["r2"], r)
        self.assertEqual(r["env"], {"name": "fn", "mem": "256", "logGroup": r["logGroupName"], "logStream": r["logStreamName"]})
        # the snake_case aliases do not clutter JSON.stringify(context)
        self.assertIn("awsRequestId", r["serialised"])
        self.assertNotIn("aws_request_id", r["serialised"])

        # a deadline in the past gives 0, never a negative number
        shim2 = self.start({"index.js": "exports.handler = async (e, c) => c.getRemainingTimeInMillis();"})
        self.assertEqual(shim2.call({}, deadline_ms=now_ms() - 1000)[1]["result"], 0)

    def test_arn_default_namespace(self):
        shim = self.start({"index.js": "exports.handler = async (e, c) => c.invokedFunctionArn;"}, env={"SLESS_NAMESPACE": ""})
        self.assertEqual(shim.call({})[1]["result"], "arn:aws:lambda:local:default:function:fn")

    def test_cwd_is_code_root(self):
        files = {
            "data.txt": "relative read works",
            "src/app.js": """
            const fs = require("fs");
            exports.handler = async () => ({ cwd: process.cwd(), data: fs.readFileSync("data.txt", "utf8"),
                                             root: process.env.LAMBDA_TASK_ROOT });
            """,
        }
        root = os.path.realpath(self.code(files))
        shim = self.start(root, handler="src/app.handler")
        r = shim.call({})[1]["result"]
        self.assertEqual(r, {"cwd": root, "data": "relative read works", "root": root})
        # started elsewhere, the shim still runs the function from SLESS_CODE_DIR
        shim = self.start(root, handler="src/app.handler", cwd="/")
        self.assertEqual(shim.call({})[1]["result"]["cwd"], root)

    def test_node_modules_in_code_root(self):
        root = self.code(
            {
                "node_modules/greeter/package.json": '{"name": "greeter", "version": "1.0.0", "main": "lib.js"}',
                "node_modules/greeter/lib.js": "exports.greet = (n) => `hi ${n}`;",
                "index.js": "const { greet } = require('greeter'); exports.handler = async (e) => greet(e);",
                "src/nested.mjs": "import g from 'greeter'; export const handler = (e) => g.greet(e) + '!';",
            }
        )
        shim = self.start(root)
        self.assertEqual(shim.call("ada")[1]["result"], "hi ada")
        shim = self.start(root, handler="src/nested.handler")
        self.assertEqual(shim.call("bob")[1]["result"], "hi bob!")


# ------------------------------------------------------------------------------------------------
class OutputCapture(NodeShimTestCase):
    def test_1000_console_lines_before_result(self):
        shim = self.start(
            {
                "index.js": """
                exports.handler = async (event) => {
                  for (let i = 0; i < 1000; i++) console.log(`line ${i} ` + "x".repeat(i % 50));
                  console.error("to stderr");
                  return "finished";
                };
                """
            }
        )
        for _ in range(2):
            rid = shim.invoke({})
            frames = []
            while True:
                f = shim.recv()
                self.assertIsNotNone(f)
                frames.append(f)
                if f["type"] in ("result", "error"):
                    break
            self.assertEqual(frames[-1], {"type": "result", "id": rid, "result": "finished"})
            logs = frames[:-1]
            self.assertTrue(all(f["type"] == "log" and f["id"] == rid for f in logs))
            lines = stdout_text(logs).split("\n")
            self.assertEqual(lines[-1], "")
            self.assertEqual(lines[:-1], ["line %d %s" % (i, "x" * (i % 50)) for i in range(1000)])
            self.assertEqual(stderr_text(logs), "to stderr\n")

    def test_direct_stream_writes(self):
        shim = self.start(
            {
                "index.js": """
                exports.handler = async () => {
                  const b = Buffer.from("h\u00e9llo \u2603\\n");
                  process.stdout.write(b.subarray(0, 2));   // splits the UTF-8 sequence of \u00e9
                  process.stdout.write(b.subarray(2));
                  process.stdout.write("partial");
                  await new Promise((r) => process.stderr.write("err with callback\\n", r));
                  process.stdout.write("68690a", "hex");
                  return process.stdout.write("x") === true;
                };
                """
            }
        )
        logs, f = shim.call({})
        self.assertIs(f["result"], True)
        self.assertEqual(stdout_text(logs), "h\u00e9llo \u2603\npartialhi\nx")
        self.assertEqual(stderr_text(logs), "err with callback\n")

    def test_each_answer_is_fenced_on_fd_1_and_2(self):
        # PROTOCOL.md, "Fences": before each answer, a fence line with the request id on both
        # descriptors, after what the call wrote there (a partial line stays in front of it).
        shim = self.start(
            {
                "index.js": """
                const fs = require("fs");
                exports.handler = async (event) => {
                  fs.writeSync(1, "partial");
                  fs.writeSync(2, "whole\\n");
                  if (event.boom) throw new Error("x");
                  return "ok";
                };
                """
            }
        )
        _, f1 = shim.call({})
        _, f2 = shim.call({"boom": True})
        self.assertEqual((f1["type"], f2["type"]), ("result", "error"))
        first, second = f1["id"], f2["id"]
        shim.sock.close()
        self.assertEqual(shim.wait(), 0)
        self.assertEqual(
            shim.raw_stdout(), "partial\x1esless-fence:%s\x1e\npartial\x1esless-fence:%s\x1e\n" % (first, second)
        )
        err = shim.raw_stderr()
        self.assertTrue(err.startswith("whole\n\x1esless-fence:%s\x1e\nwhole\n" % first), err)
        self.assertTrue(err.endswith("\x1esless-fence:%s\x1e\n" % second), err)


# ------------------------------------------------------------------------------------------------
class Errors(NodeShimTestCase):
    def assertErrorFrame(self, shim, event, error_type, message, stack_head=None):
        """An ordinary handler error: reported without `fatal`, the instance keeps serving."""
        logs, f = shim.call(event)
        self.assertEqual(f["type"], "error", f)
        self.assertEqual(f["errorType"], error_type)
        self.assertEqual(f["errorMessage"], message)
        self.assertIsInstance(f["stackTrace"], list)
        self.assertNotIn("fatal", f)
        if stack_head is not None:
            self.assertEqual(f["stackTrace"][0], stack_head)
        return logs, f

    def test_thrown_error(self):
        shim = self.start(
            {
                "index.js": """
                class ValidationError extends Error { constructor(m) { super(m); this.name = "ValidationError"; } }
                exports.handler = (event) => {
                  console.log("before");
                  if (event === "custom") throw new ValidationError("field x");
                  if (event === "string") throw "just a string";
                  if (event === "object") throw { code: 42 };
                  throw new Error("boom");
                };
                """
            }
        )
        logs, f = self.assertErrorFrame(shim, "plain", "Error", "boom", "Error: boom")
        self.assertTrue(any("index.js" in line for line in f["stackTrace"]), f["stackTrace"])
        self.assertEqual(stdout_text(logs), "before\n")
        self.assertIn("Error: boom\n    at ", stderr_text(logs))  # the stack, as stderr output
        self.assertErrorFrame(shim, "custom", "ValidationError", "field x", "ValidationError: field x")
        _, f = self.assertErrorFrame(shim, "string", "Error", "just a string")
        self.assertEqual(f["stackTrace"], [])
        self.assertErrorFrame(shim, "object", "Error", '{"code":42}')
        # the instance keeps serving
        self.assertErrorFrame(shim, "plain", "Error", "boom")

    def test_rejection(self):
        shim = self.start(
            {
                "index.js": """
                exports.handler = (event) => {
                  if (event === "async") return (async () => { await null; throw new RangeError("out of range"); })();
                  return Promise.reject(new Error("rejected"));
                };
                """
            }
        )
        self.assertErrorFrame(shim, "async", "RangeError", "out of range", "RangeError: out of range")
        logs, _ = self.assertErrorFrame(shim, "plain", "Error", "rejected")
        self.assertIn("rejected", stderr_text(logs))

    def test_reference_error(self):
        shim = self.start({"index.js": "exports.handler = async () => notDefinedAnywhere + 1;"})
        self.assertErrorFrame(shim, {}, "ReferenceError", "notDefinedAnywhere is not defined",
                              "ReferenceError: notDefinedAnywhere is not defined")

    def test_marshal_error(self):
        shim = self.start(
            {
                "index.js": """
                exports.handler = async (event) => {
                  if (event === "bigint") return { n: 10n };
                  if (event === "circular") { const a = {}; a.self = a; return a; }
                  if (event === "function") return () => 1;
                  if (event === "date") return { d: new Date(0) };
                  return "fine";
                };
                """
            }
        )
        _, f = shim.call("bigint")
        self.assertEqual((f["type"], f["errorType"]), ("error", "Runtime.MarshalError"))
        self.assertNotIn("fatal", f)
        self.assertIn("BigInt", f["errorMessage"])
        _, f = shim.call("circular")
        self.assertEqual(f["errorType"], "Runtime.MarshalError")
        self.assertIn("circular", f["errorMessage"])
        self.assertEqual(shim.call("function")[1]["result"], None)
        self.assertEqual(shim.call("date")[1]["result"], {"d": "1970-01-01T00:00:00.000Z"})
        self.assertEqual(shim.call("x")[1]["result"], "fine")

    def test_unhandled_rejection_reports_and_exits(self):
        shim = self.start(
            {
                "index.js": """
                exports.handler = async () => {
                  Promise.reject(new TypeError("nobody listens"));
                  await new Promise((r) => setTimeout(r, 300));
                  return "too late";
                };
                """
            }
        )
        rid = shim.invoke({})
        _, f = shim.until_final(rid)
        self.assertEqual((f["type"], f["errorType"], f["errorMessage"]), ("error", "TypeError", "nobody listens"))
        self.assertIs(f.get("fatal"), True)  # the process exits: do not reuse it
        self.assertEqual(shim.drain(), [])
        self.assertEqual(shim.wait(), 1)

    def test_uncaught_exception_reports_and_exits(self):
        shim = self.start(
            {
                "index.js": """
                exports.handler = (event, context, callback) => {
                  setTimeout(() => { throw new RangeError("kaboom"); }, 10);
                };
                """
            }
        )
        logs, f = shim.call({})
        self.assertEqual((f["type"], f["errorType"], f["errorMessage"]), ("error", "RangeError", "kaboom"))
        self.assertIs(f.get("fatal"), True)
        self.assertIn("kaboom", stderr_text(logs))
        self.assertEqual(shim.drain(), [])
        self.assertEqual(shim.wait(), 1)

    def test_process_exit_in_handler(self):
        shim = self.start({"index.js": "exports.handler = async () => { console.log('bye'); process.exit(3); };"})
        logs, f = shim.call({})
        self.assertEqual((f["type"], f["errorType"]), ("error", "Runtime.ExitError"))
        self.assertIs(f.get("fatal"), True)
        self.assertEqual(stdout_text(logs), "bye\n")
        self.assertEqual(shim.drain(), [])
        self.assertEqual(shim.wait(), 3)


# ------------------------------------------------------------------------------------------------
class InitErrors(NodeShimTestCase):
    def test_module_not_found(self):
        err, logs, _ = self.start_failing({"other.js": "exports.handler = () => 1;"}, handler="index.handler")
        self.assertEqual(err["errorType"], "Runtime.ImportModuleError")
        self.assertIn("Cannot find module 'index'", err["errorMessage"])
        self.assertIn("Runtime.ImportModuleError", stderr_text(logs))

    def test_dependency_not_found(self):
        err, _, _ = self.start_failing({"index.js": "require('no-such-package-xyz'); exports.handler = () => 1;"})
        self.assertEqual(err["errorType"], "Runtime.ImportModuleError")
        self.assertIn("Cannot find module 'no-such-package-xyz'", err["errorMessage"])
        err, _, _ = self.start_failing({"index.mjs": "import 'no-such-package-xyz'; export const handler = () => 1;"})
        self.assertEqual(err["errorType"], "Runtime.ImportModuleError")
        self.assertIn("no-such-package-xyz", err["errorMessage"])

    def test_syntax_error(self):
        err, _, _ = self.start_failing({"index.js": "exports.handler = () => {\n  let x = ;\n};\n"})
        self.assertEqual(err["errorType"], "Runtime.UserCodeSyntaxError")
        self.assertIn("SyntaxError: Unexpected token ';'", err["errorMessage"])  # Node's own message
        self.assertTrue(any("index.js:2" in line for line in err["stackTrace"]), err["stackTrace"])
        err, _, _ = self.start_failing({"index.mjs": "export const handler = () => {\n  let x = ;\n};\n"})
        self.assertEqual(err["errorType"], "Runtime.UserCodeSyntaxError")
        self.assertIn("SyntaxError: Unexpected token ';'", err["errorMessage"])

    def test_a_build_check_names_the_entrypoint_to_set(self):
        # Regression (issue 13): the build check adds the fix to the (Lambda) message.
        p = self.run_check({"index.js": "exports.main = async () => 1;\nexports.helper = () => 2;\nexports.n = 3;"})
        self.assertEqual(p.returncode, 1, p.stderr)
        err = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertEqual(err["errorMessage"], "index.handler is undefined or not exported; it exports helper, main: "
                         "set the entrypoint to index.helper (sless deploy --entrypoint index.helper)")

    def test_handler_not_found(self):
        err, _, _ = self.start_failing({"index.js": "exports.other = () => 1;"})
        self.assertEqual(err["errorType"], "Runtime.HandlerNotFound")
        self.assertEqual(err["errorMessage"], "index.handler is undefined or not exported")
        err, _, _ = self.start_failing({"index.js": "exports.handler = 42;"})
        self.assertEqual(err["errorType"], "Runtime.HandlerNotFound")
        self.assertEqual(err["errorMessage"], "index.handler is not a function")

    def test_top_level_throw(self):
        err, logs, _ = self.start_failing({"index.js": "console.log('starting');\nthrow new TypeError('bad config');\n"})
        self.assertEqual((err["errorType"], err["errorMessage"]), ("TypeError", "bad config"))
        self.assertEqual(stdout_text(logs), "starting\n")
        self.assertTrue(all(f["id"] is None for f in logs))

    def test_malformed_handler(self):
        err, _, _ = self.start_failing({"index.js": "exports.handler = () => 1;"}, handler="index")
        self.assertEqual(err["errorType"], "Runtime.MalformedHandlerName")
        err, _, _ = self.start_failing({"index.js": "exports.handler = () => 1;"}, handler="../index.handler")
        self.assertEqual(err["errorType"], "Runtime.MalformedHandlerName")


# ------------------------------------------------------------------------------------------------
class CheckMode(NodeShimTestCase):
    def test_check_ok(self):
        r = self.run_check({"index.js": "console.log('top level output'); exports.handler = async () => 1;"})
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.run_check({"src/app.mjs": "export const api = { handler() {} };"}, handler="src/app.api.handler")
        self.assertEqual(r.returncode, 0, r.stderr)

    def check_fails(self, files, handler="index.handler"):
        r = self.run_check(files, handler)
        self.assertEqual(r.returncode, 1, (r.stdout, r.stderr))
        last = r.stdout.rstrip("\n").split("\n")[-1]
        info = json.loads(last)
        self.assertEqual(set(info), {"errorType", "errorMessage"})
        self.assertTrue(r.stderr.strip(), "stack trace expected on stderr")
        return info, r

    def test_check_fail(self):
        info, r = self.check_fails({"index.js": "exports.nothing = 1;"})
        self.assertEqual(info["errorType"], "Runtime.HandlerNotFound")
        self.assertIn("Runtime.HandlerNotFound", r.stderr)
        info, _ = self.check_fails({"index.js": "process.stdout.write('no newline at the end');\nexports.handler = 'nope';"})
        self.assertEqual(info["errorType"], "Runtime.HandlerNotFound")
        info, _ = self.check_fails({"index.js": "exports.handler = () => {\n  let x = ;\n};\n"})
        self.assertEqual(info["errorType"], "Runtime.UserCodeSyntaxError")
        self.assertIn("Unexpected token", info["errorMessage"])
        info, _ = self.check_fails({"main.js": "exports.handler = () => 1;"})
        self.assertEqual(info["errorType"], "Runtime.ImportModuleError")
        info, _ = self.check_fails({"index.js": "throw new Error('init failed');"})
        self.assertEqual((info["errorType"], info["errorMessage"]), ("Error", "init failed"))


# ------------------------------------------------------------------------------------------------
def assert_logs_precede_answers(test, frames):
    """Every log frame tagged with a request id comes before that request's answer."""
    done = set()
    for f in frames:
        if f["type"] in ("result", "error"):
            done.add(f["id"])
        elif f["type"] == "log" and f["id"] is not None:
            test.assertNotIn(f["id"], done, f)


def logs_of(frames, rid, stream=None):
    return "".join(f["data"] for f in frames
                   if f["type"] == "log" and f["id"] == rid and (stream is None or f["stream"] == stream))


class Concurrency(NodeShimTestCase):
    """SLESS_CONCURRENCY > 1: handlers overlap on the event loop, output tagged through AsyncLocalStorage."""

    def overlap(self, shim, ids, events=None, deadlines=None):
        started = time.monotonic()
        for i, rid in enumerate(ids):
            shim.invoke(events[i] if events else None, rid=rid, deadline_ms=deadlines[i] if deadlines else None)
        frames = shim.until_all(ids)
        elapsed = time.monotonic() - started
        assert_logs_precede_answers(self, frames)
        for f in frames:  # no request's id in another request's output
            if f["type"] == "log" and f["id"] in ids:
                for other in ids:
                    if other != f["id"]:
                        self.assertNotIn(other, f["data"], f)
        finals = {f["id"]: f for f in frames if f["type"] in ("result", "error")}
        return frames, finals, elapsed

    def test_three_async_invokes_overlap(self):
        shim = self.start(
            {
                "index.js": """
                const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
                exports.handler = async (event, context) => {
                  const id = context.awsRequestId;
                  console.log("start", id);
                  setTimeout(() => console.log("timer", id), 100);
                  await sleep(500);
                  process.stderr.write(`err ${id}\n`);
                  console.log("end", id);
                  return { id, event, remaining: context.getRemainingTimeInMillis(),
                           waits: context.callbackWaitsForEmptyEventLoop };
                };
                """
            },
            env={"SLESS_CONCURRENCY": "3"},
        )
        ids = ["c1", "c2", "c3"]
        now = now_ms()
        frames, finals, elapsed = self.overlap(shim, ids, events=[1, 2, 3], deadlines=[now + 3000 * (i + 1) for i in range(3)])
        self.assertLess(elapsed, 1.2, "3 x 0.5 s handlers did not overlap")
        for i, rid in enumerate(ids):
            r = finals[rid]["result"]
            self.assertEqual((r["id"], r["event"], r["waits"]), (rid, i + 1, False))
            self.assertTrue(3000 * (i + 1) - 1500 < r["remaining"] <= 3000 * (i + 1) - 400, r)
            self.assertEqual(logs_of(frames, rid, "stdout"), "start %s\ntimer %s\nend %s\n" % (rid, rid, rid))
            self.assertEqual(logs_of(frames, rid, "stderr"), "err %s\n" % rid)
        self.assertEqual(logs_of(frames, None), "")
        self.assertEqual(shim.call("again")[1]["result"]["event"], "again")

    def test_callback_style_answers_without_waiting_for_the_loop(self):
        shim = self.start(
            {
                "index.js": """
                exports.handler = (event, context, callback) => {
                  const id = context.awsRequestId;
                  setTimeout(() => console.log("late", id), 800);  // does not hold the answer back
                  setTimeout(() => { console.log("cb", id); callback(null, id); }, 500);
                };
                """
            },
            env={"SLESS_CONCURRENCY": "3"},
        )
        ids = ["k1", "k2", "k3"]
        frames, finals, elapsed = self.overlap(shim, ids)
        self.assertLess(elapsed, 1.2, "3 x 0.5 s handlers did not overlap")
        for rid in ids:
            self.assertEqual(finals[rid]["result"], rid)
            # answered before its 800 ms timer ran: the answer did not wait for the event loop
            self.assertEqual(logs_of(frames, rid), "cb %s\n" % rid)
        self.assertNotIn("late", "".join(f.get("data", "") for f in frames))
        # what a request left running logs afterwards belongs to no request
        late = sorted(shim.recv()["data"] for _ in ids)
        self.assertEqual(late, ["late %s\n" % rid for rid in ids])
        self.assertTrue(all(f["id"] is None for f in shim.frames[-3:]))

    def test_unsettled_requests_answer_null_when_the_loop_runs_dry(self):
        shim = self.start(
            {
                "index.js": """
                exports.handler = function (event) {
                  if (event === "never") return new Promise(() => {});
                  if (event === "slow") return new Promise((r) => setTimeout(() => r("slow done"), 300));
                  console.log("side effect");  // returns nothing and has no callback
                };
                """
            },
            env={"SLESS_CONCURRENCY": "3"},
        )
        frames, finals, _ = self.overlap(shim, ["n1", "n2", "n3"], events=["never", "slow", "nothing"])
        self.assertEqual({rid: f["result"] for rid, f in finals.items()}, {"n1": None, "n2": "slow done", "n3": None})
        order = [f["id"] for f in frames if f["type"] == "result"]
        self.assertEqual(order.index("n2"), 0, order)  # the others only once nothing could happen any more
        self.assertEqual(logs_of(frames, "n3"), "side effect\n")

    def test_uncaught_exception_fails_its_own_request_and_exits(self):
        shim = self.start(
            {
                "index.js": """
                exports.handler = async (event, context) => {
                  if (event === "boom") setTimeout(() => { throw new RangeError("kaboom " + context.awsRequestId); }, 50);
                  await new Promise((r) => setTimeout(r, event === "boom" ? 5000 : 3000));
                  return "late";
                };
                """
            },
            env={"SLESS_CONCURRENCY": "2"},
        )
        shim.invoke("slow", rid="u1")
        shim.invoke("boom", rid="u2")
        frames = shim.drain()
        finals = [f for f in frames if f["type"] in ("result", "error")]
        self.assertEqual(len(finals), 1, frames)
        f = finals[0]
        self.assertEqual((f["id"], f["errorType"], f["errorMessage"], f.get("fatal")), ("u2", "RangeError", "kaboom u2", True))
        self.assertIn("kaboom u2", logs_of(frames, "u2", "stderr"))
        self.assertEqual(shim.wait(), 1)

    def test_process_exit_fails_the_request_that_called_it(self):
        shim = self.start(
            {
                "index.js": """
                exports.handler = async (event) => {
                  await new Promise((r) => setTimeout(r, event === "exit" ? 50 : 3000));
                  if (event === "exit") process.exit(3);
                  return "late";
                };
                """
            },
            env={"SLESS_CONCURRENCY": "2"},
        )
        shim.invoke("slow", rid="x1")
        shim.invoke("exit", rid="x2")
        finals = [f for f in shim.drain() if f["type"] in ("result", "error")]
        self.assertEqual([(f["id"], f["errorType"], f.get("fatal")) for f in finals], [("x2", "Runtime.ExitError", True)])
        self.assertEqual(shim.wait(), 3)

    def test_pipelined_invokes_then_eof(self):
        shim = self.start(
            {"index.js": "exports.handler = async (e) => { await new Promise(r => setTimeout(r, 100)); return e * 10; };"},
            env={"SLESS_CONCURRENCY": "2"},
            ready=False,
        )
        ids = [shim.invoke(i) for i in range(5)]
        shim.sock.shutdown(socket.SHUT_WR)
        frames = shim.drain()
        self.assertEqual(shim.wait(), 0)
        self.assertEqual(frames[0]["type"], "ready")
        self.assertEqual({f["id"]: f["result"] for f in frames if f["type"] == "result"}, {rid: i * 10 for i, rid in enumerate(ids)})

    def test_bad_value_serves_one_at_a_time(self):
        shim = self.start({"index.js": "exports.handler = async (e, c) => c.callbackWaitsForEmptyEventLoop;"},
                          env={"SLESS_CONCURRENCY": "lots"})
        self.assertIs(shim.call({})[1]["result"], True)
        self.assertIn("SLESS_CONCURRENCY", shim.stderr())


# ------------------------------------------------------------------------------------------------
class Generic(NodeShimTestCase):
    """A warm pool process: started without a function, specialised by a `load` frame."""

    maxDiff = None
    FILES = {
        "src/app.js": """
        const greeter = require("greeter");  // found through NODE_PATH
        console.log("imported", process.env.MY_VAR);
        exports.handler = async (event, context) => ({
          env: { ...process.env },
          cwd: process.cwd(),
          greet: greeter.greet("x"),
          event,
          remaining: context.getRemainingTimeInMillis(),
          context: {
            awsRequestId: context.awsRequestId, functionName: context.functionName,
            functionVersion: context.functionVersion, memoryLimitInMB: context.memoryLimitInMB,
            invokedFunctionArn: context.invokedFunctionArn, logGroupName: context.logGroupName,
            logStreamName: context.logStreamName,
            callbackWaitsForEmptyEventLoop: context.callbackWaitsForEmptyEventLoop,
          },
        });
        """,
        "vendor/greeter.js": "exports.greet = (n) => `hi ${n}`;",
    }

    def start_generic(self, files, extra_env=None, idle=0.0):
        """`idle`: seconds to wait after `ready` (the pool process warms up meanwhile)."""
        root = os.path.realpath(self.code(files))
        shim = Shim(root, None, cwd="/", full_env=pool_env(extra_env))
        self.addCleanup(shim.close)
        f = shim.recv()
        self.assertEqual(f, {"type": "ready", "generic": True}, shim.stderr())
        time.sleep(idle)
        return shim, root

    def load(self, shim, root, handler, env, concurrency=1):
        started = time.monotonic()
        shim.send({"type": "load", "handler": handler, "code_dir": root, "deps_dir": None,
                   "env": env, "concurrency": concurrency})
        frames = []
        while True:
            f = shim.recv()
            if f is None:
                break
            frames.append(f)
            if f["type"] in ("ready", "init_error"):
                break
        sys.stderr.write("\n    [node] generic load -> %s: %.1f ms " % (
            frames[-1]["type"] if frames else "EOF", (time.monotonic() - started) * 1000))
        return frames

    def function_env(self, root, **extra):
        return clean_env(root, "src/app.handler", dict(
            {"MY_VAR": "loaded", "SLESS_CONCURRENCY": "1", "NODE_PATH": os.path.join(root, "vendor"),
             "SLESS_NAMESPACE": "testns"}, **extra))

    def test_load_then_invoke_like_a_normal_start(self):
        # loaded after the pool process's warm-up: nothing of it shows
        shim, root = self.start_generic(self.FILES, {"POOL_ONLY": "1", "MY_VAR": "pool"}, idle=0.3)
        env = self.function_env(root)
        env.pop("SLESS_CONTROL_FD")
        frames = self.load(shim, root, "src/app.handler", env)
        self.assertEqual(frames[-1], {"type": "ready"}, shim.stderr())
        self.assertEqual(stdout_text(frames[:-1]), "imported loaded\n")
        _, f = shim.call({"x": 1}, rid="g1", deadline_ms=now_ms() + 3000)
        r = f["result"]

        normal = Shim(root, None, full_env=self.function_env(root))
        self.addCleanup(normal.close)
        normal.expect_ready()
        n = normal.call({"x": 1}, rid="g1")[1]["result"]

        self.assertNotIn("POOL_ONLY", r["env"])
        self.assertEqual(r["env"]["MY_VAR"], "loaded")
        self.assertEqual(r["env"]["SLESS_CONTROL_FD"], "3")
        self.assertEqual(r["env"]["LAMBDA_TASK_ROOT"], root)
        self.assertEqual(r["env"]["AWS_LAMBDA_LOG_STREAM_NAME"], r["context"]["logStreamName"])
        self.assertNotEqual(r["context"]["logStreamName"], n["context"]["logStreamName"])  # random per process
        for x in (r, n):
            x["env"].pop("AWS_LAMBDA_LOG_STREAM_NAME")
            x["context"].pop("logStreamName")
        self.assertEqual(r["env"], n["env"])
        self.assertEqual(r["context"], n["context"])
        self.assertEqual(r["cwd"], root)
        self.assertEqual(r["greet"], "hi x")
        self.assertEqual(r["event"], {"x": 1})
        self.assertTrue(0 < r["remaining"] <= 3000)
        self.assertEqual(r["context"]["functionName"], "fn")
        self.assertEqual(r["context"]["memoryLimitInMB"], "256")
        self.assertEqual(r["context"]["invokedFunctionArn"], "arn:aws:lambda:local:testns:function:fn")
        self.assertIs(r["context"]["callbackWaitsForEmptyEventLoop"], True)
        self.assertEqual(shim.call(2)[1]["result"]["event"], 2)
        shim.sock.shutdown(socket.SHUT_WR)
        self.assertEqual(shim.drain(), [])
        self.assertEqual(shim.wait(), 0)
        self.assertEqual(shim.stderr(), "")

    def test_load_with_concurrency_and_pipelined_invokes(self):
        shim, root = self.start_generic(
            {"index.js": "exports.handler = async (e, c) => { console.log('in', c.awsRequestId); await new Promise(r => setTimeout(r, 500)); return c.awsRequestId; };"}
        )
        env = clean_env(root, "index.handler")
        started = time.monotonic()
        shim.send({"type": "load", "handler": "index.handler", "code_dir": root, "deps_dir": None, "env": env, "concurrency": 3})
        ids = [shim.invoke() for _ in range(3)]  # sent before ready: queued until the handler is loaded
        frames = shim.until_all(ids)
        self.assertLess(time.monotonic() - started, 1.2)
        self.assertEqual(frames[0], {"type": "ready"})
        assert_logs_precede_answers(self, frames)
        for f in frames[1:]:
            if f["type"] == "result":
                self.assertEqual(f["result"], f["id"])
            else:
                self.assertEqual(f["data"], "in %s\n" % f["id"])

    def test_load_es_module_handler(self):
        shim, root = self.start_generic(
            {"src/app.mjs": "import { sep } from 'node:path';\nexport const handler = async (e) => ({ sep, e, env: process.env.MY_VAR });"},
            idle=0.3,
        )
        env = self.function_env(root)
        env.pop("SLESS_CONTROL_FD")
        frames = self.load(shim, root, "src/app.handler", env)
        self.assertEqual(frames[-1], {"type": "ready"}, shim.stderr())
        self.assertEqual(shim.call(3)[1]["result"], {"sep": "/", "e": 3, "env": "loaded"})
        shim.sock.shutdown(socket.SHUT_WR)
        self.assertEqual(shim.drain(), [])
        self.assertEqual(shim.wait(), 0)
        self.assertEqual(shim.stderr(), "")

    def test_import_error_at_load(self):
        shim, root = self.start_generic({"index.js": "require('no-such-package-xyz'); exports.handler = () => 1;"})
        frames = self.load(shim, root, "index.handler", clean_env(root, "index.handler"))
        f = frames[-1]
        self.assertEqual(f["type"], "init_error", frames)
        self.assertEqual(f["errorType"], "Runtime.ImportModuleError")
        self.assertIn("no-such-package-xyz", f["errorMessage"])
        self.assertIn("Runtime.ImportModuleError", logs_of(frames, None, "stderr"))
        self.assertEqual(shim.drain(), [])
        self.assertEqual(shim.wait(), 1)

    def test_invoke_before_load_is_a_protocol_error(self):
        shim, _ = self.start_generic({})
        shim.invoke({})
        self.assertEqual(shim.drain(), [])
        self.assertEqual(shim.wait(), 1)
        self.assertIn("protocol error", shim.stderr())

    def test_eof_before_load_exits_quietly(self):
        shim, _ = self.start_generic({})
        shim.sock.shutdown(socket.SHUT_WR)
        self.assertEqual(shim.drain(), [])
        self.assertEqual(shim.wait(), 0)
        self.assertEqual(shim.stderr(), "")

    def test_load_in_a_normal_process_is_a_protocol_error(self):
        shim = self.start({"index.js": "exports.handler = () => 1;"})
        shim.send({"type": "load", "handler": "index.handler", "code_dir": "/", "deps_dir": None, "env": {}, "concurrency": 1})
        self.assertEqual(shim.drain(), [])
        self.assertEqual(shim.wait(), 1)
        self.assertIn("protocol error", shim.stderr())


# ------------------------------------------------------------------------------------------------
class Lifecycle(NodeShimTestCase):
    def test_eof_exits_zero(self):
        shim = self.start({"index.js": "exports.handler = async () => 1;"})
        shim.sock.shutdown(socket.SHUT_WR)
        self.assertEqual(shim.drain(), [])
        self.assertEqual(shim.wait(), 0)

    def test_pipelined_invokes_then_eof(self):
        shim = self.start(
            {"index.js": "exports.handler = async (e) => { await new Promise(r => setTimeout(r, 5)); console.log('n', e); return e * 10; };"},
            ready=False,
        )
        # written before the interpreter is up: they wait in the socket buffer
        ids = [shim.invoke(i) for i in range(5)]
        shim.sock.shutdown(socket.SHUT_WR)
        frames = shim.drain()
        self.assertEqual(shim.wait(), 0)
        self.assertEqual(frames[0]["type"], "ready")
        finals = [f for f in frames if f["type"] in ("result", "error")]
        self.assertEqual([(f["id"], f["result"]) for f in finals], [(rid, i * 10) for i, rid in enumerate(ids)])
        # each request's output precedes its own answer and follows the previous answer
        current = 0
        for f in frames[1:]:
            if f["type"] == "log":
                self.assertEqual(f["id"], ids[current])
                self.assertEqual(f["data"], "n %d\n" % current)
            else:
                current += 1

    def test_large_event_and_result(self):
        shim = self.start({"index.js": "exports.handler = async (e) => ({ len: e.length, back: e });"})
        big = "\u00e9" * (3 * 1024 * 1024)  # 6 MiB of UTF-8
        _, f = shim.call(big)
        self.assertEqual(f["result"]["len"], len(big))
        self.assertEqual(f["result"]["back"], big)


if __name__ == "__main__":
    unittest.main()
