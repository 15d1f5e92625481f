"""Ctrl-C stops long calls cleanly; a thousand worlds made and dropped leak nothing."""

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

import numpy as np

import shellsim
from helpers import sheet


def run_python(code):
    """Runs `code` in a fresh interpreter with this one's path; returns its stdout lines."""
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                            text=True, timeout=300, env=dict(os.environ))
    if result.returncode != 0:
        raise AssertionError(f"exit {result.returncode}\n{result.stdout}\n{result.stderr}")
    return result.stdout.splitlines()


class CtrlC(unittest.TestCase):
    def test_ctrl_c_stops_an_advance_between_steps_and_python_gets_its_handler_back(self):
        lines = run_python("""
            import os, signal, threading, time
            import shellsim
            from helpers import sheet
            vertices, triangles = sheet(40)
            sim = shellsim.Simulation()
            body = sim.add_body(vertices, triangles, {"model": "discrete_shell"})
            sim.advance(0.01)
            before = sim.positions(body)
            threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
            start = time.monotonic()
            try:
                sim.advance(1000.0)
                print("not stopped")
            except KeyboardInterrupt:
                print("stopped", sim.time, (sim.positions(body) == before).all(),
                      time.monotonic() - start < 60)
            print("handler", signal.getsignal(signal.SIGINT) is signal.default_int_handler)
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(1)
                print("no interrupt")
            except KeyboardInterrupt:
                print("python interrupt")
        """)
        self.assertEqual(lines, ["stopped 0.01 True True", "handler True", "python interrupt"])

    def test_ctrl_c_stops_a_run_keeping_its_frames_and_saying_interrupted(self):
        with tempfile.TemporaryDirectory() as folder:
            lines = run_python(f"""
                import os, signal, threading
                import shellsim
                scene = {{"bodies": [{{"primitive": {{"type": "sheet", "resolution": 40}},
                                      "model": "discrete_shell"}}],
                         "time": {{"duration": 1000, "frame_rate": 100}}}}
                frames = []
                def progress(p):
                    frames.append(p["frame"])
                    if p["frame"] == 2:
                        threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
                try:
                    shellsim.run(scene, {folder!r}, progress=progress)
                    print("not stopped")
                except KeyboardInterrupt:
                    print("stopped", len(frames) >= 3)
            """)
            self.assertEqual(lines, ["stopped True"])
            status = shellsim.run_status(folder)
            self.assertEqual(status["status"], "interrupted")
            self.assertGreaterEqual(status["frames_written"], 3)
            written = os.listdir(os.path.join(folder, "frames"))
            self.assertGreaterEqual(len(written), 3)


def resident_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class NoLeaks(unittest.TestCase):
    def test_a_thousand_worlds_made_stepped_and_dropped_keep_the_memory_bounded(self):
        vertices, triangles = sheet(10)

        def world():
            sim = shellsim.Simulation()
            body = sim.add_body(vertices, triangles, {"model": "discrete_shell"})
            sim.add_obstacle({"type": "plane"})
            sim.advance(1e-3)
            sim.positions(body)
            state = sim.save_state()
            sim.restore_state(state)
            try:  # the failure path too
                sim.add_body(vertices, triangles, {"model": "nope"})
            except shellsim.InputError:
                pass

        for _ in range(100):
            world()
        before = resident_bytes()
        for _ in range(900):
            world()
        grown = resident_bytes() - before
        # Each world holds about 100 kB; 900 kept alive would be ~90 MB.
        self.assertLess(grown, 8 << 20, f"grew by {grown / 2**20:.1f} MiB")


if __name__ == "__main__":
    unittest.main()
