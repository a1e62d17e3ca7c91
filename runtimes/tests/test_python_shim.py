"""Protocol-level tests for runtimes/python3.11/bootstrap.py (see runtimes/PROTOCOL.md).

Each test writes handler files into a temporary code root, starts the shim the way the
supervisor does (clean environment, one end of a socketpair inherited as fd 3, working directory
= code root) and talks length-prefixed JSON frames to it.

Run: python3 -m unittest discover -s runtimes/tests -p 'test_python*.py' -v
"""

import json
import os
import re
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
BOOTSTRAP = os.path.join(os.path.dirname(HERE), "python3.11", "bootstrap.py")
PYTHON = os.environ.get("SLESS_TEST_PYTHON") or sys.executable
IO_TIMEOUT = 20


def clean_env(code_dir, handler, extra=None, control_fd=True):
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": code_dir,
        "LANG": "C.UTF-8",
        "TMPDIR": tempfile.gettempdir(),
        "SLESS_CODE_DIR": code_dir,
        "SLESS_HANDLER": handler,
        "SLESS_NAMESPACE": "testns",
        "SLESS_FUNCTION_NAME": "fn",
        "SLESS_FUNCTION_VERSION": "7",
        "SLESS_MEMORY_MB": "256",
        "SLESS_TIMEOUT_SEC": "5",
        "AWS_LAMBDA_FUNCTION_NAME": "fn",
        "AWS_LAMBDA_FUNCTION_VERSION": "7",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
    }
    if control_fd:
        env["SLESS_CONTROL_FD"] = "3"
    env.update(extra or {})
    return env


def write_files(root, files):
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))


def pool_env(extra=None):
    """The environment of a generic (warm pool) process: no function yet."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": tempfile.gettempdir(),
        "LANG": "C.UTF-8",
        "TMPDIR": tempfile.gettempdir(),
        "SLESS_CONTROL_FD": "3",
    }
    env.update(extra or {})
    return env


class Shim(object):
    """One shim process with the child end of a socketpair at fd 3."""

    def __init__(self, code_dir, handler, env=None, cwd=None, full_env=None):
        self.sock, child = socket.socketpair()
        # Put the child end at descriptor 3 for the duration of the spawn (restoring whatever
        # the test process had there) and pass exactly that descriptor.
        saved = saved_inheritable = None
        try:
            saved = os.dup(3)
            saved_inheritable = os.get_inheritable(3)
        except OSError:
            pass
        os.dup2(child.fileno(), 3)
        try:
            self.proc = subprocess.Popen(
                [PYTHON, BOOTSTRAP],
                cwd=cwd or code_dir,
                env=full_env if full_env is not None else clean_env(code_dir, handler, env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(3,),
            )
        finally:
            if saved is not None:
                os.dup2(saved, 3, inheritable=saved_inheritable)
                os.close(saved)
            else:
                os.close(3)
            child.close()
        self.sock.settimeout(IO_TIMEOUT)
        self.raw = []  # raw JSON text of every frame received, in order
        self.finished = None

    def send(self, obj):
        data = json.dumps(obj).encode()
        self.sock.sendall(struct.pack(">I", len(data)) + data)

    def _recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    def recv(self):
        head = self._recv_exact(4)
        if head is None:
            return None
        (n,) = struct.unpack(">I", head)
        body = self._recv_exact(n)
        assert body is not None, "EOF inside a frame"
        text = body.decode("utf-8")
        self.raw.append(text)
        return json.loads(text)

    def until(self, pred):
        """Frames up to and including the first one matching pred."""
        frames = []
        while True:
            f = self.recv()
            if f is None:
                raise AssertionError("EOF before expected frame; got %r; stderr=%r"
                                     % (frames, self.finish()[1]))
            frames.append(f)
            if pred(f):
                return frames

    def ready(self):
        return self.until(lambda f: f["type"] in ("ready", "init_error"))

    def send_invoke(self, rid, event=None, deadline_ms=None):
        if deadline_ms is None:
            deadline_ms = int(time.time() * 1000) + 5000
        self.send({"type": "invoke", "id": rid, "deadline_ms": deadline_ms, "event": event})

    def invoke(self, rid, event=None, deadline_ms=None):
        self.send_invoke(rid, event, deadline_ms)
        return self.until(lambda f: f["type"] in ("result", "error") and f.get("id") == rid)

    def until_all(self, rids):
        """Frames up to the reply to every one of rids (answered in any order)."""
        waiting = set(rids)

        def last(f):
            if f["type"] in ("result", "error"):
                waiting.discard(f.get("id"))
            return not waiting
        return self.until(last)

    def finish(self):
        """Close our end (EOF for the shim) and collect exit code, stdout, stderr."""
        if self.finished is not None:
            return self.finished
        try:
            self.sock.close()
        except OSError:
            pass
        try:
            out, err = self.proc.communicate(timeout=IO_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        self.raw_output = (out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))
        # without the fence lines (PROTOCOL.md, "Fences"), as the supervisor logs fd 1/2
        self.finished = (self.proc.returncode, strip_fences(self.raw_output[0]), strip_fences(self.raw_output[1]))
        return self.finished


FENCE = re.compile("\x1esless-fence:[^\x1e\n]*\x1e\n")


def strip_fences(text):
    return FENCE.sub("", text)


def logs(frames, rid, stream=None):
    return "".join(f["data"] for f in frames
                   if f["type"] == "log" and f["id"] == rid and (stream is None or f["stream"] == stream))


class ShimTestCase(unittest.TestCase):
    def setUp(self):
        self.code = os.path.realpath(tempfile.mkdtemp(prefix="sless-py-"))
        self.shims = []

    def tearDown(self):
        for s in self.shims:
            s.finish()
        shutil.rmtree(self.code, ignore_errors=True)

    def start(self, files, handler, env=None, cwd=None):
        write_files(self.code, files)
        shim = Shim(self.code, handler, env=env, cwd=cwd)
        self.shims.append(shim)
        return shim

    def start_ready(self, files, handler, env=None):
        shim = self.start(files, handler, env)
        frames = shim.ready()
        self.assertEqual(frames[-1], {"type": "ready"}, frames)
        return shim

    def run_check(self, files, handler):
        write_files(self.code, files)
        p = subprocess.run([PYTHON, BOOTSTRAP, "--check"], cwd=self.code,
                           env=clean_env(self.code, handler, control_fd=False),
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=IO_TIMEOUT)
        return p.returncode, p.stdout.decode(), p.stderr.decode()


class TestServe(ShimTestCase):
    def test_sync_handler_and_sequence(self):
        shim = self.start_ready({"main.py": """
            calls = []
            def handler(event, context):
                calls.append(1)
                return {"echo": event, "calls": len(calls)}
        """}, "main.handler")
        frames = shim.invoke("r1", {"a": [1, 2, "\u00e9"]})
        self.assertEqual(frames[-1], {"type": "result", "id": "r1",
                                      "result": {"echo": {"a": [1, 2, "\u00e9"]}, "calls": 1}})
        frames = shim.invoke("r2", "x")
        self.assertEqual(frames[-1]["result"], {"echo": "x", "calls": 2})
        code, out, err = shim.finish()
        self.assertEqual(code, 0, err)
        self.assertEqual(err, "")

    def test_async_handler_persistent_loop(self):
        shim = self.start_ready({"main.py": """
            import asyncio
            loops = []
            async def handler(event, context):
                await asyncio.sleep(0.01)
                loops.append(id(asyncio.get_running_loop()))
                return {"n": event["n"] * 2, "same_loop": len(set(loops)) == 1, "calls": len(loops)}
        """}, "main.handler")
        self.assertEqual(shim.invoke("a1", {"n": 2})[-1]["result"], {"n": 4, "same_loop": True, "calls": 1})
        self.assertEqual(shim.invoke("a2", {"n": 5})[-1]["result"], {"n": 10, "same_loop": True, "calls": 2})

    def test_async_exception_trace_skips_asyncio(self):
        shim = self.start_ready({"main.py": """
            async def handler(event, context):
                raise KeyError("nope")
        """}, "main.handler")
        err = shim.invoke("a1")[-1]
        self.assertEqual(err["errorType"], "KeyError")
        self.assertIn("main.py", err["stackTrace"][0])
        self.assertFalse(any("asyncio" in s or "bootstrap.py" in s for s in err["stackTrace"]), err)

    def test_context_fields(self):
        shim = self.start_ready({"main.py": """
            import os
            def handler(event, context):
                return {
                    "env_log_group": os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME"),
                    "env_log_stream": os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME"),
                    "request_id": context.request_id,
                    "aws_request_id": context.aws_request_id,
                    "function_name": context.function_name,
                    "function_version": context.function_version,
                    "memory": context.memory_limit_in_mb,
                    "memory_is_int": isinstance(context.memory_limit_in_mb, int),
                    "arn": context.invoked_function_arn,
                    "log_group_name": context.log_group_name,
                    "log_stream_name": context.log_stream_name,
                    "remaining": context.get_remaining_time_in_millis(),
                    "cognito": context.identity.cognito_identity_id,
                    "client_context": context.client_context,
                }
        """}, "main.handler")
        before = int(time.time() * 1000)
        r = shim.invoke("ctx-1", {}, deadline_ms=before + 3000)[-1]["result"]
        self.assertEqual(r["request_id"], "ctx-1")
        self.assertEqual(r["aws_request_id"], "ctx-1")
        self.assertEqual(r["function_name"], "fn")
        self.assertEqual(r["function_version"], "7")
        self.assertEqual(r["memory"], 256)
        self.assertTrue(r["memory_is_int"])
        # the same formats as the Node shim (test_node_shim.ContextAndEnvironment)
        self.assertEqual(r["arn"], "arn:aws:lambda:local:testns:function:fn")
        self.assertEqual(r["log_group_name"], "/aws/lambda/fn")
        self.assertRegex(r["log_stream_name"], r"^\d{4}/\d\d/\d\d/\[7\][0-9a-f]{32}$")
        self.assertEqual(r["env_log_group"], r["log_group_name"])
        self.assertEqual(r["env_log_stream"], r["log_stream_name"])
        self.assertGreater(r["remaining"], 0)
        self.assertLessEqual(r["remaining"], 3000)
        self.assertIsNone(r["cognito"])
        self.assertIsNone(r["client_context"])
        # a deadline in the past gives 0, never a negative number
        r = shim.invoke("ctx-2", {}, deadline_ms=before - 10000)[-1]["result"]
        self.assertEqual(r["remaining"], 0)

    def test_context_arn_default_namespace(self):
        shim = self.start_ready({"main.py": """
            def handler(event, context):
                return context.invoked_function_arn
        """}, "main.handler", env={"SLESS_NAMESPACE": "", "AWS_REGION": "eu-west-1"})
        self.assertEqual(shim.invoke("arn-1")[-1]["result"], "arn:aws:lambda:local:default:function:fn")

    def test_exception_frame_and_log(self):
        shim = self.start_ready({"main.py": """
            def helper():
                raise ValueError("boom")
            def handler(event, context):
                print("before")
                helper()
        """}, "main.handler")
        frames = shim.invoke("e1")
        err = frames[-1]
        self.assertEqual(err["type"], "error")
        self.assertEqual(err["id"], "e1")
        self.assertEqual(err["errorType"], "ValueError")
        self.assertEqual(err["errorMessage"], "boom")
        self.assertIsInstance(err["stackTrace"], list)
        self.assertTrue(all(isinstance(s, str) for s in err["stackTrace"]))
        self.assertEqual(len(err["stackTrace"]), 2, err["stackTrace"])  # handler, helper
        self.assertIn("in handler", err["stackTrace"][0])
        self.assertIn('raise ValueError("boom")', err["stackTrace"][1])
        self.assertFalse(any("bootstrap.py" in s for s in err["stackTrace"]))
        self.assertNotIn("fatal", err)  # an ordinary exception: the instance is reused
        self.assertEqual(logs(frames, "e1", "stdout"), "before\n")
        errlog = logs(frames, "e1", "stderr")
        self.assertIn("[ERROR] ValueError: boom", errlog)
        self.assertIn("Traceback (most recent call last):", errlog)
        self.assertIn("in helper", errlog)
        # the instance keeps serving
        self.assertEqual(shim.invoke("e2")[-1]["type"], "error")

    def test_marshal_error_and_decimal(self):
        shim = self.start_ready({"main.py": """
            from decimal import Decimal
            def handler(event, context):
                kind = event["kind"]
                if kind == "set":
                    return {"s": {1, 2}}
                if kind == "nan":
                    return float("nan")
                if kind == "decimal":
                    return {"price": Decimal("1.10"), "big": Decimal("12345678901234567890.123"),
                            "exp": Decimal("1E+3"), "list": [Decimal("-0.5")]}
                return None
        """}, "main.handler")
        err = shim.invoke("m1", {"kind": "set"})[-1]
        self.assertEqual(err["type"], "error")
        self.assertEqual(err["errorType"], "Runtime.MarshalError")
        self.assertNotIn("fatal", err)
        self.assertIn("Unable to marshal response", err["errorMessage"])
        self.assertIn("set", err["errorMessage"])
        self.assertEqual(shim.invoke("m2", {"kind": "nan"})[-1]["errorType"], "Runtime.MarshalError")
        frames = shim.invoke("m3", {"kind": "decimal"})
        self.assertEqual(frames[-1]["type"], "result")
        raw = shim.raw[-1]
        self.assertIn('"price":1.10', raw)
        self.assertIn('"big":12345678901234567890.123', raw)
        self.assertIn('"exp":1E+3', raw)
        self.assertIn('"list":[-0.5]', raw)
        self.assertEqual(shim.invoke("m4", {"kind": "none"})[-1], {"type": "result", "id": "m4", "result": None})

    def test_thousand_prints_captured_before_result(self):
        shim = self.start_ready({"main.py": """
            import sys
            def handler(event, context):
                for i in range(1000):
                    print(i)
                sys.stderr.write("partial line without newline")
                sys.stdout.write("tail")
                return "done"
        """}, "main.handler")
        frames = shim.invoke("p1")
        self.assertEqual(frames[-1]["result"], "done")
        self.assertEqual(logs(frames, "p1", "stdout"), "".join("%d\n" % i for i in range(1000)) + "tail")
        self.assertEqual(logs(frames, "p1", "stderr"), "partial line without newline")
        self.assertEqual(logs(frames, None), "")  # nothing leaked to id null
        # nothing for p1 arrives after its result
        frames = shim.invoke("p2")
        self.assertEqual(logs(frames, "p1"), "")

    def test_logging_root_handler(self):
        shim = self.start_ready({"main.py": """
            import logging
            logging.basicConfig()  # a no-op, as on Lambda: the root logger already has a handler
            logger = logging.getLogger()
            def handler(event, context):
                logging.info("hidden at the default WARNING level")
                logging.warning("warned")
                logger.setLevel(logging.INFO)
                logging.info("x")
                logging.getLogger("child").info("multi\\nline")
                return len(logging.getLogger().handlers)
        """}, "main.handler")
        frames = shim.invoke("l-1")
        self.assertEqual(frames[-1]["result"], 1)
        out = logs(frames, "l-1", "stdout")
        self.assertNotIn("hidden", out)
        stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
        lines = out.splitlines(True)
        self.assertEqual(len(lines), 4, out)
        self.assertRegex(lines[0], r"^\[WARNING\]\t%s\tl-1\twarned\n$" % stamp)
        self.assertRegex(lines[1], r"^\[INFO\]\t%s\tl-1\tx\n$" % stamp)
        self.assertRegex(lines[2], r"^\[INFO\]\t%s\tl-1\tmulti\n$" % stamp)
        self.assertEqual(lines[3], "line\n")

    def test_logging_imported_inside_handler(self):
        shim = self.start_ready({"main.py": """
            import sys
            def handler(event, context):
                preloaded = "logging" in sys.modules
                import logging
                logging.getLogger().setLevel(logging.INFO)
                logging.info("late")
                return preloaded
        """}, "main.handler")
        frames = shim.invoke("l2")
        self.assertFalse(frames[-1]["result"], "the shim itself should not import logging")
        self.assertRegex(logs(frames, "l2", "stdout"), r"^\[INFO\]\t\S+Z\tl2\tlate\n$")

    def test_output_outside_request_has_null_id(self):
        shim = self.start({"main.py": """
            print("at import")
            def handler(event, context):
                return 1
        """}, "main.handler")
        frames = shim.ready()
        self.assertEqual(frames[-1]["type"], "ready")
        self.assertEqual(logs(frames, None, "stdout"), "at import\n")

    def test_hyphenated_module(self):
        shim = self.start_ready({"my-func.py": """
            def handler(event, context):
                return "hyphen " + __name__
        """}, "my-func.handler")
        self.assertEqual(shim.invoke("h1")[-1]["result"], "hyphen my-func")

    def test_nested_folder_and_dotted_module(self):
        shim = self.start_ready({
            "src/hello_world/__init__.py": "",
            "src/hello_world/app.py": """
                import helper
                from . import sibling
                def handler(event, context):
                    return [__name__, helper.VALUE, sibling.VALUE]
            """,
            "src/hello_world/sibling.py": "VALUE = 'sibling'\n",
            "src/helper.py": "VALUE = 'helper from the folder'\n",
        }, "src/hello_world.app.handler")
        self.assertEqual(shim.invoke("n1")[-1]["result"],
                         ["hello_world.app", "helper from the folder", "sibling"])

    def test_folder_then_code_root_then_deps_on_sys_path(self):
        deps = os.path.join(self.code, ".deps")
        shim = self.start_ready({
            "src/app.py": """
                import sys, os
                import rootmod, somedep, shadow
                def handler(event, context):
                    return {"root": rootmod.VALUE, "dep": somedep.VALUE, "shadow": shadow.VALUE,
                            "path": sys.path[:3],
                            "shim_dir_on_path": any(p.endswith("python3.11") and
                                os.path.exists(os.path.join(p, "bootstrap.py")) for p in sys.path)}
            """,
            "rootmod.py": "VALUE = 'root'\n",
            "shadow.py": "VALUE = 'code root wins'\n",
            ".deps/somedep/__init__.py": "VALUE = 'dep'\n",
            ".deps/shadow.py": "VALUE = 'deps'\n",
        }, "src/app.handler", env={"SLESS_DEPS_DIR": deps})
        r = shim.invoke("d1")[-1]["result"]
        self.assertEqual(r["root"], "root")
        self.assertEqual(r["dep"], "dep")
        self.assertEqual(r["shadow"], "code root wins")
        self.assertEqual(r["path"], [os.path.join(self.code, "src"), self.code, deps])
        self.assertFalse(r["shim_dir_on_path"])

    def test_cwd_is_code_root(self):
        other = tempfile.mkdtemp(prefix="sless-elsewhere-")
        self.addCleanup(shutil.rmtree, other, True)
        shim = self.start({"main.py": """
            import os
            def handler(event, context):
                with open("data.txt") as f:
                    return [os.getcwd(), f.read(), os.environ.get("LAMBDA_TASK_ROOT")]
        """, "data.txt": "hello"}, "main.handler", cwd=other)
        self.assertEqual(shim.ready()[-1]["type"], "ready")
        self.assertEqual(shim.invoke("c1")[-1]["result"], [self.code, "hello", self.code])

    def test_fd_level_writes_do_not_corrupt_protocol(self):
        shim = self.start_ready({"main.py": """
            import os, subprocess, sys
            def handler(event, context):
                os.write(1, b"raw fd1 \\x00\\xff bytes\\n")
                os.write(2, b"raw fd2\\n")
                subprocess.run([sys.executable, "-c", "print('from a child process')"], check=True)
                sys.stdout.buffer.write("bytes via buffer \\u00e9\\n".encode())
                sys.__stdout__.write("via __stdout__\\n")
                return "ok"
        """}, "main.handler")
        frames = shim.invoke("f1")
        self.assertEqual(frames[-1]["result"], "ok")
        self.assertEqual(logs(frames, "f1", "stdout"), "bytes via buffer \u00e9\n")
        self.assertEqual(shim.invoke("f2")[-1]["result"], "ok")
        code, out, err = shim.finish()
        self.assertEqual(code, 0)
        self.assertIn("raw fd1", out)
        self.assertIn("from a child process", out)
        self.assertIn("via __stdout__", out)
        self.assertIn("raw fd2", err)

    def test_each_answer_is_fenced_on_fd_1_and_2(self):
        # PROTOCOL.md, "Fences": before each answer, a fence line with the request id on both
        # descriptors, after what the call wrote there (a partial line stays in front of it).
        shim = self.start_ready({"main.py": """
            import os
            def handler(event, context):
                os.write(1, b"partial")
                os.write(2, b"whole\\n")
                if event == "boom":
                    raise ValueError("x")
                return "ok"
        """}, "main.handler")
        self.assertEqual(shim.invoke("a1")[-1]["result"], "ok")
        self.assertEqual(shim.invoke("a2", event="boom")[-1]["type"], "error")
        code, _, _ = shim.finish()
        self.assertEqual(code, 0)
        out, err = shim.raw_output
        self.assertEqual(out, "partial\x1esless-fence:a1\x1e\npartial\x1esless-fence:a2\x1e\n")
        self.assertTrue(err.startswith("whole\n\x1esless-fence:a1\x1e\nwhole\n"), err)
        self.assertTrue(err.endswith("\x1esless-fence:a2\x1e\n"), err)

    def test_env_is_clean_and_unbuffered_not_needed(self):
        shim = self.start_ready({"main.py": """
            import os
            def handler(event, context):
                return sorted(k for k in os.environ if k.startswith("PYTHON"))
        """}, "main.handler")
        self.assertEqual(shim.invoke("u1")[-1]["result"], [])

    def test_system_exit_in_handler(self):
        shim = self.start_ready({"main.py": """
            import sys
            def handler(event, context):
                print("bye")
                sys.exit(3)
        """}, "main.handler")
        frames = shim.invoke("x1")
        self.assertEqual(frames[-1]["errorType"], "Runtime.ExitError")
        self.assertIs(frames[-1].get("fatal"), True)  # the process exits: do not reuse it
        self.assertEqual(logs(frames, "x1", "stdout"), "bye\n")
        code, _, _ = shim.finish()
        self.assertEqual(code, 3)

    def test_system_exit_zero_in_async_handler_is_fatal_too(self):
        shim = self.start_ready({"main.py": """
            import sys
            async def handler(event, context):
                sys.exit()
        """}, "main.handler")
        err = shim.invoke("x0")[-1]
        self.assertEqual((err["type"], err["errorType"], err.get("fatal")), ("error", "Runtime.ExitError", True))
        self.assertEqual(shim.proc.wait(timeout=IO_TIMEOUT), 0)

    def test_eof_exits_zero_quietly(self):
        shim = self.start_ready({"main.py": """
            import threading, time
            threading.Thread(target=time.sleep, args=(60,)).start()  # non-daemon thread
            def handler(event, context):
                return 1
        """}, "main.handler")
        started = time.time()
        code, out, err = shim.finish()
        self.assertEqual((code, out, err), (0, "", ""))
        self.assertLess(time.time() - started, 10)

    def test_async_adopts_loop_created_at_import(self):
        shim = self.start_ready({"main.py": """
            import asyncio, warnings
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                LOOP = asyncio.get_event_loop()
            async def handler(event, context):
                return asyncio.get_running_loop() is LOOP
        """}, "main.handler")
        self.assertTrue(shim.invoke("al")[-1]["result"])

    def test_sync_handler_using_asyncio_run(self):
        shim = self.start_ready({"main.py": """
            import asyncio
            async def work(x):
                await asyncio.sleep(0)
                return x + 1
            def handler(event, context):
                return asyncio.run(work(event))
        """}, "main.handler")
        self.assertEqual(shim.invoke("ar1", 1)[-1]["result"], 2)
        self.assertEqual(shim.invoke("ar2", 2)[-1]["result"], 3)

    def test_forked_child_output_goes_to_real_stdout(self):
        shim = self.start_ready({"main.py": """
            import os
            def handler(event, context):
                pid = os.fork()
                if pid == 0:
                    print("from forked child")
                    import sys; sys.stdout.flush()
                    os._exit(0)
                os.waitpid(pid, 0)
                print("from parent")
                return "forked"
        """}, "main.handler")
        frames = shim.invoke("fork1")
        self.assertEqual(frames[-1]["result"], "forked")
        self.assertEqual(logs(frames, "fork1"), "from parent\n")
        self.assertEqual(shim.invoke("fork2")[-1]["result"], "forked")
        code, out, _ = shim.finish()
        self.assertEqual(code, 0)
        self.assertEqual(out.count("from forked child"), 2)

    def test_background_thread_output_never_follows_result(self):
        shim = self.start_ready({"main.py": """
            import sys, threading, time
            def spam():
                while True:
                    print("bg " * 50)
            threading.Thread(target=spam, daemon=True).start()
            def handler(event, context):
                time.sleep(0.01)
                sys.stdout.write("fg\\n")  # one write: print() makes two, and "bg" may come between
                return event
        """}, "main.handler")
        for i in range(20):
            rid = "t%d" % i
            frames = shim.invoke(rid, i)
            self.assertEqual(frames[-1]["result"], i)
            self.assertIn("fg\n", logs(frames, rid))
        # frames tagged with a request id never arrive after that request's reply
        done = set()
        for text in shim.raw:
            f = json.loads(text)
            if f["type"] in ("result", "error"):
                done.add(f["id"])
            elif f["type"] == "log" and f["id"] is not None:
                self.assertNotIn(f["id"], done)

    def test_stdout_rewrapped_by_function(self):
        shim = self.start_ready({"main.py": """
            import io, sys
            sys.stdout = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", line_buffering=True)
            def handler(event, context):
                print("rewrapped \u00e9")
                return sys.stdout.encoding
        """}, "main.handler")
        frames = shim.invoke("w1")
        self.assertEqual(frames[-1]["result"], "utf-8")
        self.assertEqual(logs(frames, "w1", "stdout"), "rewrapped \u00e9\n")

    def test_large_event_and_result(self):
        shim = self.start_ready({"main.py": """
            def handler(event, context):
                return {"len": len(event), "back": event}
        """}, "main.handler")
        big = "x" * (3 * 1024 * 1024)
        r = shim.invoke("big", big)[-1]["result"]
        self.assertEqual(r["len"], len(big))
        self.assertEqual(r["back"], big)


def assert_logs_precede_replies(test, frames):
    """Every log frame tagged with a request id comes before that request's reply."""
    done = set()
    for f in frames:
        if f["type"] in ("result", "error"):
            done.add(f["id"])
        elif f["type"] == "log" and f["id"] is not None:
            test.assertNotIn(f["id"], done, f)


class TestConcurrency(ShimTestCase):
    """SLESS_CONCURRENCY > 1: invokes overlap, each reply and log frame carries its own id."""

    def overlap(self, shim, ids, event=None):
        started = time.monotonic()
        for rid in ids:
            shim.send_invoke(rid, event)
        frames = shim.until_all(ids)
        elapsed = time.monotonic() - started
        finals = {f["id"]: f for f in frames if f["type"] in ("result", "error")}
        self.assertEqual(set(finals), set(ids))
        assert_logs_precede_replies(self, frames)
        for f in frames:  # no request's id in another request's output
            if f["type"] == "log" and f["id"] in ids:
                for other in ids:
                    if other != f["id"]:
                        self.assertNotIn(other, f["data"], f)
        return frames, finals, elapsed

    def test_three_sync_invokes_overlap(self):
        shim = self.start_ready({"main.py": """
            import sys, threading, time
            def handler(event, context):
                rid = context.aws_request_id
                print("start", rid)
                sys.stdout.write("partial " + rid)  # an unfinished line stays this request's
                time.sleep(0.5)
                print(" end", rid)
                print("err", rid, file=sys.stderr)
                return {"id": rid, "event": event,
                        "main_thread": threading.current_thread() is threading.main_thread()}
        """}, "main.handler", env={"SLESS_CONCURRENCY": "3"})
        ids = ["c1", "c2", "c3"]
        frames, finals, elapsed = self.overlap(shim, ids, event="e")
        self.assertLess(elapsed, 1.2, "3 x 0.5 s handlers did not overlap")
        for rid in ids:
            self.assertEqual(finals[rid]["result"], {"id": rid, "event": "e", "main_thread": False})
            self.assertEqual(logs(frames, rid, "stdout"), "start %s\npartial %s end %s\n" % (rid, rid, rid))
            self.assertEqual(logs(frames, rid, "stderr"), "err %s\n" % rid)
        self.assertEqual(logs(frames, None), "")
        # the instance keeps serving, and with less than three at once too
        self.assertEqual(shim.invoke("c4", 1)[-1]["result"]["id"], "c4")
        code, out, err = shim.finish()
        self.assertEqual((code, err), (0, ""))

    def test_three_async_invokes_overlap_on_one_loop(self):
        shim = self.start_ready({"main.py": """
            import asyncio, logging, threading
            logging.getLogger().setLevel(logging.INFO)
            loops = set()
            async def handler(event, context):
                rid = context.aws_request_id
                print("start", rid)
                await asyncio.sleep(0.5)
                logging.info("done %s", rid)
                loops.add(id(asyncio.get_running_loop()))
                return {"id": rid, "remaining": context.get_remaining_time_in_millis(),
                        "thread": threading.current_thread().name, "loops": len(loops)}
        """}, "main.handler", env={"SLESS_CONCURRENCY": "3"})
        ids = ["a1", "a2", "a3"]
        now = int(time.time() * 1000)
        started = time.monotonic()
        for i, rid in enumerate(ids):  # a different deadline each: remaining time is per request
            shim.send_invoke(rid, None, deadline_ms=now + 3000 * (i + 1))
        frames = shim.until_all(ids)
        elapsed = time.monotonic() - started
        self.assertLess(elapsed, 1.2, "3 x 0.5 s async handlers did not overlap")
        assert_logs_precede_replies(self, frames)
        finals = {f["id"]: f["result"] for f in frames if f["type"] == "result"}
        self.assertEqual(set(finals), set(ids), frames)
        for i, rid in enumerate(ids):
            r = finals[rid]
            self.assertEqual(r["id"], rid)
            self.assertEqual(r["thread"], "sless-asyncio")
            self.assertEqual(r["loops"], 1)
            self.assertTrue(3000 * (i + 1) - 1500 < r["remaining"] <= 3000 * (i + 1) - 400, r)
            out = logs(frames, rid, "stdout")
            self.assertTrue(out.startswith("start %s\n" % rid), out)
            self.assertRegex(out, r"\n\[INFO\]\t\S+Z\t%s\tdone %s\n$" % (rid, rid))

    def test_async_exception_and_exit_with_concurrency(self):
        shim = self.start_ready({"main.py": """
            import asyncio, sys
            async def handler(event, context):
                await asyncio.sleep(0.01)
                if event == "raise":
                    raise KeyError("nope")
                if event == "slow":
                    await asyncio.sleep(5)
                if event == "exit":
                    sys.exit(4)
                return event
        """}, "main.handler", env={"SLESS_CONCURRENCY": "2"})
        err = shim.invoke("k1", "raise")[-1]
        self.assertEqual((err["type"], err["errorType"]), ("error", "KeyError"))
        self.assertNotIn("fatal", err)
        self.assertIn("main.py", err["stackTrace"][0])
        self.assertFalse(any("asyncio" in s or "bootstrap.py" in s or "concurrent" in s
                             for s in err["stackTrace"]), err)
        self.assertEqual(shim.invoke("k2", "fine")[-1]["result"], "fine")
        # a fatal error ends the process; the supervisor fails the other requests in flight
        shim.send_invoke("k3", "slow")
        frames = shim.invoke("k4", "exit")
        self.assertEqual((frames[-1]["errorType"], frames[-1].get("fatal")), ("Runtime.ExitError", True))
        self.assertIsNone(shim.recv())  # EOF: no answer for k3
        self.assertEqual(shim.proc.wait(timeout=IO_TIMEOUT), 4)

    def test_sync_exit_with_concurrency_is_fatal(self):
        shim = self.start_ready({"main.py": """
            import sys, time
            def handler(event, context):
                if event == "slow":
                    time.sleep(5)
                print("bye")
                sys.exit(3)
        """}, "main.handler", env={"SLESS_CONCURRENCY": "2"})
        shim.send_invoke("s1", "slow")
        frames = shim.invoke("s2", "exit")
        self.assertEqual((frames[-1]["errorType"], frames[-1].get("fatal")), ("Runtime.ExitError", True))
        self.assertEqual(logs(frames, "s2", "stdout"), "bye\n")
        self.assertEqual(shim.proc.wait(timeout=IO_TIMEOUT), 3)

    def test_output_left_behind_after_reply_has_no_id(self):
        shim = self.start_ready({"main.py": """
            import asyncio
            async def later(rid):
                await asyncio.sleep(0.2)
                print("late from", rid)
            async def handler(event, context):
                if event == "spawn":
                    asyncio.ensure_future(later(context.aws_request_id))  # inherits the request
                    return "spawned"
                await asyncio.sleep(0.5)
                return "waited"
        """}, "main.handler", env={"SLESS_CONCURRENCY": "2"})
        self.assertEqual(shim.invoke("b1", "spawn")[-1]["result"], "spawned")
        frames = shim.invoke("b2", "wait")
        self.assertEqual(frames[-1]["result"], "waited")
        late = [f for f in frames if f["type"] == "log" and "late from" in f["data"]]
        self.assertEqual([(f["id"], f["data"]) for f in late], [(None, "late from b1\n")])

    def test_eof_answers_requests_in_flight(self):
        shim = self.start_ready({"main.py": """
            import time
            def handler(event, context):
                time.sleep(0.2)
                return event * 10
        """}, "main.handler", env={"SLESS_CONCURRENCY": "2"})
        for i in range(5):
            shim.send_invoke("q%d" % i, i)
        shim.sock.shutdown(socket.SHUT_WR)
        finals = {}
        while True:
            f = shim.recv()
            if f is None:
                break
            if f["type"] == "result":
                finals[f["id"]] = f["result"]
        self.assertEqual(finals, {"q%d" % i: i * 10 for i in range(5)})
        self.assertEqual(shim.proc.wait(timeout=IO_TIMEOUT), 0)

    def test_concurrency_one_runs_in_main_thread(self):
        files = {"main.py": """
            import sys, threading
            def handler(event, context):
                return [threading.current_thread() is threading.main_thread(),
                        "concurrent.futures" in sys.modules]
        """}
        for value in ("1", None, "not a number"):
            env = {"SLESS_CONCURRENCY": value} if value is not None else {}
            shim = self.start_ready(files, "main.handler", env=env)
            self.assertEqual(shim.invoke("m1")[-1]["result"], [True, False], value)
            code, _, err = shim.finish()
            self.assertEqual(code, 0)
            if value == "not a number":
                self.assertIn("SLESS_CONCURRENCY", err)
            else:
                self.assertEqual(err, "")


class TestGeneric(ShimTestCase):
    """A warm pool process: started without a function, specialised by a `load` frame."""

    maxDiff = None

    FILES = {
        "src/app.py": """
            import os, sys
            import somedep
            print("imported", os.environ.get("MY_VAR"))
            def handler(event, context):
                return {
                    "environ": dict(os.environ),
                    "cwd": os.getcwd(),
                    "sys_path": sys.path,
                    "dont_write_bytecode": sys.dont_write_bytecode,
                    "dep": somedep.VALUE,
                    "context": {k: getattr(context, k) for k in (
                        "aws_request_id", "function_name", "function_version", "memory_limit_in_mb",
                        "invoked_function_arn", "log_group_name", "log_stream_name")},
                    "remaining": context.get_remaining_time_in_millis(),
                    "event": event,
                }
        """,
        ".deps/somedep/__init__.py": "VALUE = 'dep'\n",
        "vendor/.keep": "",
    }

    def start_generic(self, files, extra_env=None):
        write_files(self.code, files)
        shim = Shim(self.code, None, cwd=tempfile.gettempdir(), full_env=pool_env(extra_env))
        self.shims.append(shim)
        self.assertEqual(shim.recv(), {"type": "ready", "generic": True})
        return shim

    def load(self, shim, handler, env, concurrency=1, deps_dir=None):
        started = time.monotonic()
        shim.send({"type": "load", "handler": handler, "code_dir": self.code, "deps_dir": deps_dir,
                   "env": env, "concurrency": concurrency})
        frames = shim.ready()
        sys.stderr.write("\n    [python] generic load -> %s: %.1f ms " % (
            frames[-1]["type"], (time.monotonic() - started) * 1000))
        return frames

    def function_env(self, deps):
        return clean_env(self.code, "src/app.handler", {
            "MY_VAR": "loaded", "SLESS_DEPS_DIR": deps, "SLESS_CONCURRENCY": "1",
            "PYTHONPATH": os.path.join(self.code, "vendor")})

    def test_load_then_invoke_like_a_normal_start(self):
        deps = os.path.join(self.code, ".deps")
        shim = self.start_generic(self.FILES, {"POOL_ONLY": "1", "MY_VAR": "pool"})
        env = self.function_env(deps)
        env.pop("SLESS_CONTROL_FD")
        frames = self.load(shim, "src/app.handler", env, deps_dir=deps)
        self.assertEqual(frames[-1], {"type": "ready"}, frames)
        self.assertEqual(logs(frames, None, "stdout"), "imported loaded\n")
        r = shim.invoke("g1", {"x": 1}, deadline_ms=int(time.time() * 1000) + 3000)[-1]["result"]

        # the same function started normally
        normal = Shim(self.code, None, full_env=self.function_env(deps))
        self.shims.append(normal)
        self.assertEqual(normal.ready()[-1], {"type": "ready"})
        n = normal.invoke("g1", {"x": 1})[-1]["result"]

        self.assertNotIn("POOL_ONLY", r["environ"])
        self.assertEqual(r["environ"]["MY_VAR"], "loaded")
        self.assertEqual(r["environ"]["SLESS_CONTROL_FD"], "3")
        self.assertEqual(r["environ"]["LAMBDA_TASK_ROOT"], self.code)
        self.assertEqual(r["environ"]["AWS_LAMBDA_LOG_STREAM_NAME"], r["context"]["log_stream_name"])
        for e in (r["environ"], n["environ"]):
            e.pop("AWS_LAMBDA_LOG_STREAM_NAME")  # random per process
        self.assertEqual(r["environ"], n["environ"])
        self.assertEqual(r["cwd"], self.code)
        self.assertEqual(r["sys_path"], n["sys_path"])
        self.assertEqual(r["sys_path"][:3], [os.path.join(self.code, "src"), self.code, deps])
        self.assertIn(os.path.join(self.code, "vendor"), r["sys_path"])
        self.assertEqual(r["dont_write_bytecode"], n["dont_write_bytecode"])
        self.assertEqual(r["dep"], "dep")
        self.assertEqual(r["event"], {"x": 1})
        self.assertTrue(0 < r["remaining"] <= 3000)
        self.assertRegex(r["context"]["log_stream_name"], r"^\d{4}/\d\d/\d\d/\[7\][0-9a-f]{32}$")
        self.assertNotEqual(r["context"]["log_stream_name"], n["context"]["log_stream_name"])
        for c in (r["context"], n["context"]):
            c.pop("log_stream_name")
        self.assertEqual(r["context"], n["context"])
        self.assertEqual(r["context"]["invoked_function_arn"], "arn:aws:lambda:local:testns:function:fn")
        self.assertEqual(r["context"]["memory_limit_in_mb"], 256)
        self.assertEqual(shim.invoke("g2", 2)[-1]["result"]["event"], 2)
        code, _, err = shim.finish()
        self.assertEqual((code, err), (0, ""))

    def test_load_with_concurrency(self):
        shim = self.start_generic({"main.py": """
            import threading, time
            def handler(event, context):
                print("in", context.aws_request_id)
                time.sleep(0.5)
                return [context.aws_request_id, threading.current_thread().name.startswith("sless-invoke")]
        """})
        env = clean_env(self.code, "main.handler")
        self.assertEqual(self.load(shim, "main.handler", env, concurrency=3)[-1], {"type": "ready"})
        ids = ["p1", "p2", "p3"]
        started = time.monotonic()
        for rid in ids:
            shim.send_invoke(rid)
        frames = shim.until_all(ids)
        self.assertLess(time.monotonic() - started, 1.2)
        assert_logs_precede_replies(self, frames)
        for f in frames:
            if f["type"] == "result":
                self.assertEqual(f["result"], [f["id"], True])
            elif f["type"] == "log":
                self.assertEqual(f["data"], "in %s\n" % f["id"])

    def test_import_error_at_load(self):
        shim = self.start_generic({"main.py": "import nonexistent_mod_xyz\ndef handler(e, c): pass\n"})
        frames = self.load(shim, "main.handler", clean_env(self.code, "main.handler"))
        f = frames[-1]
        self.assertEqual(f["type"], "init_error", frames)
        self.assertEqual(f["errorType"], "Runtime.ImportModuleError")
        self.assertEqual(f["errorMessage"],
                         "Unable to import module 'main': No module named 'nonexistent_mod_xyz'")
        self.assertIn("[ERROR] Runtime.ImportModuleError", logs(frames, None, "stderr"))
        self.assertEqual(shim.proc.wait(timeout=IO_TIMEOUT), 1)

    def test_invoke_before_load_is_a_protocol_error(self):
        shim = self.start_generic({})
        shim.send_invoke("too-early")
        self.assertIsNone(shim.recv())
        code, _, err = shim.finish()
        self.assertEqual(code, 1)
        self.assertIn("protocol error", err)

    def test_eof_before_load_exits_quietly(self):
        shim = self.start_generic({})
        code, out, err = shim.finish()
        self.assertEqual((code, out, err), (0, "", ""))

    def test_load_in_a_normal_process_is_a_protocol_error(self):
        shim = self.start_ready({"main.py": "def handler(e, c): return 1\n"}, "main.handler")
        shim.send({"type": "load", "handler": "main.handler", "code_dir": self.code, "deps_dir": None,
                   "env": {}, "concurrency": 1})
        self.assertIsNone(shim.recv())
        code, _, err = shim.finish()
        self.assertEqual(code, 1)
        self.assertIn("protocol error", err)


class TestInitErrors(ShimTestCase):
    def assert_init_error(self, files, handler, error_type, message=None):
        shim = self.start(files, handler)
        frames = shim.ready()
        f = frames[-1]
        self.assertEqual(f["type"], "init_error", frames)
        self.assertEqual(f["errorType"], error_type, f)
        if message is not None:
            self.assertEqual(f["errorMessage"], message)
        self.assertIsInstance(f["stackTrace"], list)
        self.assertIn("[ERROR] " + error_type, logs(frames, None, "stderr"))
        self.assertEqual(shim.proc.wait(timeout=IO_TIMEOUT), 1)
        return f

    def test_import_error(self):
        self.assert_init_error({"main.py": "import nonexistent_mod_xyz\ndef handler(e, c): pass\n"},
                               "main.handler", "Runtime.ImportModuleError",
                               "Unable to import module 'main': No module named 'nonexistent_mod_xyz'")

    def test_missing_module(self):
        self.assert_init_error({}, "nothere.handler", "Runtime.ImportModuleError",
                               "Unable to import module 'nothere': No module named 'nothere'")

    def test_syntax_error(self):
        f = self.assert_init_error({"main.py": "def handler(e, c)\n    return 1\n"},
                                   "main.handler", "Runtime.UserCodeSyntaxError")
        self.assertTrue(f["errorMessage"].startswith("Syntax error in module 'main':"), f)
        self.assertIn("main.py", f["stackTrace"][0])

    def test_handler_missing(self):
        self.assert_init_error({"main.py": "def other(e, c): pass\n"}, "main.handler",
                               "Runtime.HandlerNotFound", "Handler 'handler' missing on module 'main'")

    def test_a_build_check_names_the_entrypoint_to_set(self):
        # Regression (issue 13): the error named the missing attribute but not the fix. The
        # call-time message stays Lambda's (above); the build check adds the hint.
        code, out, _ = self.run_check({"handler.py": "import json\ndef helper(x): pass\ndef lambda_handler(e, c): pass\n"},
                                      "handler.handler")
        self.assertEqual(code, 1)
        err = json.loads(out.strip().splitlines()[-1])
        self.assertEqual(err["errorType"], "Runtime.HandlerNotFound")
        self.assertEqual(err["errorMessage"],
                         "Handler 'handler' missing on module 'handler'; it defines lambda_handler, helper: "
                         "set the entrypoint to handler.lambda_handler (sless deploy --entrypoint handler.lambda_handler)")

    def test_handler_not_callable(self):
        self.assert_init_error({"main.py": "handler = 42\n"}, "main.handler", "Runtime.HandlerNotFound")

    def test_exception_at_import(self):
        f = self.assert_init_error({"main.py": "raise RuntimeError('bad config')\n"}, "main.handler",
                                   "RuntimeError", "bad config")
        self.assertIn("main.py", f["stackTrace"][0])

    def test_malformed_handler(self):
        self.assert_init_error({"main.py": ""}, "main", "Runtime.MalformedHandlerName")


class TestCheck(ShimTestCase):
    def test_check_ok(self):
        code, out, err = self.run_check({"main.py": """
            print("noise at import")
            async def handler(event, context):
                return 1
        """}, "main.handler")
        self.assertEqual(code, 0, err)
        self.assertEqual(out, "")  # the module's own output is sent to stderr
        self.assertIn("noise at import", err)

    def test_check_nested(self):
        code, out, err = self.run_check({"src/hello_world/app.py": "def handler(e, c): pass\n"},
                                        "src/hello_world.app.handler")
        self.assertEqual(code, 0, err)

    def last_json_line(self, out):
        lines = out.strip("\n").splitlines()
        self.assertTrue(lines, "no stdout")
        return json.loads(lines[-1])

    def test_check_import_error(self):
        code, out, err = self.run_check({"main.py": """
            import sys
            sys.stdout.write("no newline at the end")
            import nonexistent_mod_xyz
        """}, "main.handler")
        self.assertEqual(code, 1)
        self.assertEqual(self.last_json_line(out), {
            "errorType": "Runtime.ImportModuleError",
            "errorMessage": "Unable to import module 'main': No module named 'nonexistent_mod_xyz'"})
        self.assertIn("Runtime.ImportModuleError", err)

    def test_check_handler_missing(self):
        code, out, err = self.run_check({"main.py": "x = 1\n"}, "main.handler")
        self.assertEqual(code, 1)
        self.assertEqual(self.last_json_line(out)["errorType"], "Runtime.HandlerNotFound")

    def test_check_not_callable(self):
        code, out, err = self.run_check({"main.py": "handler = 'string'\n"}, "main.handler")
        self.assertEqual(code, 1)
        self.assertEqual(self.last_json_line(out)["errorType"], "Runtime.HandlerNotFound")

    def test_check_syntax_error(self):
        code, out, err = self.run_check({"main.py": "def handler(:\n"}, "main.handler")
        self.assertEqual(code, 1)
        self.assertEqual(self.last_json_line(out)["errorType"], "Runtime.UserCodeSyntaxError")
        self.assertIn("main.py", err)


if __name__ == "__main__":
    unittest.main()
