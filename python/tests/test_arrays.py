"""Arrays in and out of a Simulation: shapes, dtypes, copies, out=, round trips."""

import os
import tempfile
import unittest

import numpy as np

import shellsim
from helpers import DATA_DIR, sheet


class ArrayRoundTrips(unittest.TestCase):
    def setUp(self):
        self.vertices, self.triangles = sheet(6)
        self.sim = shellsim.Simulation()
        self.body = self.sim.add_body(self.vertices, self.triangles,
                                      {"model": "discrete_shell", "name": "cloth"})

    def test_positions_are_the_vertices_as_float64_rows(self):
        x = self.sim.positions(self.body)
        self.assertEqual(x.dtype, np.float64)
        self.assertEqual(x.shape, (49, 3))
        np.testing.assert_array_equal(x, self.vertices)
        np.testing.assert_array_equal(self.sim.node_of_vertex(self.body), np.arange(49))
        self.assertEqual(self.sim.body_index("cloth"), self.body)
        self.assertEqual(self.sim.model_name(self.body), "discrete_shell")
        # The discrete shell's stencils: 120 edges, 96 hinges and 72 triangles.
        self.assertEqual(self.sim.element_count(self.body), 288)

    def test_set_then_get_returns_the_same_values(self):
        rng = np.random.default_rng(3)
        x = self.vertices + 1e-3 * rng.standard_normal(self.vertices.shape)
        v = rng.standard_normal(self.vertices.shape)
        self.sim.set_positions(self.body, x)
        self.sim.set_velocities(self.body, v)
        np.testing.assert_array_equal(self.sim.positions(self.body), x)
        np.testing.assert_array_equal(self.sim.velocities(self.body), v)
        # Fortran order and float32 are converted, not refused.
        self.sim.set_positions(self.body, np.asfortranarray(x.astype(np.float32)))
        np.testing.assert_array_equal(self.sim.positions(self.body), x.astype(np.float32))

    def test_arrays_handed_out_are_copies(self):
        x = self.sim.positions(self.body)
        x[:] = 7
        self.assertFalse(np.any(self.sim.positions(self.body) == 7))

    def test_out_is_filled_in_place(self):
        out = np.zeros((49, 3))
        result = self.sim.positions(self.body, out=out)
        self.assertIs(result, out)
        np.testing.assert_array_equal(out, self.vertices)
        with self.assertRaises(shellsim.InputError):
            self.sim.positions(self.body, out=np.zeros((48, 3)))
        with self.assertRaises(shellsim.InputError):
            self.sim.velocities(self.body, out=np.zeros((49, 3))[:, :2])
        # Another dtype or a strided view is refused, not silently copied and left unfilled.
        with self.assertRaises(shellsim.InputError):
            self.sim.positions(self.body, out=np.zeros((49, 3), dtype=np.float32))
        with self.assertRaises(shellsim.InputError):
            self.sim.positions(self.body, out=np.zeros((49, 6))[:, ::2])

    def test_masses_sum_to_area_times_density_times_thickness(self):
        m = self.sim.masses(self.body)
        self.assertEqual(m.shape, (49,))
        self.assertTrue(np.all(m > 0))
        # 1 m^2, thickness 1 mm and density 1000 kg/m^3 by default (docs/scene-reference.md).
        self.assertAlmostEqual(float(m.sum()), 1.0, places=9)

    def test_bad_shapes_and_indices_are_input_errors(self):
        with self.assertRaisesRegex(shellsim.InputError, r"vertices must have shape \(n, 3\)"):
            shellsim.Simulation().add_body(self.vertices[:, :2], self.triangles)
        bad = self.triangles.copy()
        bad[5, 1] = 49
        with self.assertRaisesRegex(shellsim.InputError, r"triangles\[5\] names vertex 49"):
            shellsim.Simulation().add_body(self.vertices, bad)
        with self.assertRaises(shellsim.InputError):
            self.sim.set_positions(self.body, np.zeros((10, 3)))
        with self.assertRaises(shellsim.InputError):
            self.sim.positions(5)
        nan = self.vertices.copy()
        nan[3, 2] = np.nan
        with self.assertRaises(shellsim.InputError):
            self.sim.set_positions(self.body, nan)

    def test_surface_energies_pieces_pins(self):
        self.sim.add_pin(self.body, {"shape": "sphere", "center": [-0.5, -0.5, 0.3], "radius": 0.01})
        self.sim.advance(0.05)
        surface = self.sim.surface(self.body)
        np.testing.assert_array_equal(surface["vertices"], self.sim.positions(self.body))
        np.testing.assert_array_equal(surface["triangles"], self.triangles)
        e = self.sim.energies(self.body)
        self.assertAlmostEqual(e["total"], e["kinetic"] + e["stretching"] + e["bending"] + e["gravitational"])
        self.assertGreater(e["kinetic"], 0)
        pinned = self.sim.pinned_nodes(self.body)
        self.assertEqual(pinned.dtype, np.bool_)
        self.assertEqual(int(pinned.sum()), 1)
        self.assertTrue(pinned[0])
        self.assertEqual(self.sim.piece_count(self.body), 1)
        np.testing.assert_array_equal(self.sim.node_pieces(self.body), np.zeros(49, dtype=np.int32))
        self.assertEqual(self.sim.gas_pressure(self.body), 0.0)  # no pressure on this body

    def test_gas_pressure_is_the_ramped_pressure_before_any_crack(self):
        sim = shellsim.Simulation()
        ramp = [{"time": 0, "value": 0}, {"time": 1, "value": 1}]
        body = sim.add_body(self.vertices, self.triangles,
                            {"model": "discrete_shell", "name": "sail",
                             "pressure": {"pressure": 200, "ramp": ramp}})
        sim.advance(0.25)
        self.assertAlmostEqual(sim.gas_pressure(body), 200 * sim.time, places=9)
        self.assertGreater(sim.gas_pressure(body), 0)

    def test_intersecting_triangles_name_the_bodies_and_nodes_of_each_pair(self):
        sim = shellsim.Simulation()
        lower = sim.add_body(self.vertices, self.triangles, {"model": "discrete_shell"})
        self.assertEqual(sim.intersecting_triangle_pairs(), 0)
        self.assertEqual(sim.intersecting_triangles().shape, (0, 8))
        # A second sheet turned by 30 degrees about the line y = 0.05, z = 0.3 through the
        # first: they cross along that line.
        turn, axis = np.radians(30), 0.05
        offset = self.vertices[:, 1] - axis
        tilted = np.c_[self.vertices[:, 0], axis + np.cos(turn) * offset,
                       0.3 + np.sin(turn) * offset]
        upper = sim.add_body(tilted, self.triangles, {"model": "discrete_shell"})
        self.assertEqual((sim.body_name(lower), sim.body_name(upper)), ("body0", "body1"))
        rows = sim.intersecting_triangles()
        self.assertEqual(rows.dtype, np.int32)
        self.assertEqual(rows.shape, (sim.intersecting_triangle_pairs(), 8))
        self.assertGreater(len(rows), 0)
        self.assertTrue(np.all(rows[:, 0] == lower) and np.all(rows[:, 4] == upper))
        # Every pair's triangles reach across the line from both sides.
        for body, nodes in ((lower, rows[:, 1:4]), (upper, rows[:, 5:8])):
            y = sim.positions(body)[nodes, 1]
            self.assertTrue(np.all(y.min(axis=1) < axis) and np.all(y.max(axis=1) > axis))

    def test_geometry_files_round_trip(self):
        with tempfile.TemporaryDirectory() as folder:
            for name in ("sheet.ply", "sheet.obj"):
                path = os.path.join(folder, name)
                shellsim.write_geometry(path, self.vertices, self.triangles)
                mesh = shellsim.read_geometry(path)
                np.testing.assert_allclose(mesh["vertices"], self.vertices, atol=1e-6)
                np.testing.assert_array_equal(mesh["triangles"], self.triangles)


class PointClouds(unittest.TestCase):
    def test_a_point_cloud_with_normals_is_a_fiber_body(self):
        rng = np.random.default_rng(7)
        normals = rng.standard_normal((800, 3))
        normals /= np.linalg.norm(normals, axis=1)[:, None]
        points = 0.2 * normals + [0, 0, 0.5]
        sim = shellsim.Simulation()
        body = sim.add_body(points, None, {"model": "fiber", "fiber": {"node_count": 200}},
                            normals=normals)
        self.assertEqual(sim.node_count(body), 200)
        self.assertEqual(len(sim.node_of_vertex(body)), 800)
        surface = sim.surface(body)
        self.assertEqual(surface["triangles"].shape, (0, 3))
        sim.advance(0.02)
        self.assertLess(sim.positions(body)[:, 2].mean(), 0.5)  # it falls
        with self.assertRaisesRegex(shellsim.InputError, "one row per vertex"):
            sim.add_body(points, None, {"model": "fiber"}, normals=normals[:10])


class MeshTools(unittest.TestCase):
    def test_info_repair_thicken_and_validate_work_on_arrays(self):
        mesh = shellsim.read_geometry(os.path.join(DATA_DIR, "spot.obj"))
        info = shellsim.mesh_info(mesh["vertices"], mesh["triangles"])
        self.assertEqual(info["vertices"], len(mesh["vertices"]))
        self.assertEqual(info["non_manifold_edges"], 0)
        self.assertEqual(info["refusals"], [])
        # A copy with a flipped triangle is refused, and repair orients it back.
        flipped = mesh["triangles"].copy()
        flipped[0] = flipped[0][::-1]
        self.assertTrue(shellsim.mesh_info(mesh["vertices"], flipped)["refusals"])
        repaired = shellsim.repair(mesh["vertices"], flipped)
        self.assertEqual(shellsim.mesh_info(repaired["vertices"], repaired["triangles"])["refusals"], [])
        shell = shellsim.thicken(mesh["vertices"], mesh["triangles"], 0.05)
        self.assertEqual(shell["inner"].shape, mesh["vertices"].shape)
        self.assertEqual((shell["intersecting_pairs"], shell["inverted_elements"]), (0, 0))
        self.assertLessEqual(shell["depth"].max(), 0.05 + 1e-12)
        self.assertGreater(shell["mean_depth"], 0.02)
        with self.assertRaises(shellsim.InputError):
            shellsim.thicken(mesh["vertices"], mesh["triangles"], -1)
        report = shellsim.validate({"bodies": [{"primitive": {"type": "sheet"}, "model": "fiber"}]})
        self.assertEqual(report["bodies"][0]["model"], "fiber")
        self.assertGreater(report["bodies"][0]["nodes"], 0)


class States(unittest.TestCase):
    def test_a_restored_state_continues_bit_for_bit_also_from_a_file(self):
        vertices, triangles = sheet(6)
        sim = shellsim.Simulation()
        body = sim.add_body(vertices, triangles, {"model": "discrete_shell"})
        sim.add_obstacle({"type": "sphere", "center": [0, 0, 0], "radius": 0.2})
        sim.advance(0.1)
        saved = sim.save_state()
        self.assertAlmostEqual(saved.time, 0.1)
        sim.advance(0.1)
        first = sim.positions(body)
        sim.restore_state(saved)
        sim.advance(0.1)
        np.testing.assert_array_equal(sim.positions(body), first)
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "state.bin")
            sim.write_state(saved, path)
            sim.restore_state(sim.read_state(path))
            sim.advance(0.1)
            np.testing.assert_array_equal(sim.positions(body), first)
            with open(path, "r+b") as f:
                f.seek(40)
                f.write(b"\xff\xff")
            with self.assertRaisesRegex(shellsim.InputError, "state.bin"):
                sim.read_state(path)


if __name__ == "__main__":
    unittest.main()
