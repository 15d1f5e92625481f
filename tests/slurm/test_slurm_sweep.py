#!/usr/bin/env python3
"""`shellsim sweep --slurm` on a real single-node Slurm cluster (local_cluster.py).

Submits a three-variant sweep (one variant fails on purpose) as a job array and a report job,
checks every variant's frames and the report against a local sweep of the same file; then
requeues a running task with `scontrol requeue` and checks that it resumes from its
checkpoint and ends with the frames of an uninterrupted run, byte for byte.

Needs root (slurmd runs the jobs as their submitter) and the slurm-wlm and munge packages
(scripts/install-deps.sh); exits 77 (skipped) when not root.
"""

import csv
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from local_cluster import LocalCluster, missing_programs  # noqa: E402

CLI = os.environ.get("SHELLSIM_CLI", "shellsim")
WAIT_SECONDS = 150  # each wait; well within the test's ctest timeout, so the daemons get stopped
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
            "BOOT_FAIL", "DEADLINE", "PREEMPTED"}


def write_json(folder, name, content):
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        json.dump(content, f)
    return path


def shellsim(*args, env=None):
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=300, env=env)


def read_report(folder):
    with open(os.path.join(folder, "report.csv")) as f:
        return list(csv.DictReader(f))


def frame_files(folder):
    frames = os.path.join(folder, "frames")
    files = {}
    for name in sorted(os.listdir(frames)):
        with open(os.path.join(frames, name), "rb") as f:
            files[name] = f.read()
    return files


def frames_written(folder):
    try:
        with open(os.path.join(folder, "summary.json")) as f:
            summary = json.load(f)
        return summary.get("status"), len(summary.get("frames", []))
    except (OSError, ValueError):
        return None, 0


class SlurmSweeps(unittest.TestCase):
    cluster = None
    work = None

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.TemporaryDirectory(prefix="shellsim_slurm_")
        cls.cluster = LocalCluster(os.path.join(cls.work.name, "cluster")).start()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()
        cls.work.cleanup()

    def job_state(self, job):
        out = self.cluster.run("scontrol", "-o", "show", "job", job, check=False)
        states = [field.split("=", 1)[1] for line in out.splitlines()
                  for field in line.split() if field.startswith("JobState=")]
        return states

    def wait_for_job(self, job):
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            states = self.job_state(job)
            if states and all(s in TERMINAL for s in states):
                return states
            time.sleep(0.5)
        self.fail(f"job {job} not ended after {WAIT_SECONDS} s: "
                  f"{self.cluster.run('squeue', '-t', 'all', check=False)}")

    def submit(self, sweep, out):
        done = shellsim("sweep", sweep, "--out", out, "--slurm", "--cpus", "1", "--submit", "-q",
                        env=self.cluster.env)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        array_job, report_job = done.stdout.split()
        with open(os.path.join(out, "slurm", "jobs.json")) as f:
            record = json.load(f)
        self.assertEqual((record["array_job"], record["report_job"]), (array_job, report_job))
        return array_job, report_job

    def test_an_array_runs_every_variant_then_the_report_as_a_local_sweep_does(self):
        folder = self.work.name
        # Variant 2 blows up (a step 60 times its stable one, no smaller allowed): exit 3, and
        # the report job (afterany) still runs and lists it.
        sweep = write_json(folder, "three.json", {"combine": "zip", "parameters": [
            {"path": "bodies[0].material.young_modulus", "values": [1e5, 1e6, 1e7]},
            {"path": "time.duration", "values": [0.1, 0.1, 1.0]},
            {"path": "time.time_step", "values": [0, 0, 0.03]},
            {"path": "time.min_time_step", "values": [0, 0, 0.03]}]})
        on_slurm = os.path.join(folder, "on_slurm")
        start = time.monotonic()
        array_job, report_job = self.submit(sweep, on_slurm)
        self.assertEqual(self.wait_for_job(report_job), ["COMPLETED"])
        print(f"3-task array and report job: {time.monotonic() - start:.1f} s")
        tasks = self.job_state(array_job)
        self.assertEqual(sorted(tasks), ["COMPLETED", "COMPLETED", "FAILED"], tasks)

        rows = read_report(on_slurm)
        self.assertEqual([r["status"] for r in rows],
                         ["completed", "completed", "numerical_failure"])
        self.assertIn("blew up", rows[2]["error"])
        for index in (0, 1):
            variant = os.path.join(on_slurm, "variants", f"{index:04d}")
            self.assertEqual(len(frame_files(variant)), 4)
            with open(os.path.join(variant, "run.log")) as f:
                self.assertIn(f"variant {index:04d} of {on_slurm}: starts", f.read())
        self.assertTrue(os.path.getsize(os.path.join(on_slurm, "sweep_sheet.png")) > 1000)
        with open(os.path.join(on_slurm, "slurm", "report.log")) as f:
            self.assertIn("2 completed, 1 failed or stopped, 0 not run", f.read())

        # The same sweep here, two at a time: the same rows but for the wall time, and the
        # same frames byte for byte.
        local = os.path.join(folder, "local")
        done = shellsim("sweep", sweep, "--out", local, "--local", "--jobs", "2", "-q")
        self.assertEqual(done.returncode, 3, done.stdout + done.stderr)
        local_rows = read_report(local)
        for row in rows + local_rows:
            del row["wall_s"]
        self.assertEqual(rows, local_rows)
        for index in range(3):
            name = f"{index:04d}"
            self.assertEqual(frame_files(os.path.join(on_slurm, "variants", name)),
                             frame_files(os.path.join(local, "variants", name)), name)

    def test_a_requeued_task_resumes_and_ends_with_the_frames_of_an_uninterrupted_run(self):
        folder = self.work.name
        # Six seconds of the default sheet: about 47,000 steps, a few seconds of wall time.
        sweep = write_json(folder, "long.json", {"parameters": [
            {"path": "bodies[0].material.young_modulus", "values": [1e7]},
            {"path": "time.duration", "values": [6.0]}]})
        out = os.path.join(folder, "requeued")
        array_job, report_job = self.submit(sweep, out)
        variant = os.path.join(out, "variants", "0000")
        deadline = time.monotonic() + WAIT_SECONDS
        status, frames = frames_written(variant)
        while (status != "running" or frames < 10) and status != "completed" \
                and time.monotonic() < deadline:
            time.sleep(0.05)
            status, frames = frames_written(variant)
        self.assertEqual(status, "running")
        self.assertLess(frames, 181, "the run ended before it could be requeued")
        self.cluster.run("scontrol", "requeue", f"{array_job}_0")
        self.assertEqual(self.wait_for_job(report_job), ["COMPLETED"])
        self.assertEqual(self.job_state(array_job), ["COMPLETED"])

        with open(os.path.join(variant, "run.log")) as f:
            log = f.read()
        self.assertIn("DUE TO JOB REQUEUE", log)
        self.assertIn("shellsim: interrupted (SIGTERM)", log)
        self.assertIn("resumes from its checkpoint (interrupted", log)
        self.assertEqual([r["status"] for r in read_report(out)], ["completed"])

        reference = os.path.join(folder, "uninterrupted")
        done = shellsim("run", os.path.join(variant, "scene.json"), "--out", reference, "-q")
        self.assertEqual(done.returncode, 0, done.stderr)
        requeued_frames, reference_frames = frame_files(variant), frame_files(reference)
        self.assertEqual(len(reference_frames), 181)
        self.assertEqual(sorted(requeued_frames), sorted(reference_frames))
        for name in reference_frames:
            self.assertEqual(requeued_frames[name], reference_frames[name], name)


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("skipped: a local Slurm cluster needs root (slurmd runs jobs as their submitter)")
        sys.exit(77)
    missing = missing_programs()
    if missing:
        print(f"not installed: {', '.join(missing)}: run scripts/install-deps.sh")
        sys.exit(1)
    unittest.main(verbosity=2)
