// Mesh repair with CGAL's polygon-mesh processing: what a user's mesh needs before a shell
// model runs on it (see repairMesh in shellsim/geometry.hpp). Compiled on its own (CGAL's
// interval arithmetic needs the compiler's default floating-point semantics, which the rest
// of the library relaxes).
#include <CGAL/Exact_predicates_inexact_constructions_kernel.h>
#include <CGAL/Polygon_mesh_processing/connected_components.h>
#include <CGAL/Polygon_mesh_processing/orient_polygon_soup.h>
#include <CGAL/Polygon_mesh_processing/polygon_soup_to_polygon_mesh.h>
#include <CGAL/Polygon_mesh_processing/remesh.h>
#include <CGAL/Polygon_mesh_processing/repair_polygon_soup.h>
#include <CGAL/Polygon_mesh_processing/stitch_borders.h>
#include <CGAL/Surface_mesh.h>

#include <array>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "shellsim/errors.hpp"
#include "shellsim/geometry.hpp"

namespace shellsim {

namespace {

namespace PMP = CGAL::Polygon_mesh_processing;
using Kernel = CGAL::Exact_predicates_inexact_constructions_kernel;
using Point = Kernel::Point_3;
using Mesh = CGAL::Surface_mesh<Point>;

Geometry toGeometry(const Mesh& mesh) {
  Geometry out;
  std::vector<int32_t> index(mesh.number_of_vertices() + mesh.number_of_removed_vertices(), -1);
  for (const Mesh::Vertex_index v : mesh.vertices()) {
    index[v.idx()] = static_cast<int32_t>(out.positions.size() / 3);
    const Point& p = mesh.point(v);
    out.positions.insert(out.positions.end(), {p.x(), p.y(), p.z()});
  }
  for (const Mesh::Face_index f : mesh.faces()) {
    for (const Mesh::Vertex_index v : CGAL::vertices_around_face(mesh.halfedge(f), mesh)) {
      out.triangles.push_back(index[v.idx()]);
    }
  }
  return out;
}

}  // namespace

RepairReport repairMesh(Geometry& mesh, const RepairOptions& options) {
  if (mesh.isPointCloud()) throw InputError("repair: a point cloud has no triangles to repair");
  if (!(options.targetEdgeLength >= 0) || !std::isfinite(options.targetEdgeLength)) {
    throw InputError("repair: the target edge length must be >= 0 and finite, m");
  }
  if (options.remeshIterations < 1 || options.remeshIterations > 100) {
    throw InputError("repair: remesh iterations must be in [1, 100]");
  }
  RepairReport report;
  report.before = analyzeTopology(mesh);

  // 1. As a polygon soup: coincident points merged, degenerate and repeated faces dropped
  //    (CGAL's repair_polygon_soup), then oriented consistently, points duplicated where an
  //    edge or vertex is non-manifold (orient_polygon_soup): the sheets meeting there are
  //    split apart, each kept whole.
  std::vector<Point> points;
  points.reserve(static_cast<size_t>(mesh.vertexCount()));
  for (size_t i = 0; i < mesh.positions.size(); i += 3) {
    points.emplace_back(mesh.positions[i], mesh.positions[i + 1], mesh.positions[i + 2]);
  }
  std::vector<std::array<std::size_t, 3>> soup;  // triangles as point indices
  soup.reserve(static_cast<size_t>(mesh.triangleCount()));
  for (size_t t = 0; t < mesh.triangles.size(); t += 3) {
    soup.push_back({static_cast<size_t>(mesh.triangles[t]),
                    static_cast<size_t>(mesh.triangles[t + 1]),
                    static_cast<size_t>(mesh.triangles[t + 2])});
  }
  PMP::repair_polygon_soup(points, soup);
  PMP::orient_polygon_soup(points, soup);
  Mesh surface;
  PMP::polygon_soup_to_polygon_mesh(points, soup, surface);

  // 2. Stray parts: components with fewer faces than asked are dropped.
  if (options.minComponentFaces > 1) {
    report.componentsRemoved = PMP::keep_large_connected_components(
        surface, static_cast<std::size_t>(options.minComponentFaces));
    surface.collect_garbage();
  }
  // The split may have cut a sheet along a non-manifold edge whose other sheet is now gone:
  // borders that coincide are joined again where that stays manifold.
  PMP::stitch_borders(surface);
  surface.collect_garbage();

  // 3. Even triangles: isotropic remeshing to the target edge length (borders follow the
  //    surface's outline), which removes the slivers that set explicit steps.
  report.remeshEdgeLength =
      options.remeshAtMedianEdge ? report.before.medianEdgeLength : options.targetEdgeLength;
  if (report.remeshEdgeLength > 0) {
    PMP::isotropic_remeshing(faces(surface), report.remeshEdgeLength, surface,
                             PMP::parameters::number_of_iterations(options.remeshIterations));
    surface.collect_garbage();
  }
  if (surface.number_of_faces() == 0) {
    throw InputError("repair: nothing is left of the mesh (every component was smaller than " +
                     std::to_string(options.minComponentFaces) + " faces)");
  }
  mesh = toGeometry(surface);
  report.after = analyzeTopology(mesh);
  return report;
}

}  // namespace shellsim
