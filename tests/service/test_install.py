#!/usr/bin/python3
"""AddModel / RemoveModel and npullm-client add, remove, import-ollama on a
private bus: a good model, a truncated one, a non-GGUF, an unsupported
architecture, a name collision, a caller without authorization, and a full
disk (a small tmpfs, as root). Nothing may be left half-written: after a
failure the install directory holds exactly what it held before.

Environment (set by tests/vision/meson.build): NPULLMD, NPULLM_CLIENT,
NPULLM_TEST_MODEL (llama), NPULLM_TEST_VISION_MODEL (gemma3),
NPULLM_TEST_MMPROJ, NPULLM_TEST_IMAGES.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import gguf_patch  # noqa: E402
import npullm_testbus as tb  # noqa: E402
from npullm_testbus import Gio, GLib, ServiceTestCase, run_tap  # noqa: E402

JOB_IFACE = "org.npullm.ModelJob"


class InstallTestBase(ServiceTestCase):
    """Roots: the install directory (first), then the usual test models."""

    ARGS = ("--default-model", "tiny")

    @classmethod
    def install_root(cls, workdir):
        d = os.path.join(workdir, "installed")
        os.makedirs(d)
        return d

    @classmethod
    def make_model_dirs(cls, workdir):
        cls.install_dir = cls.install_root(workdir)
        cls.other_dir = tb.make_model_dir(workdir)
        return [cls.install_dir, cls.other_dir]

    def contents(self):
        return sorted(os.listdir(self.install_dir))

    def add(self, c, path, name, projector=None):
        """AddModel; returns (job path, [(copied, total)...], error_name, message)."""
        fds = Gio.UnixFDList.new()
        opened = [os.open(p, os.O_RDONLY) for p in ([path] + ([projector] if projector else []))]
        try:
            idx = [fds.append(fd) for fd in opened]
            options = {"projector": GLib.Variant("h", idx[1])} if projector else {}
            job = c.call("AddModel", "(hsa{sv})", (idx[0], name, options), "(o)", fd_list=fds)[0]
        finally:
            for fd in opened:
                os.close(fd)
        self.assertTrue(c.wait(lambda: any(s[0] == job and s[2] == "Finished" for s in c.signals), 60))
        progress = [s[3] for s in c.signals if s[0] == job and s[2] == "Progress"]
        finished = next(s[3] for s in c.signals if s[0] == job and s[2] == "Finished")
        return job, progress, finished[0], finished[1]

    def write(self, name, data):
        path = os.path.join(self.workdir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path


class InstallTest(InstallTestBase):

    @classmethod
    def install_root(cls, workdir):
        d = super().install_root(workdir)
        # left by an install cut short: removed when the daemon starts
        with open(os.path.join(d, ".cut.gguf.Ab12Cd"), "wb") as f:
            f.write(b"GGUF")
        return d

    def test_stale_temporary_removed(self):
        self.assertNotIn(".cut.gguf.Ab12Cd", self.contents())

    def test_add_and_remove(self):
        c = self.client()
        model = tb.env_path("NPULLM_TEST_MODEL")
        size = os.path.getsize(model)
        job, progress, err, msg = self.add(c, model, "mine")
        self.assertEqual((err, msg), ("", ""))
        self.assertTrue(job.startswith("/org/npullm/ModelJob/"))
        self.assertEqual(progress[0], (0, size))
        self.assertEqual(progress[-1], (size, size))
        self.assertTrue(all(a[0] <= b[0] for a, b in zip(progress, progress[1:])))
        self.assertEqual(self.contents(), ["mine.gguf"])
        self.assertTrue(c.wait(lambda: any(s[2] == "ModelsChanged" for s in c.signals), 10))
        with open(model, "rb") as a, open(os.path.join(self.install_dir, "mine.gguf"), "rb") as b:
            self.assertEqual(hashlib.sha256(a.read()).digest(), hashlib.sha256(b.read()).digest())
        models = {m["name"]: m for m in c.call("ListModels", reply="(aa{sv})")[0]}
        self.assertTrue(models["mine"]["supported"])
        text, reason, stats = c.run("Hello", tb.variant_dict({"model": ("s", "mine"), "max_tokens": ("u", 3)}))
        self.assertEqual(reason, "length", stats)
        self.wait_idle(c)
        c.call("UnloadModel", "(s)", ("mine",))
        c.call("RemoveModel", "(s)", ("mine",))
        self.assertEqual(self.contents(), [])
        self.assertDBusError("org.npullm.Error.NoSuchModel", c.call, "RemoveModel", "(s)", ("mine",))

    def test_refusals_leave_nothing(self):
        c = self.client()
        model = tb.env_path("NPULLM_TEST_MODEL")
        with open(model, "rb") as f:
            data = f.read()
        truncated = self.write("truncated.gguf", data[:len(data) // 2])
        job, _, err, msg = self.add(c, truncated, "half")
        self.assertEqual(err, "org.npullm.Error.InvalidArgument", msg)
        self.assertIn("not a usable GGUF model", msg)
        job, _, err, msg = self.add(c, self.write("text.gguf", b"hello, not a model\n" * 10), "text")
        self.assertEqual(err, "org.npullm.Error.InvalidArgument", msg)
        g = gguf_patch.GGUF(model)
        g.set_kv("general.architecture", gguf_patch.STRING, b"mamba")
        mamba = os.path.join(self.workdir, "mamba.gguf")
        g.write(mamba)
        job, _, err, msg = self.add(c, mamba, "mamba")
        self.assertEqual(err, "org.npullm.Error.NotSupported", msg)
        self.assertIn("mamba", msg)
        # refused at the call: a taken name, a bad name, no regular file, an unknown option
        for name in ("tiny", "../evil", ""):
            self.assertDBusError("org.npullm.Error.InvalidArgument", self.add, c, model, name)
        # names the catalog never lists as models (vision projectors' files):
        # installed, RemoveModel could not find them again (issue #34)
        for name in ("vision.mmproj", "mmproj-f16", "mmproj"):
            msg = self.assertDBusError("org.npullm.Error.InvalidArgument", self.add, c, model, name)
            self.assertIn("vision projector", msg)
        r, w = os.pipe()
        try:
            fds = Gio.UnixFDList.new()
            idx = fds.append(r)
            self.assertDBusError("org.npullm.Error.InvalidArgument", c.call, "AddModel", "(hsa{sv})",
                                 (idx, "piped", {}), "(o)", fd_list=fds)
            fds = Gio.UnixFDList.new()
            fd = os.open(model, os.O_RDONLY)
            idx = fds.append(fd)
            os.close(fd)
            msg = self.assertDBusError("org.npullm.Error.InvalidArgument", c.call, "AddModel", "(hsa{sv})",
                                       (idx, "opt", {"color": GLib.Variant("s", "red")}), "(o)", fd_list=fds)
            self.assertIn("color", msg)
            # a second descriptor no handle names is refused, not kept
            fds = Gio.UnixFDList.new()
            fd = os.open(model, os.O_RDONLY)
            idx = fds.append(fd)
            fds.append(fd)
            os.close(fd)
            msg = self.assertDBusError("org.npullm.Error.InvalidArgument", c.call, "AddModel", "(hsa{sv})",
                                       (idx, "spare", {}), "(o)", fd_list=fds)
            self.assertIn("AddModel: the handles do not name the descriptors passed", msg)
        finally:
            os.close(r)
            os.close(w)
        self.assertEqual(self.contents(), [])
        # not installed with AddModel: not removed
        self.assertDBusError("org.npullm.Error.NotSupported", c.call, "RemoveModel", "(s)", ("tiny",))
        self.assertTrue(os.path.exists(os.path.join(self.other_dir, "tiny.gguf")))

    def test_not_authorized(self):
        c = self.client()
        model = tb.env_path("NPULLM_TEST_MODEL")
        self.assertEqual(self.add(c, model, "kept")[2], "")
        self.polkit.allow(["org.npullm.generate"])
        try:
            self.assertDBusError("org.npullm.Error.NotAuthorized", self.add, c, model, "denied")
            self.assertDBusError("org.npullm.Error.NotAuthorized", c.call, "RemoveModel", "(s)", ("kept",))
        finally:
            self.polkit.mock("AllowUnknown", "(b)", (True,))
        self.assertEqual(self.contents(), ["kept.gguf"])
        c.call("RemoveModel", "(s)", ("kept",))
        self.assertEqual(self.contents(), [])

    def test_add_with_projector(self):
        c = self.client()
        gemma = tb.env_path("NPULLM_TEST_VISION_MODEL")
        mmproj = tb.env_path("NPULLM_TEST_MMPROJ")
        # a projector that fits no llama model: refused, nothing left
        job, _, err, msg = self.add(c, tb.env_path("NPULLM_TEST_MODEL"), "llamavision", projector=mmproj)
        self.assertEqual(err, "org.npullm.Error.InvalidArgument", msg)
        self.assertIn("projector", msg)
        self.assertEqual(self.contents(), [])
        job, progress, err, msg = self.add(c, gemma, "seeing", projector=mmproj)
        self.assertEqual(err, "", msg)
        total = os.path.getsize(gemma) + os.path.getsize(mmproj)
        self.assertEqual(progress[-1], (total, total))
        self.assertEqual(self.contents(), ["seeing.gguf", "seeing.mmproj.gguf"])
        models = {m["name"]: m for m in c.call("ListModels", reply="(aa{sv})")[0]}
        self.assertTrue(models["seeing"]["vision"])
        r = self.run_client("--model", "seeing", "describe-image", "--max-tokens", "2", "--temperature", "0",
                            os.path.join(tb.env_path("NPULLM_TEST_IMAGES"), "rose.png"), timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.wait_idle(c)
        c.call("UnloadModel", "(s)", ("seeing",))
        c.call("RemoveModel", "(s)", ("seeing",))
        self.assertEqual(self.contents(), [])

    def test_client_commands(self):
        model = tb.env_path("NPULLM_TEST_MODEL")
        r = self.run_client("add", model, "--name", "viaclient")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.contents(), ["viaclient.gguf"])
        r = self.run_client("add", model, "--name", "viaclient")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"already exists", r.stderr)
        r = self.run_client("--json", "remove", "viaclient")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout.decode().splitlines()[-1])["event"], "done")
        self.assertEqual(self.contents(), [])

        # import-ollama reads the caller's own store and passes the blob
        store = os.path.join(self.workdir, "ollama")
        os.makedirs(os.path.join(store, "blobs"))
        with open(model, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        tb.place_model(model, os.path.join(store, "blobs", "sha256-" + digest))
        mdir = os.path.join(store, "manifests", "registry.ollama.ai", "library", "llama3.2")
        os.makedirs(mdir)
        with open(os.path.join(mdir, "1b"), "w") as f:
            json.dump({"schemaVersion": 2, "layers": [{"mediaType": "application/vnd.ollama.image.model",
                                                       "digest": "sha256:" + digest, "size": 1}]}, f)
        env = dict(self.bus.env, OLLAMA_MODELS=store)
        run = [self.client_path, "--address", self.bus.address]
        r = subprocess.run(run + ["import-ollama", "llama3.2:1b"], capture_output=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.contents(), ["llama3.2:1b.gguf"])
        r = subprocess.run(run + ["import-ollama", "nothere:7b"], capture_output=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 5, r.stderr)
        r = subprocess.run(run + ["import-ollama", "../../etc"], capture_output=True, env=env, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        r = self.run_client("remove", "llama3.2:1b")
        self.assertEqual(r.returncode, 0, r.stderr)

        # a vision model: its projector layer comes along
        layers = []
        for media, src in (("model", tb.env_path("NPULLM_TEST_VISION_MODEL")),
                           ("projector", tb.env_path("NPULLM_TEST_MMPROJ"))):
            with open(src, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            tb.place_model(src, os.path.join(store, "blobs", "sha256-" + digest))
            layers.append({"mediaType": "application/vnd.ollama.image." + media, "digest": "sha256:" + digest,
                           "size": 1})
        mdir = os.path.join(store, "manifests", "registry.ollama.ai", "library", "gemma3")
        os.makedirs(mdir)
        with open(os.path.join(mdir, "4b"), "w") as f:
            json.dump({"schemaVersion": 2, "layers": layers}, f)
        r = subprocess.run(run + ["import-ollama", "gemma3:4b"], capture_output=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.contents(), ["gemma3:4b.gguf", "gemma3:4b.mmproj.gguf"])
        r = self.run_client("remove", "gemma3:4b")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.contents(), [])


@unittest.skipUnless(os.geteuid() == 0, "mounting a tmpfs needs root")
class TmpfsInstallBase(InstallTestBase):
    """The install directory is a tmpfs of tmpfs_size() bytes (as root)."""

    @classmethod
    def install_root(cls, workdir):
        d = os.path.join(workdir, "small-disk")
        os.makedirs(d)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d,mode=0755" % cls.tmpfs_size(), "tmpfs", d],
                           capture_output=True)
        if r.returncode != 0:  # root without CAP_SYS_ADMIN (some containers)
            raise unittest.SkipTest("cannot mount a tmpfs: %s" % r.stderr.decode().strip())
        cls.mounted = d
        return d

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            subprocess.run(["umount", cls.mounted], check=False)
            # (the mount point was busy while the workdir was removed)
            shutil.rmtree(cls.workdir, ignore_errors=True)


class FullDiskTest(TmpfsInstallBase):
    """The install directory is a 32 MiB tmpfs: the test model does not fit."""

    @classmethod
    def tmpfs_size(cls):
        return 32 << 20

    def test_full_disk(self):
        c = self.client()
        with open(os.path.join(self.install_dir, "filler"), "wb") as f:
            f.write(b"\0" * (4 << 20))
        job, _, err, msg = self.add(c, tb.env_path("NPULLM_TEST_MODEL"), "big")
        self.assertEqual(err, "org.npullm.Error.NoSpace", msg)
        self.assertIn("not enough space", msg)
        self.assertEqual(self.contents(), ["filler"])



class TwoInstallsTest(TmpfsInstallBase):
    """The install directory is a tmpfs with room for one test model (and
    the 16 MiB spare) but not two: two installs started together must not
    both fail (issue #34: both ended with NoSpace, their space reservations
    interleaved); one is installed, the other refused with NoSpace."""

    @classmethod
    def tmpfs_size(cls):
        return os.path.getsize(tb.env_path("NPULLM_TEST_MODEL")) + (16 << 20) + (8 << 20)

    def test_two_at_once(self):
        c = self.client()
        model = tb.env_path("NPULLM_TEST_MODEL")
        jobs = []
        for name in ("first", "second"):
            fds = Gio.UnixFDList.new()
            fd = os.open(model, os.O_RDONLY)
            idx = fds.append(fd)
            os.close(fd)
            jobs.append(c.call("AddModel", "(hsa{sv})", (idx, name, {}), "(o)", fd_list=fds)[0])

        def finished(job):
            return next((s[3] for s in c.signals if s[0] == job and s[2] == "Finished"), None)
        self.assertTrue(c.wait(lambda: all(finished(j) is not None for j in jobs), 120))
        errors = sorted(finished(j)[0] for j in jobs)
        self.assertEqual(errors, ["", "org.npullm.Error.NoSpace"], [finished(j) for j in jobs])
        self.assertEqual(len(self.contents()), 1, self.contents())


if __name__ == "__main__":
    sys.exit(run_tap("test_install"))
