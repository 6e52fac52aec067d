"""deployctl's human output on a terminal (a pseudo-terminal of a given width) and off one:
long ids cut to their column on a terminal and whole in a pipe; states in colour on a terminal,
none with NO_COLOR (no-color.org) nor with TERM=dumb, which gets no cursor movement either, and
neither off a terminal."""

import os
import re

from harness import DEPLOYCTL_BIN, DaemonTestCase, PtyProcess, main_skipping_with_77, wait_until

LONG_STEP = "download-the-weights-of-kimi-k2-5-nvfp4-shard-0001"
LONG_PLAN = "a-plan-whose-name-goes-on-and-on-and-on"

PLAN = """\
version: 1
name: %s
steps:
  - id: prepare
    run: 'true'
  - id: %s
    run: 'read line < @DIR@/gate'
""" % (LONG_PLAN, LONG_STEP)


def on_terminal(argv, env, cols=60):
    """Runs argv to its end with its stdout a terminal `cols` wide; (status, output)."""
    term = PtyProcess(argv, env, cols=cols)
    try:
        return term.finish()
    finally:
        term.close()


class TerminalCase(DaemonTestCase):
    """A run whose second step (of a long id, in a plan of a long name) waits until released."""

    def setUp(self):
        super().setUp()
        self.plan = self.d.write_plan("long.yaml", PLAN)
        os.mkfifo(self.plan.file("gate"))
        self.run_id, _ = self.d.apply(self.plan, wait=False, check=0)
        self.d.wait_step(self.run_id, LONG_STEP, ("running",))
        self.released = False
        self.addCleanup(self.release)

    def release(self):
        if not self.released:
            self.released = True
            with open(self.plan.file("gate"), "w") as gate:
                gate.write("go\n")

    def env(self, **extra):
        return dict(os.environ, **{"DEPLOYD_SOCKET": self.d.socket, "TERM": "xterm", **extra})


    def watch_to_the_end(self, env, first, cols=100):
        """`deployctl watch` of the run on a terminal: once `first` (a regex) is on it, the run
        is let go on; returns the whole output of a watch that succeeded."""
        term = PtyProcess([DEPLOYCTL_BIN, "watch", self.run_id], env, cols=cols)
        self.addCleanup(term.close)
        term.read_until(first)
        self.release()
        status, text = term.finish()
        self.assertEqual(status, 0, text)
        return text


class IdColumnTest(TerminalCase):
    def env(self, **extra):
        return super().env(NO_COLOR="1", **extra)

    def test_status_cuts_long_step_ids_on_a_terminal(self):
        status, text = on_terminal([DEPLOYCTL_BIN, "status", self.run_id], self.env(), cols=60)
        self.assertEqual(status, 0, text)
        rows = [l for l in text.splitlines() if l.startswith(("STEP", "prepare", "download"))]
        self.assertEqual(rows[0], "STEP               STATE      ATTEMPTS TIME     DETAIL")
        self.assertRegex(rows[2], r"^download-the-weig… running    1 ")
        # In a pipe the whole id, and the columns line up after it.
        cp = self.d.ctl("status", self.run_id, check=0)
        pipe_rows = [l for l in cp.stdout.splitlines() if l.startswith(("STEP", "download"))]
        self.assertEqual(pipe_rows[0], "STEP" + " " * (len(LONG_STEP) - 3) + "STATE      "
                                       "ATTEMPTS TIME     DETAIL")
        self.assertTrue(pipe_rows[1].startswith(LONG_STEP + " running    1 "), pipe_rows)

    def test_runs_cuts_long_ids_on_a_terminal(self):
        status, text = on_terminal([DEPLOYCTL_BIN, "runs"], self.env(), cols=100)
        self.assertEqual(status, 0, text)
        row = [l for l in text.splitlines() if "running" in l][0]
        self.assertRegex(row, r"^a-plan-whose-name-goes-on… a-plan-whose-nam… running    \d{4}-")
        cp = self.d.ctl("runs", check=0)
        row = [l for l in cp.stdout.splitlines() if "running" in l][0]
        self.assertTrue(row.startswith("%s %s running    " % (self.run_id, LONG_PLAN)), row)

    def test_watch_keeps_state_and_time_on_a_narrow_terminal(self):
        text = self.watch_to_the_end(self.env(), rb"download-the-weig\xe2\x80\xa6  running +\d",
                                     cols=50)
        self.assertRegex(text, r"download-the-weig…  succeeded +\d")


class ColourTest(TerminalCase):
    RUNNING = "\x1b[36mrunning\x1b[0m"
    SUCCEEDED = "\x1b[32msucceeded\x1b[0m"

    def test_states_in_colour_on_a_terminal(self):
        for env in (self.env(), self.env(NO_COLOR="")):  # NO_COLOR empty: as if unset
            status, text = on_terminal([DEPLOYCTL_BIN, "status", self.run_id], env, cols=120)
            self.assertEqual(status, 0, text)
            self.assertIn("state:   " + self.RUNNING, text)
            self.assertRegex(text, r"\nprepare +%s +1 " % re.escape(self.SUCCEEDED))
            status, text = on_terminal([DEPLOYCTL_BIN, "runs"], env, cols=120)
            self.assertIn(" %s    2" % self.RUNNING, text)

    def test_no_colour_with_no_color_nor_off_a_terminal(self):
        for args in (("status", self.run_id), ("runs",)):
            status, text = on_terminal([DEPLOYCTL_BIN] + list(args), self.env(NO_COLOR="1"),
                                       cols=120)
            self.assertEqual(status, 0, text)
            self.assertNotIn("\x1b", text)
            self.assertIn("running", text)
            self.assertNotIn("\x1b", self.d.ctl(*args, check=0).stdout)
        # A watch still redraws in place, in plain states.
        text = self.watch_to_the_end(self.env(NO_COLOR="1"), rb"\x1b\[\d+A")
        self.assertNotIn("\x1b[3", text)
        self.assertIn("\x1b[2K", text)

    def test_term_dumb_gets_neither_colour_nor_cursor_movement(self):
        env = self.env(TERM="dumb")
        status, text = on_terminal([DEPLOYCTL_BIN, "status", self.run_id], env, cols=120)
        self.assertNotIn("\x1b", text)
        text = self.watch_to_the_end(env, rb"following run ")
        # The plain lines of a watch to a file.
        self.assertNotIn("\x1b", text)
        self.assertRegex(text, r"\] %s +succeeded" % LONG_STEP)
        self.assertRegex(text, r"run %s succeeded after \S+\n$" % self.run_id)

    def test_apply_wait_on_a_terminal_paints_the_states(self):
        plan = self.d.write_plan("quick.yaml", "version: 1\nname: quick\nsteps:\n  - id: one\n"
                                               "    run: 'true'\n")
        status, text = on_terminal([DEPLOYCTL_BIN, "apply", plan.path, "--wait"], self.env(),
                                   cols=120)
        self.assertEqual(status, 0, text)
        self.assertRegex(text, r"\] one +%s" % re.escape(self.SUCCEEDED))


class TimesTest(TerminalCase):
    def test_a_running_step_shows_its_time_so_far(self):
        def moved():
            out = self.d.ctl("status", self.run_id, check=0).stdout
            row = [l for l in out.splitlines() if l.startswith(LONG_STEP)][0]
            return row if row.split()[3] != "0.0s" else None
        row = wait_until(moved, message="the running step's TIME to move from 0.0s")
        self.assertRegex(row, r"^%s running +1 +\d+\.\ds +pid \d+$" % LONG_STEP)

    def test_wall_clock_times_with_how_long_ago(self):
        out = self.d.ctl("status", self.run_id, check=0).stdout
        self.assertRegex(out, r"\ncreated: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(\d+s ago\)\n")
        out = self.d.ctl("runs", check=0).stdout
        self.assertRegex(out, r"^RUN +PLAN +STATE +CREATED +REASON\n")
        self.assertRegex(out, r"\n%s +%s +running +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(\d+s ago\)"
                         % (self.run_id, LONG_PLAN))


del TerminalCase

if __name__ == "__main__":
    main_skipping_with_77()
