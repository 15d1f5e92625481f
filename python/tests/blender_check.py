# Run inside Blender on an exported .blend:
#   blender -b FILE.blend --python blender_check.py -- OBJECT PC2_FILE OUT.json FRAME...
# Writes what the test compares: the objects, the frame range and rate, OBJECT's evaluated
# vertex positions at each FRAME, and those of a copy of OBJECT's first-frame mesh driven by
# the point cache PC2_FILE through Blender's Mesh Cache modifier.
import json
import sys

import bpy

name, pc2, out, *frames = sys.argv[sys.argv.index("--") + 1:]
frames = [int(f) for f in frames]
scene = bpy.context.scene
body = bpy.data.objects[name]

cached = bpy.data.objects.new("cached", bpy.data.meshes.new("cached"))
cached.data = body.data.copy()
cached.shape_key_clear()
scene.collection.objects.link(cached)
modifier = cached.modifiers.new("cache", "MESH_CACHE")
modifier.cache_format = "PC2"
modifier.filepath = pc2
modifier.frame_start = 0
modifier.deform_mode = "OVERWRITE"


def positions(obj):
    depsgraph = bpy.context.evaluated_depsgraph_get()
    mesh = obj.evaluated_get(depsgraph).to_mesh()
    values = [list(v.co) for v in mesh.vertices]
    obj.evaluated_get(depsgraph).to_mesh_clear()
    return values


result = {"objects": sorted(o.name for o in bpy.data.objects if o.name != "cached"),
          "frame_start": scene.frame_start, "frame_end": scene.frame_end,
          "fps": scene.render.fps / scene.render.fps_base, "body": {}, "cached": {}}
for f in frames:
    scene.frame_set(f)
    result["body"][f] = positions(body)
    result["cached"][f] = positions(cached)
with open(out, "w") as f:
    json.dump(result, f)
