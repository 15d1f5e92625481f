"""Scenes through the module: the same frames as the command-line tool, runs, renders."""

import json
import os
import subprocess
import tempfile
import unittest

import numpy as np

import shellsim
from helpers import CLI, read_ply_vertices

# A sheet dropped on a sphere (the issue's check), two bodies' worth of keys.
SCENE = {
    "bodies": [{
        "name": "sheet",
        "primitive": {"type": "sheet", "size": [1, 1, 1], "resolution": 10},
        "transform": {"translation": [0, 0, 0.3], "rotation_degrees": [5, 0, 0]},
        "model": "discrete_shell",
        "material": {"young_modulus": 1e5, "thickness": 0.002},
    }],
    "obstacles": [{"type": "sphere", "center": [0, 0, 0], "radius": 0.2, "friction": 0.4}],
    "time": {"duration": 0.3, "frame_rate": 30},
}


class TheSameFramesAsTheCli(unittest.TestCase):
    def test_a_sheet_dropped_on_a_sphere_through_the_api_matches_the_cli_frame_for_frame(self):
        with tempfile.TemporaryDirectory() as folder:
            scene_path = os.path.join(folder, "drop.json")
            with open(scene_path, "w") as f:
                json.dump(SCENE, f)
            out = os.path.join(folder, "cli")
            subprocess.run([CLI, "run", scene_path, "--out", out, "-q"], check=True)
            frames = sorted(os.listdir(os.path.join(out, "frames")))
            self.assertEqual(len(frames), 10)  # frame 0 and 9 more over 0.3 s at 30 fps

            # The same body built from arrays: the first frame's vertices and the
            # primitive's triangles, with the body keys but no geometry or transform.
            first = shellsim.Scene.from_dict(SCENE)
            reference = shellsim.Simulation.from_scene(first)
            triangles = reference.surface(0)["triangles"]
            vertices = reference.positions(0)
            body = {k: v for k, v in SCENE["bodies"][0].items() if k not in ("primitive", "transform")}
            sim = shellsim.Simulation(time={"frame_rate": 30})
            sheet = sim.add_body(vertices, triangles, body)
            sim.add_obstacle(SCENE["obstacles"][0])
            for k, name in enumerate(frames):
                if k > 0:
                    sim.advance_frames(1)
                written = read_ply_vertices(os.path.join(out, "frames", name))
                np.testing.assert_array_equal(sim.positions(sheet).astype(np.float32), written,
                                              err_msg=f"frame {k}")
            self.assertGreater(sim.statistics["steps"], 0)
            # It did fall onto the sphere: the centre rests on top of it.
            centre = sim.positions(sheet)[np.argmin(np.linalg.norm(vertices[:, :2], axis=1))]
            self.assertLess(centre[2], 0.3)

    def test_run_writes_what_the_cli_writes(self):
        with tempfile.TemporaryDirectory() as folder:
            progress = []
            report = shellsim.run(SCENE, os.path.join(folder, "api"), progress=progress.append)
            self.assertEqual(report["frames_written"], 10)
            self.assertEqual([p["frame"] for p in progress], list(range(10)))
            self.assertEqual(shellsim.run_status(os.path.join(folder, "api"))["status"], "completed")
            scene_path = os.path.join(folder, "drop.json")
            with open(scene_path, "w") as f:
                json.dump(SCENE, f)
            subprocess.run([CLI, "run", scene_path, "--out", os.path.join(folder, "cli"), "-q"],
                           check=True)
            for k in range(10):
                name = f"frames/sheet_{k:05d}.ply"
                with open(os.path.join(folder, "api", name), "rb") as a, \
                        open(os.path.join(folder, "cli", name), "rb") as b:
                    self.assertEqual(a.read(), b.read(), name)

    def test_scene_dictionaries_round_trip_and_bad_ones_list_every_problem(self):
        scene = shellsim.Scene.from_dict(SCENE)
        again = shellsim.Scene.from_dict(scene.to_dict())
        self.assertEqual(scene.to_dict(), again.to_dict())
        self.assertAlmostEqual(scene.duration, 0.3)
        bad = json.loads(json.dumps(SCENE))
        bad["bodies"][0]["material"]["poisson"] = 0.7
        bad["bodies"][0]["modle"] = "x"
        bad["time"]["frame_rate"] = -1
        with self.assertRaises(shellsim.InputError) as caught:
            shellsim.Scene.from_dict(bad)
        problems = caught.exception.problems
        self.assertEqual(len(problems), 3, problems)
        self.assertTrue(any("bodies[0].material.poisson = 0.7" in p for p in problems))
        self.assertTrue(any("did you mean 'model'" in p for p in problems))
        self.assertTrue(any("time.frame_rate" in p for p in problems))
        self.assertEqual(caught.exception.exit_code, 2)
        self.assertIsInstance(caught.exception, ValueError)

    @unittest.skipUnless(shellsim.has_render, "built without rendering")
    def test_render_writes_frames_and_a_contact_sheet(self):
        with tempfile.TemporaryDirectory() as folder:
            run = os.path.join(folder, "run")
            shellsim.run(SCENE, run, max_frames=3)
            report = shellsim.render(run, width=64, height=48, video=False)
            self.assertEqual(report["frames_rendered"], 3)
            self.assertTrue(os.path.exists(report["contact_sheet"]))
            with open(report["contact_sheet"], "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


class Errors(unittest.TestCase):
    def test_each_kind_of_bad_input_raises_its_exception(self):
        with tempfile.TemporaryDirectory() as folder:
            with self.assertRaisesRegex(shellsim.IoError, "no such file"):
                shellsim.load_scene(os.path.join(folder, "missing.json"))
            broken = os.path.join(folder, "broken.obj")
            with open(broken, "w") as f:
                f.write("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 9\n")
            with self.assertRaisesRegex(shellsim.InputError, r"broken\.obj:4: vertex index 9"):
                shellsim.read_geometry(broken)
            not_json = os.path.join(folder, "scene.json")
            with open(not_json, "w") as f:
                f.write("{\"bodies\": [")
            with self.assertRaisesRegex(shellsim.InputError, "scene.json"):
                shellsim.load_scene(not_json)
        with self.assertRaises(shellsim.InputError):
            shellsim.Simulation(time={"integrator": "leapfrog"})
        with self.assertRaises(shellsim.InputError):
            shellsim.Simulation().add_obstacle({"type": "sphere", "radius": -1})
        with self.assertRaises(shellsim.InputError):
            shellsim.Simulation().advance(-1)
        with self.assertRaises(shellsim.InputError):
            shellsim.set_threads(-2)

    def test_a_blow_up_is_a_numerical_error_and_the_simulation_stays_at_its_start(self):
        from helpers import sheet
        vertices, triangles = sheet(6)
        # A stiff sheet on a step 1000 times its stable one that may not be halved.
        sim = shellsim.Simulation(time={"time_step": 1e-2, "min_time_step": 1e-2})
        body = sim.add_body(vertices, triangles, {"model": "mass_spring", "material": {"young_modulus": 1e9}})
        sim.set_velocities(body, np.random.default_rng(1).standard_normal(vertices.shape))
        with self.assertRaises(shellsim.NumericalError) as caught:
            sim.advance(1.0)
        self.assertEqual(caught.exception.exit_code, 3)
        self.assertEqual(sim.time, 0.0)
        np.testing.assert_array_equal(sim.positions(body), vertices)


if __name__ == "__main__":
    unittest.main()
