#!/usr/bin/env python3
"""Tests of the ./inferlab launcher's set-up and help: missing Debian packages are installed (as
root, or through passwordless sudo) with what needs them said, the exact apt-get line is printed
when they cannot be (or INFERLAB_NO_INSTALL=1), and every launcher command answers --help.
Builds nothing: dpkg-query, apt-get, sudo and id are fakes on PATH that record their calls.

Run: python3 tools/test_launcher.py   (ctest: the 'launcher' test, label 'tools')
"""

import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.dont_write_bytecode = True
ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = ROOT / "inferlab"
PACKAGES = [line.split("#")[0].split()[0] for line in (ROOT / "tools/debian-packages.txt").read_text().splitlines()
            if line.split("#")[0].strip()]

FAKES = {
    # Installed unless listed in $FAKE_DIR/missing; a removed package reads as dpkg shows it.
    "dpkg-query": """#!/bin/sh
for p; do case "$p" in -*) continue ;; esac
  if grep -qx "$p" "$FAKE_DIR/missing"; then echo "$p deinstall ok config-files"; else echo "$p install ok installed"; fi
done
""",
    # Records its call; "install" removes the packages from the missing list (unless told to fail).
    "apt-get": """#!/bin/sh
echo "apt-get $* [DEBIAN_FRONTEND=${DEBIAN_FRONTEND:-}] [uid=$(id -u)]" >> "$FAKE_DIR/calls"
[ -n "${FAKE_APT_FAIL:-}" ] && { echo "E: Unable to locate package" >&2; exit 100; }
if [ "$1" = install ]; then
  for p; do grep -vx "$p" "$FAKE_DIR/missing" > "$FAKE_DIR/missing.new"; mv "$FAKE_DIR/missing.new" "$FAKE_DIR/missing"; done
fi
exit 0
""",
    # Passwordless only when FAKE_SUDO=ok.
    "sudo": """#!/bin/sh
[ "${FAKE_SUDO:-}" = ok ] || { echo "sudo: a password is required" >&2; exit 1; }
[ "$1" = -n ] && shift
echo "sudo $*" >> "$FAKE_DIR/calls"
FAKE_UID=0 exec "$@"
""",
    "id": """#!/bin/sh
echo "${FAKE_UID:-1000}"
""",
}


class Launcher(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.fake = Path(self.dir.name)
        for name, text in FAKES.items():
            (self.fake / name).write_text(text)
            (self.fake / name).chmod(0o755)
        (self.fake / "calls").write_text("")
        self.set_missing([])

    def tearDown(self):
        self.dir.cleanup()

    def set_missing(self, packages):
        (self.fake / "missing").write_text("".join(p + "\n" for p in packages))

    def calls(self):
        return (self.fake / "calls").read_text()

    def run_launcher(self, *args, uid=1000, sudo=False, **env):
        environment = dict(os.environ, PATH=f"{self.fake}:{os.environ['PATH']}", FAKE_DIR=str(self.fake),
                           FAKE_UID=str(uid), FAKE_SUDO="ok" if sudo else "no")
        for name in ("INFERLAB_NO_INSTALL", "DEBIAN_FRONTEND", "INFERLAB_PRESET"):
            environment.pop(name, None)
        environment.update(env)
        result = subprocess.run([str(LAUNCHER), *args], env=environment, capture_output=True, text=True, timeout=60)
        return result.returncode, result.stdout + result.stderr

    def test_the_one_list_is_the_one_ci_installs(self):
        self.assertEqual(len(PACKAGES), 23)
        for p in ["cmake", "ninja-build", "g++", "libopenblas-dev", "libboost-context-dev", "doxygen", "graphviz",
                  "python3-matplotlib", "nlohmann-json3-dev", "libicu-dev", "python3-venv"]:
            self.assertIn(p, PACKAGES)
        self.assertIn("tools/debian-packages.txt", (ROOT / ".ci/run").read_text())

    def test_nothing_missing_installs_nothing(self):
        code, out = self.run_launcher("setup")
        self.assertEqual(code, 0, out)
        self.assertIn("installed (23 in tools/debian-packages.txt)", out)
        # Chapter 08's model and Python tools (tools/install_model.sh) are installed here already:
        # setup checks them and says nothing more.
        self.assertNotIn("installing", out)
        self.assertEqual(self.calls(), "")

    def test_root_installs_the_missing_ones_and_says_why(self):
        self.set_missing(["libopenblas-dev", "doxygen"])
        code, out = self.run_launcher("setup", uid=0)
        self.assertEqual(code, 0, out)
        self.assertIn("the BLAS baselines", out)   # what needs it, from the list
        self.assertIn("the API reference", out)
        self.assertIn("installing them: apt-get update && apt-get install -y libopenblas-dev doxygen", out)
        self.assertEqual(self.calls().splitlines(), [
            "apt-get update -qq [DEBIAN_FRONTEND=] [uid=0]",
            "apt-get install -y -qq libopenblas-dev doxygen [DEBIAN_FRONTEND=noninteractive] [uid=0]"])
        self.assertEqual((self.fake / "missing").read_text(), "")

    def test_a_removed_package_counts_as_missing(self):
        # `apt-get remove` leaves "deinstall ok config-files": dpkg -s would still exit 0.
        self.set_missing(["graphviz"])
        code, out = self.run_launcher("setup", "--dry-run", uid=0)
        self.assertEqual(code, 0, out)
        self.assertIn("would run: apt-get update && env DEBIAN_FRONTEND=noninteractive apt-get install -y graphviz", out)
        self.assertEqual(self.calls(), "")  # a dry run runs nothing

    def test_passwordless_sudo_is_used(self):
        self.set_missing(["libxxhash-dev"])
        code, out = self.run_launcher("setup", uid=1000, sudo=True)
        self.assertEqual(code, 0, out)
        self.assertIn("installing them: sudo -n apt-get update && sudo -n apt-get install -y libxxhash-dev", out)
        self.assertIn("sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libxxhash-dev", self.calls())
        self.assertIn("apt-get install -y -qq libxxhash-dev [DEBIAN_FRONTEND=noninteractive] [uid=0]", self.calls())

    def test_without_a_way_to_install_the_exact_line_is_printed(self):
        self.set_missing(["libgtest-dev", "libgmock-dev"])
        code, out = self.run_launcher("setup", uid=1000, sudo=False)
        self.assertNotEqual(code, 0, out)
        self.assertIn("  sudo apt-get install -y libgtest-dev libgmock-dev\n", out)
        self.assertEqual(self.calls(), "")

    def test_no_install_prints_the_line_even_as_root(self):
        self.set_missing(["python3-matplotlib"])
        code, out = self.run_launcher("setup", uid=0, INFERLAB_NO_INSTALL="1")
        self.assertNotEqual(code, 0, out)
        self.assertIn("the plots", out)
        self.assertIn("  sudo apt-get install -y python3-matplotlib\n", out)
        self.assertEqual(self.calls(), "")

    def test_a_failing_apt_get_is_reported_with_the_line(self):
        self.set_missing(["doxygen"])
        code, out = self.run_launcher("setup", uid=0, FAKE_APT_FAIL="1")
        self.assertNotEqual(code, 0, out)
        self.assertIn("apt-get failed", out)
        self.assertIn("  sudo apt-get install -y doxygen\n", out)

    def test_a_build_command_installs_before_configuring(self):
        # `tour` on a tree that is not configured: the packages come first. INFERLAB_PRESET points
        # at a preset that does not exist, so the configure after the install fails fast.
        self.set_missing(["libxxhash-dev"])
        code, out = self.run_launcher("tour", uid=0, INFERLAB_PRESET="no-such-preset-for-test")
        self.assertIn("installing them: apt-get update && apt-get install -y libxxhash-dev", out)
        self.assertLess(out.index("installing them"), out.index("configuring"), out)
        self.assertNotEqual(code, 0, out)

    def test_every_launcher_command_answers_help(self):
        for args, expected in [(["help"], "usage: ./inferlab COMMAND"), (["--help"], "usage: ./inferlab COMMAND"),
                               (["-h"], "usage: ./inferlab COMMAND"), (["test", "--help"], "usage: ./inferlab test"),
                               (["test", "-h"], "ctest --help lists the rest"),
                               (["bench", "--help"], "usage: ./inferlab bench"), (["docs", "--help"], "usage: ./inferlab docs"),
                               (["bench", "serve", "--help"], "usage: ./inferlab bench serve"),
                               (["help", "bench"], "./inferlab bench serve [flags]"),
                               (["setup", "--help"], "usage: ./inferlab setup"), (["help", "test"], "usage: ./inferlab test"),
                               (["student", "--help"], "usage: ./inferlab student"), (["grade", "--help"], "usage: inferlab grade"),
                               (["help", "grade"], "usage: inferlab grade")]:
            code, out = self.run_launcher(*args)
            self.assertEqual(code, 0, f"{args}: {out}")
            self.assertIn(expected, out, args)
        code, out = self.run_launcher("setup", "--bogus")
        self.assertEqual(code, 2, out)
        self.assertIn("unknown option '--bogus'", out)


if __name__ == "__main__":
    unittest.main()
