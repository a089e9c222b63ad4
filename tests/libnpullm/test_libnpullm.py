#!/usr/bin/python3
"""libnpullm-1 against a real dbus-daemon (the project's bus policy), a
polkit mock and the real npullmd: the C cases of test-libnpullm (one
process each, as a program would use the library), then the same library
through its typelib from PyGObject and GJS, and the documentation's
examples.

Environment (tests/libnpullm/meson.build): NPULLMD, NPULLM_TEST_MODEL,
NPULLM_TEST_VISION_MODEL, NPULLM_TEST_MMPROJ, NPULLM_TEST_QWEN_MODEL, NPULLM_TEST_IMAGES,
LIBNPULLM_TEST (the C test program), LIBNPULLM_DIR (the build folder with
the library and typelib), LIBNPULLM_EXAMPLE_C (the built C example),
GJS (empty when introspection is off)."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "service"))
import npullm_testbus as tb  # noqa: E402
from npullm_testbus import ServiceTestCase, run_tap  # noqa: E402

SOURCE_ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLES = os.path.join(SOURCE_ROOT, "docs", "examples")


def model_dir(workdir):
    """tiny (default), tiny2, broken from the service tests, plus vision +
    its projector and qwen (a Qwen 3 model that thinks, test_thinking.py)."""
    d = tb.make_model_dir(workdir)
    tb.place_model(tb.env_path("NPULLM_TEST_VISION_MODEL"), os.path.join(d, "vision.gguf"))
    tb.place_model(tb.env_path("NPULLM_TEST_MMPROJ"), os.path.join(d, "vision.mmproj.gguf"))
    tb.place_model(tb.env_path("NPULLM_TEST_QWEN_MODEL"), os.path.join(d, "qwen.gguf"))
    if os.environ.get("NPULLM_TEST_EMBED_MODEL"):
        tb.place_model(os.environ["NPULLM_TEST_EMBED_MODEL"], os.path.join(d, "minilm.gguf"))
    if os.environ.get("NPULLM_TEST_RERANK_MODEL"):
        tb.place_model(os.environ["NPULLM_TEST_RERANK_MODEL"], os.path.join(d, "ranker.gguf"))
    return d


class LibraryTest(ServiceTestCase):
    # room for a long request to be running when the daemon is killed;
    # requests without max_tokens (the documented examples) stay short
    CONFIG = {"Models": {"MaxContext": "4096", "DefaultMaxTokens": "24"}}
    make_model_dir = staticmethod(model_dir)

    def env(self):
        env = dict(self.bus.env)
        libdir = os.environ["LIBNPULLM_DIR"]
        env["GI_TYPELIB_PATH"] = libdir + os.pathsep + env.get("GI_TYPELIB_PATH", "")
        env["LD_LIBRARY_PATH"] = libdir + os.pathsep + env.get("LD_LIBRARY_PATH", "")
        return env

    def interpreter_env(self):
        """For python3 and gjs: in a sanitized build they load an
        instrumented library, so the sanitizer runtimes come first, and
        the interpreters' own allocations are not leak-checked."""
        env = self.env()
        preload = os.environ.get("LIBNPULLM_PRELOAD", "")
        if preload:
            env["LD_PRELOAD"] = preload
            env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
        return env

    def run_checked(self, cmd, timeout=200, interpreter=False):
        env = self.interpreter_env() if interpreter else self.env()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        self.assertEqual(p.returncode, 0, "%s:\n%s%s" % (cmd, p.stdout, p.stderr))
        return p.stdout

    def c_case(self, *args):
        self.run_checked([os.environ["LIBNPULLM_TEST"]] + list(args))

    def image(self):
        return os.path.join(tb.env_path("NPULLM_TEST_IMAGES"), "rose.png")

    def test_c_thinking(self):
        self.c_case("thinking")

    def test_c_reasoning_effort(self):
        self.c_case("reasoning-effort")

    def test_c_embed(self):
        if not os.environ.get("NPULLM_TEST_EMBED_MODEL"):
            self.skipTest("no embedding model (tests/embed needs the bert-tokenizer package)")
        self.c_case("embed")

    def test_c_rerank(self):
        if not os.environ.get("NPULLM_TEST_RERANK_MODEL"):
            self.skipTest("no reranker (tests/embed needs the bert-tokenizer package)")
        self.c_case("rerank")

    def test_c_objects(self):
        self.c_case("objects")

    def test_c_stream(self):
        self.c_case("stream")

    def test_c_cancel(self):
        self.c_case("cancel")

    def test_c_dispose_cancels(self):
        self.c_case("dispose")

    def test_c_error_mapping(self):
        self.c_case("errors")

    def test_c_describe_image_pipe(self):
        self.c_case("image-pipe", self.image())

    def test_c_describe_image_file(self):
        self.c_case("image-file", self.image())

    def test_c_concurrent(self):
        self.c_case("concurrent")

    def test_c_forged_signal_ignored(self):
        self.c_case("forged")

    def test_c_daemon_restart(self):
        cls = type(self)
        p = subprocess.Popen([os.environ["LIBNPULLM_TEST"], "restart"], env=self.env(), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = p.stdout.readline()
            self.assertEqual(line.strip(), "RESTART", p.stderr.read() if p.poll() is not None else line)
            cls.daemon.proc.kill()  # a crash: no Finished from it
            cls.daemon.stop()
            config = dict(cls.CONFIG, Models=dict(cls.CONFIG["Models"], IdleTimeout="77"))
            cls.daemon = tb.Npullmd(cls.bus, cls.npullmd_path, [cls.model_dir], config, cls.ARGS)
            out, err = p.communicate("go\n", timeout=200)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.assertEqual(p.returncode, 0, err)

    def test_pygobject(self):
        if not os.environ.get("GJS"):
            self.skipTest("introspection is off")
        out = self.run_checked([sys.executable, os.path.join(HERE, "gi_client.py")], interpreter=True)
        if os.environ.get("NPULLM_TEST_EMBED_MODEL"):
            self.assertIn("ok embed", out)
            self.assertIn("ok rerank", out)
        self.assertIn("ok stream", out)
        self.assertIn("ok dropped", out)
        self.assertIn("ok cancel", out)
        self.assertIn("ok list models", out)

    def test_gjs(self):
        if not os.environ.get("GJS"):
            self.skipTest("introspection is off")
        out = self.run_checked([os.environ["GJS"], os.path.join(HERE, "gi_client.js")], interpreter=True)
        if os.environ.get("NPULLM_TEST_EMBED_MODEL"):
            self.assertIn("ok embed", out)
            self.assertIn("ok rerank", out)
        self.assertIn("ok stream", out)
        self.assertIn("ok dropped", out)
        self.assertIn("ok cancel", out)
        self.assertIn("ok list models", out)

    def test_documented_examples(self):
        # docs/libnpullm.md shows the examples exactly as they are here...
        with open(os.path.join(SOURCE_ROOT, "docs", "libnpullm.md")) as f:
            doc = f.read()
        for ext in ("c", "js", "py"):
            with open(os.path.join(EXAMPLES, "libnpullm-example." + ext)) as f:
                code = f.read()
            indented = "".join(("    " + line if line.strip() else line) for line in code.splitlines(True))
            self.assertIn(indented, doc, "docs/libnpullm.md shows another libnpullm-example.%s" % ext)
        # ... and each of them streams a generation to its end.
        runs = [([os.environ["LIBNPULLM_EXAMPLE_C"]], False)]
        if os.environ.get("GJS"):
            runs += [([os.environ["GJS"], os.path.join(EXAMPLES, "libnpullm-example.js")], True),
                     ([sys.executable, os.path.join(EXAMPLES, "libnpullm-example.py")], True)]
        for cmd, interpreter in runs:
            out = self.run_checked(cmd, interpreter=interpreter)
            self.assertRegex(out, r"\[(length|stop)\]", cmd)


if __name__ == "__main__":
    sys.exit(run_tap("test_libnpullm"))
