#!/usr/bin/python3
"""Authorization: polkit denies (dbusmock's polkitd template), polkit
hanging and vanishing (fail closed, daemon stays responsive), and the real
polkitd with the installed actions (root only)."""

import os
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from npullm_testbus import (GLib, MockPolkit, Npullmd, RealPolkit, ServiceTestCase,  # noqa: E402
                            REAL_POLKITD, SOURCE_ROOT, run_tap, variant_dict, wait_for_name)

OPTS = variant_dict({"temperature": ("d", 0.0), "max_tokens": ("u", 4)})



class MockPolkitTest(ServiceTestCase):
    CONFIG = {"Authorization": {"Timeout": "2"}}

    def setUp(self):
        super().setUp()
        self.polkit.allow([])

    def tearDown(self):
        self.polkit.mock("SimulateHang", "(b)", (False,))
        self.polkit.mock("ReleaseHangingCalls")
        self.polkit.mock("AllowUnknown", "(b)", (True,))
        super().tearDown()

    def test_deny_generate(self):
        c = self.client()
        for call in (lambda: c.generate("hi", OPTS),
                     lambda: c.generate([{"role": GLib.Variant("s", "user"), "content": GLib.Variant("s", "x")}],
                                        OPTS, method="Chat"),
                     lambda: c.call("Complete", "(sa{sv})", ("hi", OPTS), "(sa{sv})")):
            self.assertDBusError("org.npullm.Error.NotAuthorized", call)
        # nothing ran: no request, no model loaded
        self.assertEqual(c.prop("ActiveRequests"), 0)
        self.assertEqual(c.prop("LoadedModels"), [])
        self.assertEqual([s for s in c.signals if s[0].startswith("/org/npullm/Request")], [])
        # reading needs no authorization
        self.assertEqual(len(c.call("ListModels", reply="(aa{sv})")[0]), 3)  # broken, tiny, tiny2
        self.assertDBusError("org.npullm.Error.NotAuthorized", c.call, "ForgetCache")
        self.polkit.allow(["org.npullm.generate"])
        self.assertEqual(c.call("ForgetCache"), ())
        text, reason, _ = c.run("hi", OPTS)
        self.assertEqual(reason, "length")

    def test_manage_needs_its_action(self):
        c = self.client()
        self.polkit.allow(["org.npullm.generate", "org.npullm.describe-image"])
        self.assertDBusError("org.npullm.Error.NotAuthorized", c.call, "LoadModel", "(s)", ("tiny",))
        self.assertDBusError("org.npullm.Error.NotAuthorized", c.call, "UnloadModel", "(s)", ("tiny",))
        self.assertDBusError("org.npullm.Error.NotAuthorized", c.call, "Set", "(ssv)",
                             ("org.npullm.Manager", "IdleTimeout", GLib.Variant("u", 5)),
                             iface="org.freedesktop.DBus.Properties")
        self.assertEqual(c.prop("IdleTimeout"), 300)
        self.polkit.allow(["org.npullm.manage"])
        c.call("LoadModel", "(s)", ("tiny2",))
        self.assertIn("tiny2", c.prop("LoadedModels"))
        c.call("UnloadModel", "(s)", ("tiny2",))
        self.assertNotIn("tiny2", c.prop("LoadedModels"))

    def test_polkit_hang_times_out(self):
        c = self.client()
        self.polkit.mock("SimulateHang", "(b)", (True,))
        t0 = time.monotonic()
        box = c.call_async("Generate", "(sa{sv})", ("hi", OPTS))
        # the daemon keeps answering while polkit hangs
        for _ in range(5):
            self.assertEqual(len(c.call("ListModels", reply="(aa{sv})")[0]), 3)  # broken, tiny, tiny2
            self.assertEqual(c.prop("Device"), "cpu")
        self.assertTrue(c.wait(lambda: box, 10))
        self.assertIn("error", box)
        self.assertIn("NotAuthorized", box["error"].message)
        self.assertGreaterEqual(time.monotonic() - t0, 1.5)
        self.assertEqual(c.prop("ActiveRequests"), 0)


class VanishingPolkitTest(ServiceTestCase):
    """polkitd hangs, then disappears from the bus: the pending call fails
    at once (not after the 30 s timeout) and later calls fail closed."""
    CONFIG = {"Authorization": {"Timeout": "30"}}

    def test_hang_then_vanish(self):
        c = self.client()
        self.polkit.mock("SimulateHang", "(b)", (True,))
        box = c.call_async("Generate", "(sa{sv})", ("hi", OPTS))
        self.assertTrue(c.wait(lambda: self.polkit.mock("HaveHangingCalls").unpack()[0], 5))
        t0 = time.monotonic()
        self.polkit.stop()
        self.assertTrue(c.wait(lambda: box, 10))
        self.assertLess(time.monotonic() - t0, 10)
        self.assertIn("NotAuthorized", box["error"].message)
        self.assertDBusError("org.npullm.Error.NotAuthorized", c.generate, "hi", OPTS)
        self.assertEqual(c.prop("ActiveRequests"), 0)
        # a new polkit on the bus is used again
        self.__class__.polkit = MockPolkit(self.bus)
        text, reason, _ = c.run("hi", OPTS)
        self.assertEqual(reason, "length")


class NoPolkitTest(ServiceTestCase):
    POLKIT = None

    def test_fail_closed_without_polkit(self):
        c = self.client()
        self.assertDBusError("org.npullm.Error.NotAuthorized", c.generate, "hi", OPTS)
        self.assertDBusError("org.npullm.Error.NotAuthorized", c.call, "LoadModel", "(s)", ("tiny",))
        self.assertEqual(c.prop("ActiveRequests"), 0)


POLICY = os.path.join(SOURCE_ROOT, "polkit", "org.npullm.policy")
ACTIONS_DIR = "/usr/share/polkit-1/actions"
RULES_DIR = "/etc/polkit-1/rules.d"


@unittest.skipUnless(os.getuid() == 0, "the real polkitd needs root (it reads the installed actions)")
@unittest.skipUnless(os.path.exists(REAL_POLKITD), "polkitd is not installed")
class RealPolkitTest(ServiceTestCase):
    POLKIT = None

    @classmethod
    def setUpClass(cls):
        cls.installed = os.path.join(ACTIONS_DIR, "org.npullm.policy")
        cls.installed_by_us = not os.path.exists(cls.installed)
        if cls.installed_by_us:
            shutil.copy(POLICY, cls.installed)
        try:
            super().setUpClass()
            cls.real = RealPolkit(cls.bus)
        except BaseException:
            if cls.installed_by_us:
                os.unlink(cls.installed)
            if getattr(cls, "daemon", None) is not None:
                super().tearDownClass()
            raise
        cls.rule = os.path.join(RULES_DIR, "00-npullm-test-%d.rules" % os.getpid())

    @classmethod
    def tearDownClass(cls):
        if os.path.exists(cls.rule):
            os.unlink(cls.rule)
        cls.real.stop()
        if cls.installed_by_us:
            os.unlink(cls.installed)
        super().tearDownClass()

    def test_real_polkitd(self):
        env = self.bus.env
        out = subprocess.run(["pkaction", "--action-id", "org.npullm.generate", "--verbose"], env=env,
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertRegex(out.stdout, r"implicit active:\s+yes")
        self.assertRegex(out.stdout, r"implicit any:\s+auth_admin")
        # polkitd always authorizes root: the request runs
        c = self.client()
        text, reason, _ = c.run("hi", OPTS)
        self.assertEqual(reason, "length")
        # an unprivileged caller without an active session gets auth_admin,
        # and with no authentication agent that is a refusal
        os.chmod(self.workdir, 0o755)
        as_nobody = lambda: subprocess.run(  # noqa: E731
            [self.client_path, "--address", self.bus.address, "generate", "--temperature", "0", "-n", "4", "hi"],
            env=env, capture_output=True, text=True, timeout=60, user="nobody", cwd="/")
        out = as_nobody()
        self.assertEqual(out.returncode, 3, out.stderr)
        self.assertIn("not authorized", out.stderr)
        self.assertEqual(c.prop("ActiveRequests"), 0)
        with open(self.rule, "w") as f:
            f.write('polkit.addRule(function(action, subject) {\n'
                    '  if (action.id == "org.npullm.generate" && subject.user == "nobody")\n'
                    '    return polkit.Result.YES;\n'
                    '});\n')
        deadline = time.monotonic() + 10
        while True:
            out = as_nobody()
            if out.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.3)  # polkitd reloads its rules on inotify
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.rstrip("\n"), text.rstrip("\n"))


if __name__ == "__main__":
    sys.exit(run_tap("test_polkit"))
