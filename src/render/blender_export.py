# shellsim's Blender exporter, run by `shellsim export-blend` inside Blender:
#   blender -b --factory-startup --python-exit-code 3 --python THIS -- PLAN.json
# PLAN.json (written by src/render/blender_export.cpp) lists the frames, each body's file per
# frame, the obstacles and their offsets, the camera and where to save. A body whose mesh
# keeps its topology becomes one object animated by shape keys (one per frame, each at full
# strength on its own frame only); a body that breaks becomes one object per frame, shown on
# its frame only. Ends with one line "SHELLSIM_EXPORT {json}" for the caller.
import json
import math
import struct
import sys

import bpy
from mathutils import Matrix, Vector

PLY_TYPES = {"char": "b", "uchar": "B", "int8": "b", "uint8": "B", "short": "h", "ushort": "H",
             "int16": "h", "uint16": "H", "int": "i", "uint": "I", "int32": "i", "uint32": "I",
             "float": "f", "float32": "f", "double": "d", "float64": "d"}


def read_ply(path):
    """Vertices [(x, y, z)] and triangles [(a, b, c)] of a PLY file (binary LE or ASCII)."""
    with open(path, "rb") as f:
        if f.readline().strip() != b"ply":
            raise RuntimeError(f"{path}: not a PLY file")
        fmt, elements = None, []
        while True:
            words = f.readline().decode("ascii").split()
            if not words or words[0] in ("comment", "obj_info"):
                continue
            if words[0] == "format":
                fmt = words[1]
            elif words[0] == "element":
                elements.append([words[1], int(words[2]), []])
            elif words[0] == "property":
                elements[-1][2].append(words[1:])
            elif words[0] == "end_header":
                break
        vertices, faces = [], []
        if fmt == "ascii":
            lines = iter(f.read().decode("ascii").split("\n"))
            for name, count, props in elements:
                for _ in range(count):
                    values = next(lines).split()
                    if name == "vertex":
                        names = [p[-1] for p in props]
                        vertices.append(tuple(float(values[names.index(c)]) for c in "xyz"))
                    elif name == "face":
                        n = int(values[0])
                        faces.append(tuple(int(v) for v in values[1:1 + n]))
            return vertices, faces
        if fmt != "binary_little_endian":
            raise RuntimeError(f"{path}: PLY format {fmt} is not read here")
        for name, count, props in elements:
            if all(p[0] != "list" for p in props):
                row = struct.Struct("<" + "".join(PLY_TYPES[p[0]] for p in props))
                names = [p[-1] for p in props]
                data = f.read(row.size * count)
                if name == "vertex":
                    ix, iy, iz = (names.index(c) for c in "xyz")
                    for values in row.iter_unpack(data):
                        vertices.append((values[ix], values[iy], values[iz]))
            else:
                # Faces: "property list uchar int vertex_indices" (each a count, then indices).
                count_type, index_type = PLY_TYPES[props[0][1]], PLY_TYPES[props[0][2]]
                head = struct.Struct("<" + count_type)
                for _ in range(count):
                    (n,) = head.unpack(f.read(head.size))
                    item = struct.Struct("<" + index_type * n)
                    indices = item.unpack(f.read(item.size))
                    if name == "face":
                        faces.append(indices)
        return vertices, faces


def read_obj(path):
    vertices, faces = [], []
    with open(path) as f:
        for line in f:
            words = line.split()
            if not words:
                continue
            if words[0] == "v":
                vertices.append(tuple(float(w) for w in words[1:4]))
            elif words[0] == "f":
                faces.append(tuple(int(w.split("/")[0]) - 1 for w in words[1:]))
    return vertices, faces


def read_mesh(path):
    return read_obj(path) if path.lower().endswith(".obj") else read_ply(path)


def material(name, color):
    m = bpy.data.materials.new(name)
    m.use_nodes = True
    m.node_tree.nodes["Principled BSDF"].inputs["Base Color"].default_value = (*color, 1.0)
    m.diffuse_color = (*color, 1.0)
    return m


def mesh_object(name, vertices, faces, mat, collection):
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(vertices, [], faces)
    mesh.update()
    for polygon in mesh.polygons:
        polygon.use_smooth = True
    mesh.materials.append(mat)
    obj = bpy.data.objects.new(name, mesh)
    collection.objects.link(obj)
    return obj


def constant_interpolation(id_data):
    if id_data.animation_data and id_data.animation_data.action:
        for curve in id_data.animation_data.action.fcurves:
            for point in curve.keyframe_points:
                point.interpolation = "CONSTANT"


def show_only_on(obj, frame, first, last):
    for f, hidden in ((first, True), (frame, False), (frame + 1, True)):
        if f < first or f > last + 1 or (f == first and frame == first):
            continue
        obj.hide_render = hidden
        obj.hide_viewport = hidden
        obj.keyframe_insert("hide_render", frame=f)
        obj.keyframe_insert("hide_viewport", frame=f)
    constant_interpolation(obj)


def look_at(obj, eye, target, up):
    """Points the camera (which looks down its local -Z with +Y up in the picture) from eye
    at target, with `up` up in the picture."""
    forward = (Vector(target) - Vector(eye)).normalized()
    right = forward.cross(Vector(up)).normalized()
    if right.length == 0:  # up along the view: any roll will do
        right = forward.orthogonal().normalized()
    true_up = right.cross(forward)
    obj.location = eye
    # Columns: the camera's local X, Y and Z axes in the world.
    obj.rotation_euler = Matrix((right, true_up, -forward)).transposed().to_euler()


def main():
    plan = json.load(open(sys.argv[sys.argv.index("--") + 1]))
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    frames = plan["frames"]
    first, last = frames[0]["frame"], frames[-1]["frame"]
    scene.frame_start, scene.frame_end = first, last
    rate = plan["fps"]
    scene.render.fps = max(1, round(rate))
    scene.render.fps_base = scene.render.fps / rate
    scene.render.resolution_x, scene.render.resolution_y = plan["resolution"]
    root = scene.collection
    objects = 0
    # A light grey sky, as the renderer's, so that the ground's horizon is not black.
    scene.world = bpy.data.worlds.new("sky")
    scene.world.color = (0.8, 0.8, 0.82)

    for b, body in enumerate(plan["bodies"]):
        meshes = [read_mesh(frame["files"][b]) for frame in frames]
        mat = material(body["name"], body["color"])
        constant = all(len(v) == len(meshes[0][0]) and f == meshes[0][1] for v, f in meshes)
        if constant:
            obj = mesh_object(body["name"], meshes[0][0], meshes[0][1], mat, root)
            objects += 1
            if len(frames) > 1:
                obj.shape_key_add(name="Basis", from_mix=False)
                for frame, (vertices, _) in zip(frames, meshes):
                    key = obj.shape_key_add(name=f"frame_{frame['frame']:05d}", from_mix=False)
                    key.data.foreach_set("co", [c for v in vertices for c in v])
                    k = frame["frame"]
                    for f, value in ((k - 1, 0.0), (k, 1.0), (k + 1, 0.0)):
                        if first <= f <= last:
                            key.value = value
                            key.keyframe_insert("value", frame=f)
                constant_interpolation(obj.data.shape_keys)
        else:
            collection = bpy.data.collections.new(body["name"])
            root.children.link(collection)
            for frame, (vertices, faces) in zip(frames, meshes):
                obj = mesh_object(f"{body['name']}_{frame['frame']:05d}", vertices, faces, mat,
                                  collection)
                show_only_on(obj, frame["frame"], first, last)
                objects += 1

    grey = material("obstacle", (0.6, 0.6, 0.62))
    for i, o in enumerate(plan["obstacles"]):
        if o["type"] == "plane":
            bpy.ops.mesh.primitive_plane_add(size=plan["ground_size"], location=o["point"])
            obj = bpy.context.active_object
            obj.rotation_euler = Vector(o["normal"]).to_track_quat("Z", "Y").to_euler()
        elif o["type"] == "sphere":
            bpy.ops.mesh.primitive_uv_sphere_add(radius=o["radius"], location=o["center"],
                                                 segments=48, ring_count=24)
            obj = bpy.context.active_object
            bpy.ops.object.shade_smooth()
        else:
            bpy.ops.mesh.primitive_cube_add(size=2, location=o["center"])
            obj = bpy.context.active_object
            obj.scale = o["half_extents"]
        obj.name = f"obstacle_{i}_{o['type']}"
        obj.data.materials.append(grey)
        objects += 1
        base = Vector(obj.location)
        if any(frame["offsets"] for frame in frames):
            for frame in frames:
                obj.location = base + Vector(frame["offsets"][i])
                obj.keyframe_insert("location", frame=frame["frame"])
            obj.location = base + Vector(frames[0]["offsets"][i])

    camera = plan["camera"]
    cam_data = bpy.data.cameras.new("camera")
    cam_data.sensor_fit = "VERTICAL"
    cam_data.angle_y = math.radians(camera["fov"])
    cam = bpy.data.objects.new("camera", cam_data)
    root.objects.link(cam)
    look_at(cam, camera["eye"], camera["target"], camera["up"])
    scene.camera = cam
    sun_data = bpy.data.lights.new("sun", "SUN")
    sun_data.energy = 3.0
    sun = bpy.data.objects.new("sun", sun_data)
    root.objects.link(sun)
    sun.rotation_euler = Vector(plan["light_direction"]).to_track_quat("-Z", "Y").to_euler()
    objects += 2

    scene.frame_set(first)
    bpy.ops.wm.save_as_mainfile(filepath=plan["blend"], compress=True)
    print("SHELLSIM_EXPORT " + json.dumps({"objects": objects, "frame_start": first,
                                           "frame_end": last, "fps": rate}))


main()
