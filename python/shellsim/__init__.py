"""shellsim: physically based animation of thin and thick shells, from Python.

Everything the command-line tool does (read and validate scenes, run them, render and
compare runs) and a simulation built in memory from numpy arrays::

    import numpy as np, shellsim
    sim = shellsim.Simulation()
    sheet = sim.add_body(vertices, triangles, {"model": "discrete_shell"})
    sim.add_obstacle({"type": "sphere", "center": [0, 0, -0.3], "radius": 0.25})
    sim.advance(0.5)
    x = sim.positions(sheet)            # (n, 3) float64, metres

Definitions (bodies, obstacles, pins, loads, time, contact) are dictionaries with the keys
and units of the scene file (docs/scene-reference.md); they are checked as a scene file is,
and every problem is listed in the InputError raised.

Arrays handed out are copies (a fracturing body re-allocates its nodes, so a view could
dangle); pass ``out=`` to fill an existing array instead. Long calls release the GIL, and
Ctrl-C stops them cleanly between two steps with KeyboardInterrupt.
"""

from __future__ import annotations

import json as _json
import os as _os
from typing import Any, Callable, Mapping, Optional, Sequence


class Error(Exception):
    """Every error shellsim raises on purpose; the message names the file and line, the
    scene path of a value, or the body and frame."""

    exit_code = 1

    @property
    def problems(self) -> list[str]:
        """One entry per problem (a scene with several bad values lists them all)."""
        return [line for line in str(self).splitlines() if line.strip()]


class InputError(Error, ValueError):
    """Malformed or impossible input: a scene value, geometry file content, an argument."""

    exit_code = 2


class NumericalError(Error, ArithmeticError):
    """The simulation blew up (NaN, energy or velocity beyond a bound)."""

    exit_code = 3


class IoError(Error, OSError):
    """A file could not be read or written."""

    exit_code = 4


from . import _core  # noqa: E402  (the exception classes above must exist first)

__all__ = [
    "Error", "InputError", "NumericalError", "IoError", "Scene", "Simulation", "State",
    "load_scene", "default_scene", "run", "run_status", "render", "compare", "plot_energy",
    "export_blend", "mesh_info", "repair", "thicken", "validate",
    "read_geometry", "write_geometry", "model_names", "set_threads", "threads", "has_render",
]

State = _core.State
has_render: bool = _core.has_render


def set_threads(threads: int) -> None:
    """Use at most `threads` worker threads (0: all cores). Results do not depend on it."""
    _core.set_threads(int(threads))


def threads() -> int:
    """The number of worker threads shellsim may use now."""
    return _core.threads()


def model_names() -> list[str]:
    """The models a body may name ("model" in a body definition)."""
    return list(_core.model_names())


class Scene:
    """A scene file, parsed and validated. Build one with load_scene, default_scene or
    Scene.from_dict; change it through to_dict / from_dict."""

    def __init__(self, definition: Any, name: str = "default") -> None:
        self._definition = definition
        self.name = name

    @staticmethod
    def from_dict(scene: Mapping[str, Any], folder: str | _os.PathLike = ".",
                  name: str = "scene") -> "Scene":
        """A scene from a dictionary in the scene file's format; relative geometry paths
        resolve against `folder`. InputError lists every problem."""
        text = _json.dumps(scene)
        return Scene(_core.parse_scene(text, name, _os.fspath(folder)), name)

    def to_dict(self) -> dict[str, Any]:
        """The scene as a dictionary in the scene file's format, every key written."""
        return _json.loads(self._definition.to_json())

    def to_json(self) -> str:
        return self._definition.to_json()

    @property
    def folder(self) -> str:
        """Where the scene's relative paths resolve."""
        return _os.fspath(self._definition.folder)

    @property
    def duration(self) -> float:
        return self._definition.duration

    def __repr__(self) -> str:
        return f"Scene({self.name!r}, {self._definition.body_count} bodies, " \
               f"{self.duration} s)"


def load_scene(path: str | _os.PathLike) -> Scene:
    """Reads and validates a scene file (InputError lists every problem, IoError when it
    cannot be read)."""
    return Scene(_core.load_scene(_os.fspath(path)), _os.fspath(path))


def default_scene() -> Scene:
    """The built-in default scene of `shellsim run`."""
    return Scene(_core.default_scene(), "default")


def _as_scene(scene: Scene | str | _os.PathLike | Mapping[str, Any]) -> Scene:
    if isinstance(scene, Scene):
        return scene
    if isinstance(scene, Mapping):
        return Scene.from_dict(scene)
    return load_scene(scene)


def run(scene: Scene | str | _os.PathLike | Mapping[str, Any], out: Optional[str] = None, *,
        max_frames: Optional[int] = None, resume: bool = False,
        progress: Optional[Callable[[dict], None]] = None,
        on_warning: Optional[Callable[[str], None]] = None) -> dict[str, Any]:
    """Runs a scene as `shellsim run` does: frames and summary.json in `out` (default: the
    scene's output folder). `progress` gets a dict (frame, frame_count, time, steps,
    wall_seconds) after each frame. Returns the run report (frames_written, steps,
    time_step, stable_time_step, output_folder, summary, warnings)."""
    s = _as_scene(scene)
    return _core.run_scene(s._definition, s.name, None if out is None else _os.fspath(out),
                           max_frames, resume, progress, on_warning)


def run_status(folder: str | _os.PathLike) -> dict[str, Any]:
    """What a run folder's summary.json says (status, error, frames_written, time, stale,
    description)."""
    return _core.run_status(_os.fspath(folder))


def render(run_folder: str | _os.PathLike, *, width: int = 1280, height: int = 720,
           video: bool = True, wireframe: bool = False, show_pins: bool = False,
           contact_sheet_frames: int = 12,
           progress: Optional[Callable[[int, int], None]] = None) -> dict[str, Any]:
    """Renders a finished run as `shellsim render` does: PNG frames in run_folder/render/,
    video.mp4 (when ffmpeg is there), contact_sheet.png and energy.png."""
    _need_render()
    return _core.render_run(_os.fspath(run_folder), width, height, video, wireframe, show_pins,
                            contact_sheet_frames, progress)


def compare(run_a: str | _os.PathLike, run_b: str | _os.PathLike, out: str | _os.PathLike, *,
            width: int = 1280, height: int = 720, video: bool = True,
            progress: Optional[Callable[[int, int], None]] = None) -> dict[str, Any]:
    """Renders two runs side by side into `out`, as `shellsim compare` does."""
    _need_render()
    return _core.compare_runs(_os.fspath(run_a), _os.fspath(run_b), _os.fspath(out), width,
                              height, video, progress)


def export_blend(run_folder: str | _os.PathLike, blend: str | _os.PathLike, *,
                 blender: str = "blender") -> dict[str, Any]:
    """Turns a finished run into a .blend file, as `shellsim export-blend` does (runs the
    system's Blender headless): each body an animated object, the obstacles, a camera, a
    light, the frame rate and range."""
    _need_render()
    return _core.export_blend(_os.fspath(run_folder), _os.fspath(blend), blender)


def plot_energy(summary: str | _os.PathLike, png: str | _os.PathLike, width: int = 1280,
                height: int = 720) -> None:
    """Plots a run's energies over time (from its summary.json) to a PNG."""
    _need_render()
    _core.plot_energy(_os.fspath(summary), _os.fspath(png), width, height)


def _need_render() -> None:
    if not has_render:
        raise Error("shellsim was built without rendering (SHELLSIM_BUILD_RENDER=OFF)")


def read_geometry(path: str | _os.PathLike) -> dict[str, Any]:
    """Reads a mesh or point cloud (.obj .ply .off .stl .xyz): a dict with "vertices"
    (n, 3) float64, "triangles" (m, 3) int32 (m = 0 for a point cloud) and "normals"
    ((n, 3) or None)."""
    return _core.read_geometry(_os.fspath(path))


def write_geometry(path: str | _os.PathLike, vertices: Any, triangles: Any = None) -> None:
    """Writes a mesh or point cloud as .ply (binary) or .obj."""
    _core.write_geometry(_os.fspath(path), vertices, triangles)


def mesh_info(vertices: Any, triangles: Any = None) -> dict[str, Any]:
    """What `shellsim info` says of a mesh: counts, boundary / non-manifold / flipped edges,
    degenerate and sliver triangles, stray parts, and the lines a model would refuse it
    with ("refusals") or warn about ("warnings")."""
    return _core.mesh_info(vertices, triangles)


def repair(vertices: Any, triangles: Any, *, min_component_faces: int = 0,
           remesh: float | str | None = None) -> dict[str, Any]:
    """`shellsim repair`: merge coincident vertices, drop degenerate triangles, orient,
    split non-manifold edges, drop components of fewer than `min_component_faces`
    triangles, and remesh to edges of `remesh` metres ("auto": the median edge). Returns
    "vertices", "triangles", "components_removed" and "remesh_edge_length"."""
    at_median = remesh == "auto"
    edge = 0.0 if remesh is None or at_median else float(remesh)
    return _core.repair(vertices, triangles, int(min_component_faces), edge, at_median)


def thicken(vertices: Any, triangles: Any, depth: float, *, method: str = "front",
            steps: int = 5, min_step: float = 1e-3) -> dict[str, Any]:
    """`shellsim thicken`: the inner surface grown `depth` metres inwards without crossing
    itself or the input (steinemann section 3). Returns "inner" (n, 3), "depth" (n,), the
    statistics, the thin regions and the exact check's counts (0 and 0 when consistent)."""
    return _core.thicken(vertices, triangles, float(depth), method, int(steps), float(min_step))


def validate(scene: Scene | str | _os.PathLike | Mapping[str, Any]) -> dict[str, Any]:
    """`shellsim validate`: checks the scene and builds its bodies as a run would. Returns
    each body's model, nodes, elements and stable explicit step, the step the run would
    take, and the warnings; InputError lists every problem."""
    sim = Simulation.from_scene(scene)
    return {
        "bodies": [{"name": sim.body_name(b), "model": sim.model_name(b),
                    "nodes": sim.node_count(b), "elements": sim.element_count(b),
                    "stable_time_step": sim.stable_time_step(b)} for b in range(sim.body_count)],
        "time_step": sim.time_step,
        "warnings": sim.warnings,
    }


class Simulation:
    """A world built and stepped in memory (the C++ shellsim::Simulation).

    Bodies, obstacles, pins and loads are added with dictionaries in the scene file's
    format. Indices returned by add_body and add_obstacle name them afterwards. Every method
    that fails raises an Error and leaves the simulation as it was before the call.
    """

    def __init__(self, gravity: Sequence[float] = (0.0, 0.0, -9.81),
                 time: Optional[Mapping[str, Any]] = None,
                 contact: Optional[Mapping[str, Any]] = None, *, _core_simulation: Any = None):
        """gravity in m/s^2; `time` as the scene's "time" (integrator, time_step,
        frame_rate, ...; duration is not used); `contact` as the scene's "contact"."""
        if _core_simulation is not None:
            self._sim = _core_simulation
        else:
            self._sim = _core.Simulation(list(gravity), time, contact)

    @staticmethod
    def from_scene(scene: Scene | str | _os.PathLike | Mapping[str, Any]) -> "Simulation":
        """Every body and obstacle of a scene, with its gravity and time settings (the
        output settings are not used)."""
        return Simulation(_core_simulation=_core.Simulation.from_scene(_as_scene(scene)._definition))

    # -- building --
    def add_body(self, vertices: Any, triangles: Any = None,
                 definition: Optional[Mapping[str, Any]] = None, normals: Any = None) -> int:
        """Adds a body made from vertices (n, 3) and triangles (m, 3) (None: a point
        cloud), with a body definition as in a scene file but without "file" or
        "primitive". Returns the body's index."""
        return self._sim.add_body(vertices, triangles, definition, normals)

    def add_body_from(self, definition: Mapping[str, Any],
                      folder: str | _os.PathLike = ".") -> int:
        """Adds a body whose geometry is the definition's "file" (relative to `folder`) or
        "primitive"."""
        return self._sim.add_body_from(definition, _os.fspath(folder))

    def add_obstacle(self, definition: Mapping[str, Any]) -> int:
        """Adds an analytic obstacle (plane, sphere, box), static, on a path or thrown."""
        return self._sim.add_obstacle(definition)

    def add_pin(self, body: int, definition: Mapping[str, Any]) -> None:
        self._sim.add_pin(body, definition)

    def add_load(self, body: int, definition: Mapping[str, Any]) -> None:
        self._sim.add_load(body, definition)

    # -- stepping --
    def advance(self, seconds: float) -> None:
        """Advances by `seconds` in equal steps (failed steps are retried with smaller
        ones, with a warning). NumericalError when it still fails; KeyboardInterrupt on
        Ctrl-C; either way the simulation stays at the start of this advance."""
        self._sim.advance(float(seconds))

    def advance_frames(self, frames: int = 1) -> None:
        """Advances by whole frames of 1 / time.frame_rate seconds."""
        self._sim.advance_frames(int(frames))

    @property
    def time(self) -> float:
        return self._sim.time

    @property
    def time_step(self) -> float:
        return self._sim.time_step

    def stable_time_step(self, body: Optional[int] = None) -> float:
        """The stable explicit step estimate, s, of one body or of all."""
        return self._sim.stable_time_step(body)

    @property
    def statistics(self) -> dict[str, int]:
        return self._sim.statistics

    @property
    def warnings(self) -> list[str]:
        return self._sim.warnings

    def on_warning(self, handler: Optional[Callable[[str], None]]) -> None:
        """Calls `handler(message)` for each warning from now on (None: stop)."""
        self._sim.on_warning(handler)

    # -- reading and writing --
    @property
    def body_count(self) -> int:
        return self._sim.body_count

    @property
    def obstacle_count(self) -> int:
        return self._sim.obstacle_count

    def body_index(self, name: str) -> int:
        return self._sim.body_index(name)

    def body_name(self, body: int) -> str:
        return self._sim.body_name(body)

    def model_name(self, body: int) -> str:
        return self._sim.model_name(body)

    def node_count(self, body: int) -> int:
        return self._sim.node_count(body)

    def element_count(self, body: int) -> int:
        return self._sim.element_count(body)

    def positions(self, body: int, out: Any = None) -> Any:
        """Node positions, (n, 3) float64, m (a copy, or written into `out`)."""
        return self._sim.positions(body, out)

    def velocities(self, body: int, out: Any = None) -> Any:
        """Node velocities, (n, 3) float64, m/s (a copy, or written into `out`)."""
        return self._sim.velocities(body, out)

    def masses(self, body: int) -> Any:
        """Node masses, (n,) float64, kg."""
        return self._sim.masses(body)

    def set_positions(self, body: int, positions: Any) -> None:
        self._sim.set_positions(body, positions)

    def set_velocities(self, body: int, velocities: Any) -> None:
        self._sim.set_velocities(body, velocities)

    def node_of_vertex(self, body: int) -> Any:
        """For each input vertex, its node (-1: dropped), (n_vertices,) int32."""
        return self._sim.node_of_vertex(body)

    def pinned_nodes(self, body: int) -> Any:
        """True where a pin drives the node, (n,) bool."""
        return self._sim.pinned_nodes(body)

    def surface(self, body: int) -> dict[str, Any]:
        """The surface as a frame would hold it: "vertices", "triangles", "normals"."""
        return self._sim.surface(body)

    def energies(self, body: int) -> dict[str, float]:
        """kinetic, stretching, bending, gravitational and total energy, J."""
        return self._sim.energies(body)

    def node_pieces(self, body: int) -> Any:
        """The connected piece of every node, (n,) int32."""
        return self._sim.node_pieces(body)

    def piece_count(self, body: int) -> int:
        return self._sim.piece_count(body)

    def broken_elements(self, body: int) -> int:
        return self._sim.broken_elements(body)

    def cracks(self, body: int) -> int:
        return self._sim.cracks(body)

    def intersecting_triangle_pairs(self) -> int:
        """Triangle pairs of the surfaces that intersect now (exact predicates), self and
        between bodies; pairs sharing a node or neighbours in the rest shape left out."""
        return self._sim.intersecting_triangle_pairs()

    def intersecting_triangles(self) -> Any:
        """The same pairs as rows (body a, its three nodes, body b, its three nodes),
        (k, 8) int32, in a fixed order."""
        return self._sim.intersecting_triangles()

    def gas_pressure(self, body: int) -> float:
        """The gas over-pressure pushing on the body now, Pa (0 without a pressure)."""
        return self._sim.gas_pressure(body)

    def rigid_fragment_count(self, body: int) -> int:
        return self._sim.rigid_fragment_count(body)

    def rigid_fragment_of_node(self, body: int) -> Any:
        return self._sim.rigid_fragment_of_node(body)

    def obstacle_offset(self, obstacle: int) -> tuple[float, float, float]:
        return tuple(self._sim.obstacle_offset(obstacle))

    def obstacle_velocity(self, obstacle: int) -> tuple[float, float, float]:
        return tuple(self._sim.obstacle_velocity(obstacle))

    # -- states --
    def save_state(self) -> State:
        """A copy of everything that evolves; restore_state continues exactly from it."""
        return self._sim.save_state()

    def restore_state(self, state: State) -> None:
        self._sim.restore_state(state)

    def write_state(self, state: State, path: str | _os.PathLike) -> None:
        """Writes a state to a file (atomically, checksummed)."""
        self._sim.write_state(state, _os.fspath(path))

    def read_state(self, path: str | _os.PathLike) -> State:
        """Reads a state written by write_state from a simulation set up the same way."""
        return self._sim.read_state(_os.fspath(path))

    def __repr__(self) -> str:
        return f"Simulation({self.body_count} bodies, {self.obstacle_count} obstacles, " \
               f"t = {self.time} s)"
