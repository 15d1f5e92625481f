"""`shellsim export-blend` and the PC2 point cache, checked in Blender itself (skipped when
Blender is not installed; scripts/install-deps.sh installs it)."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np

import shellsim
from helpers import CLI, read_ply_vertices

BLENDER = shutil.which("blender")


def read_json(path):
    with open(path) as f:
        return json.load(f)


@unittest.skipUnless(BLENDER, "Blender is not installed")
class ExportBlend(unittest.TestCase):
    def test_the_default_run_opens_in_blender_with_the_frames_and_its_point_cache(self):
        scene = shellsim.default_scene().to_dict()
        scene["output"]["formats"] = ["ply", "pc2"]
        with tempfile.TemporaryDirectory() as folder:
            run = os.path.join(folder, "default")
            shellsim.run(scene, run, max_frames=8)
            blend = os.path.join(folder, "default.blend")
            subprocess.run([CLI, "export-blend", run, "--out", blend, "-q"], check=True)
            summary = read_json(os.path.join(run, "summary.json"))
            (cache,) = summary["point_caches"]
            self.assertEqual(cache["frames"], 8)
            out = os.path.join(folder, "check.json")
            subprocess.run([BLENDER, "-b", blend, "--python-exit-code", "3", "--python",
                            os.path.join(os.path.dirname(__file__), "blender_check.py"), "--",
                            "sheet", os.path.join(run, cache["file"]), out, "0", "7"],
                           check=True, capture_output=True)
            seen = read_json(out)
            # The sheet, the floor and the sphere, a camera and a light.
            self.assertEqual(seen["objects"],
                             ["camera", "obstacle_0_plane", "obstacle_1_sphere", "sheet", "sun"])
            self.assertEqual((seen["frame_start"], seen["frame_end"]), (0, 7))
            self.assertAlmostEqual(seen["fps"], 30.0)
            for frame in (0, 7):
                written = read_ply_vertices(os.path.join(run, "frames", f"sheet_{frame:05d}.ply"))
                for kind in ("body", "cached"):
                    got = np.array(seen[kind][str(frame)], dtype=np.float32)
                    np.testing.assert_array_equal(got, written, err_msg=f"{kind} frame {frame}")
            # The sheet moved between the two frames: the check compares something.
            self.assertGreater(np.abs(np.array(seen["body"]["7"]) - np.array(seen["body"]["0"])).max(), 1e-3)

    def test_a_broken_body_becomes_one_object_per_frame(self):
        scene = {
            "bodies": [{"name": "strip", "primitive": {"type": "sheet", "size": [0.4, 0.1, 0], "resolution": 16},
                        "model": "thick_shell", "material": {"young_modulus": 1e5, "thickness": 0.005},
                        "thick_shell": {"layers": 1, "fracture": {"stretch": 0.05, "mode": "coarse"}},
                        "pins": [{"shape": "box", "center": [-0.2, 0, 0], "half_extents": [0.01, 0.1, 0.01]},
                                 {"shape": "box", "center": [0.2, 0, 0], "half_extents": [0.01, 0.1, 0.01],
                                  "path": [{"time": 0, "offset": [0, 0, 0]}, {"time": 0.2, "offset": [0.1, 0, 0]}]}]}],
            "gravity": [0, 0, 0],
            "time": {"duration": 0.2, "frame_rate": 25},
        }
        with tempfile.TemporaryDirectory() as folder:
            run = os.path.join(folder, "strip")
            shellsim.run(scene, run)
            summary = read_json(os.path.join(run, "summary.json"))
            self.assertGreater(summary["frames"][-1]["bodies"][0]["broken_elements"], 0, "it did not break")
            result = subprocess.run([CLI, "export-blend", run], check=True, capture_output=True, text=True)
            frames = len(summary["frames"])
            self.assertIn(f"{frames + 2} objects", result.stdout)
            self.assertTrue(os.path.exists(os.path.join(run, "strip.blend")))

    def test_a_missing_blender_or_run_is_a_clear_error(self):
        with tempfile.TemporaryDirectory() as folder:
            result = subprocess.run([CLI, "export-blend", folder], capture_output=True, text=True)
            self.assertEqual(result.returncode, 4, result.stderr)
            self.assertIn("summary.json", result.stderr)
            run = os.path.join(folder, "run")
            shellsim.run(shellsim.default_scene(), run, max_frames=2)
            result = subprocess.run([CLI, "export-blend", run, "--blender", "/nonexistent/blender"],
                                    capture_output=True, text=True)
            self.assertEqual(result.returncode, 4)
            self.assertIn("cannot run Blender", result.stderr)
            self.assertFalse(any(name.endswith(".blend") for name in os.listdir(run)))


if __name__ == "__main__":
    unittest.main()
