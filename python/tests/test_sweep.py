"""`shellsim sweep` and `sweep-report`: expansion, local runs, reruns, the report, bad files."""

import csv
import json
import os
import struct
import subprocess
import tempfile
import unittest

from helpers import CLI

SOURCE = os.environ.get("SHELLSIM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def write(folder, name, content):
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        json.dump(content, f)
    return path


def shellsim(*args):
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=600)


class Sweeps(unittest.TestCase):
    def test_a_grid_runs_locally_reruns_nothing_and_reports_every_variant(self):
        with tempfile.TemporaryDirectory() as folder:
            sweep = write(folder, "wedge.json", {"parameters": [
                {"path": "bodies[0].material.young_modulus", "values": [1e5, 1e6]},
                {"path": "bodies[0].material.thickness", "range": [0.001, 0.003, 0.001]},
                {"path": "time.duration", "values": [0.1]}],
                "report_fields": ["frames[-1].bodies[0].gravitational", "time_step"]})
            out = os.path.join(folder, "out")
            first = shellsim("sweep", sweep, "--out", out, "--local", "--jobs", "2")
            self.assertEqual(first.returncode, 0, first.stdout + first.stderr)
            self.assertIn("6 ran, 0 completed before, 0 failed", first.stdout)
            # Grid order: the last parameter fastest; each variant's values beside its scene.
            with open(os.path.join(out, "variants", "0004", "variant.json")) as f:
                values = json.load(f)["values"]
            self.assertEqual(values["bodies[0].material.young_modulus"], 1e6)
            self.assertAlmostEqual(values["bodies[0].material.thickness"], 0.002)
            with open(os.path.join(out, "variants", "0004", "scene.json")) as f:
                scene = json.load(f)
            self.assertEqual(scene["bodies"][0]["material"]["young_modulus"], 1e6)
            with open(os.path.join(out, "report.csv")) as f:
                rows = list(csv.DictReader(f))
            self.assertEqual([r["variant"] for r in rows], [f"{i:04d}" for i in range(6)])
            self.assertTrue(all(r["status"] == "completed" and r["frames"] == "4" for r in rows))
            # The sweep file's report_fields, after pieces: a thicker sheet is heavier, a
            # stiffer one takes shorter steps.
            self.assertEqual(list(rows[0])[-3:], ["frames[-1].bodies[0].gravitational", "time_step",
                                                  "error"])
            self.assertGreater(float(rows[2]["frames[-1].bodies[0].gravitational"]),
                               float(rows[0]["frames[-1].bodies[0].gravitational"]))
            self.assertGreater(float(rows[0]["time_step"]), float(rows[3]["time_step"]))
            # A thicker sheet is heavier: more potential energy at the same time.
            self.assertLess(float(rows[0]["potential_J"]), float(rows[2]["potential_J"]))
            # The wedge sheet: a grid of 2 rows (Young's modulus) by 3 columns (thickness) of
            # 320 x 180 thumbnails; duration takes one value and labels nothing.
            with open(os.path.join(out, "sweep_sheet.png"), "rb") as f:
                png = f.read()
            self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
            width, height = struct.unpack(">II", png[16:24])
            self.assertEqual(width, 3 * (320 + 6) + 6)
            self.assertGreater(height, 2 * 180)
            self.assertLess(height, 3 * 180)
            again = shellsim("sweep", sweep, "--out", out, "--local")
            self.assertIn("0 ran, 6 completed before", again.stdout)
            # The same variants with --jobs 1 give the same report but for the wall times.
            other = os.path.join(folder, "other")
            shellsim("sweep", sweep, "--out", other, "--local", "--jobs", "1")
            with open(os.path.join(other, "report.csv")) as f:
                rows1 = list(csv.DictReader(f))
            for a, b in zip(rows, rows1):
                a.pop("wall_s"), b.pop("wall_s")
                self.assertEqual(a, b)

    def test_zip_failures_and_reports_of_unfinished_sweeps(self):
        with tempfile.TemporaryDirectory() as folder:
            # The second variant blows up: a stiff sheet on a long step that may not shrink.
            sweep = write(folder, "zip.json", {"combine": "zip", "parameters": [
                {"path": "bodies[0].material.young_modulus", "values": [1e6, 1e10]},
                {"path": "time.time_step", "values": [0.0, 0.004]},
                {"path": "time.min_time_step", "values": [0.0, 0.004]},
                {"path": "time.duration", "values": [0.1, 0.1]}]})
            out = os.path.join(folder, "out")
            result = shellsim("sweep", sweep, "--out", out, "--local")
            self.assertEqual(result.returncode, 3, result.stdout + result.stderr)
            self.assertIn("1 failed", result.stdout)
            with open(os.path.join(out, "report.csv")) as f:
                rows = list(csv.DictReader(f))
            self.assertEqual(rows[0]["status"], "completed")
            self.assertEqual(rows[1]["status"], "numerical_failure")
            self.assertTrue(rows[1]["error"])
            # Chosen summary fields as more columns: from the sweep file and from --field.
            report = shellsim("sweep-report", out, "--field", "steps_rejected",
                              "--field", "frames[-1].bodies[0].nodes", "--field", "no_such_key")
            self.assertEqual(report.returncode, 0, report.stderr)
            with open(os.path.join(out, "report.csv")) as f:
                rows = list(csv.DictReader(f))
            self.assertEqual(rows[0]["frames[-1].bodies[0].nodes"], "625")
            self.assertEqual(rows[0]["steps_rejected"], "0")
            self.assertEqual(rows[0]["no_such_key"], "")
            bad_field = shellsim("sweep-report", out, "--field", "frames[-0]")
            self.assertEqual(bad_field.returncode, 2)
            self.assertIn("--field 'frames[-0]' is not a path", bad_field.stderr)
            # Without --local: the variants are written, not run; the report says so.
            written = os.path.join(folder, "written")
            self.assertEqual(shellsim("sweep", sweep, "--out", written).returncode, 0)
            report = shellsim("sweep-report", written)
            self.assertIn("0 completed, 0 failed or stopped, 2 not run", report.stdout)

    def test_bad_sweep_files_list_every_problem(self):
        with tempfile.TemporaryDirectory() as folder:
            bad = write(folder, "bad.json", {"paramters": [], "parameters": [
                {"path": "bodies[0].material.youngs_modulus", "values": [1e5]},
                {"path": "bodies[0].material.thickness", "values": []},
                {"path": "bodies[0].material.poisson", "values": ["soft"]},
                {"path": "time.duration", "range": [1, 2, 0]},
                {"path": "bodies[3].name", "values": ["x"]}]})
            result = shellsim("sweep", bad, "--out", os.path.join(folder, "out"))
            self.assertEqual(result.returncode, 2)
            for expected in ["paramters = []: unknown key; did you mean 'parameters'?",
                             "has no key 'youngs_modulus'; did you mean 'young_modulus'?",
                             "parameters[1].values = []: must be a non-empty list",
                             "parameters[2].values[0] = \"soft\": must be a number",
                             "the step must not be 0",
                             "has no entry [3]"]:
                self.assertIn(expected, result.stderr)
            bad_fields = write(folder, "fields.json", {"report_fields": ["ok", "x[", 3],
                "parameters": [{"path": "bodies[-1].material.poisson", "values": [0.3]}]})
            result = shellsim("sweep", bad_fields, "--out", os.path.join(folder, "out"))
            self.assertEqual(result.returncode, 2)
            self.assertIn('report_fields[1] = "x[": is not a path', result.stderr)
            self.assertIn("report_fields[2] = 3: is not a path", result.stderr)
            self.assertNotIn("bodies[-1]", result.stderr)  # the last body: a valid path
            # A value of the right type but out of range: the variant is named.
            weak = write(folder, "weak.json", {"parameters": [
                {"path": "bodies[0].material.poisson", "values": [0.3, 0.7]}]})
            result = shellsim("sweep", weak, "--out", os.path.join(folder, "out"))
            self.assertEqual(result.returncode, 2)
            self.assertIn("variant 1 (bodies[0].material.poisson = 0.7)", result.stderr)
            many = write(folder, "many.json", {"parameters": [
                {"path": "bodies[0].material.young_modulus", "range": [1e5, 1e6, 1e2]}]})
            result = shellsim("sweep", many, "--out", os.path.join(folder, "out"))
            self.assertEqual(result.returncode, 2)
            self.assertIn("9001 variants", result.stderr)
            self.assertIn("--yes", result.stderr)

    def test_slurm_scripts_are_written_checked_and_their_task_command_runs_anywhere(self):
        with tempfile.TemporaryDirectory() as folder:
            sweep = write(folder, "wedge.json", {"parameters": [
                {"path": "bodies[0].material.young_modulus", "values": [1e5, 1e6, 1e7]},
                {"path": "time.duration", "values": [0.1]}]})
            out = os.path.join(folder, "out")
            result = shellsim("sweep", sweep, "--out", out, "--slurm", "--partition", "short",
                              "--time", "0-02:30:00", "--cpus", "4", "--max-running", "2",
                              "--sbatch=--account=lab", "--sbatch=--qos=low")
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("submit both with", result.stdout)
            with open(os.path.join(out, "slurm", "sweep_array.sbatch")) as f:
                array = f.read()
            absolute = os.path.realpath(out)
            for line in ["#SBATCH --array=0-2%2", "#SBATCH --cpus-per-task=4",
                         "#SBATCH --time=0-02:30:00", "#SBATCH --partition=short",
                         "#SBATCH --account=lab", "#SBATCH --qos=low", "#SBATCH --requeue",
                         f"#SBATCH --output={absolute}/variants/%4a/run.log",
                         "#SBATCH --open-mode=append",
                         f"sweep-variant '{absolute}' \"$SLURM_ARRAY_TASK_ID\""]:
                self.assertIn(line, array)
            with open(os.path.join(out, "slurm", "submit.sh")) as f:
                self.assertIn("--dependency=afterany:", f.read())
            with open(os.path.join(out, "slurm", "sweep_report.sbatch")) as f:
                self.assertIn(f"sweep-report '{absolute}'", f.read())
            # bash reads the scripts.
            for name in ("sweep_array.sbatch", "sweep_report.sbatch", "submit.sh"):
                check = subprocess.run(["bash", "-n", os.path.join(out, "slurm", name)])
                self.assertEqual(check.returncode, 0, name)

            # The task command a farm runs: start, then skip; an index the sweep lacks refused.
            task = shellsim("sweep-variant", out, "1")
            self.assertEqual(task.returncode, 0, task.stderr)
            self.assertIn("variant 0001 of " + out + ": starts", task.stderr)
            again = shellsim("sweep-variant", out, "1")
            self.assertIn("completed before, skipped", again.stderr)
            report = shellsim("sweep-report", out)
            self.assertIn("1 completed, 0 failed or stopped, 2 not run", report.stdout)
            missing = shellsim("sweep-variant", out, "3")
            self.assertEqual(missing.returncode, 2)
            self.assertIn("no variant 3 (the sweep has 3, from 0)", missing.stderr)
            nowhere = shellsim("sweep-variant", os.path.join(folder, "nowhere"), "0")
            self.assertEqual(nowhere.returncode, 4, nowhere.stderr)
            self.assertIn("sweep.json", nowhere.stderr)

            # Options sbatch would refuse are refused here, all at once, with what is expected.
            bad = shellsim("sweep", sweep, "--out", out, "--slurm", "--time", "2 hours",
                           "--partition", "a;rm", "--sbatch=account=lab")
            self.assertEqual(bad.returncode, 2)
            for expected in ["--time '2 hours': expected minutes", "--partition 'a;rm'",
                             "--sbatch 'account=lab': one sbatch option"]:
                self.assertIn(expected, bad.stderr)
            spaced = shellsim("sweep", sweep, "--out", os.path.join(folder, "my sweep"), "--slurm")
            self.assertEqual(spaced.returncode, 2)
            self.assertIn("cannot hold spaces", spaced.stderr)
            both = shellsim("sweep", sweep, "--out", out, "--slurm", "--local")
            self.assertNotEqual(both.returncode, 0)
            self.assertIn("excludes", both.stderr)
            alone = shellsim("sweep", sweep, "--out", out, "--submit")
            self.assertNotEqual(alone.returncode, 0)
            self.assertIn("requires --slurm", alone.stderr)

    def test_the_example_wedge_expands_to_five_by_three(self):
        with tempfile.TemporaryDirectory() as folder:
            result = shellsim("sweep", os.path.join(SOURCE, "scenes", "sweeps", "default_wedge.json"),
                              "--out", folder)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("15 variants", result.stdout)


if __name__ == "__main__":
    unittest.main()
