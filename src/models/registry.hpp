// The model registry: every model a body may name, with what the rest of the library needs
// of it. The scene reader (its key table, "did you mean", options objects), the scene
// writer, the reference docs (docs/scene-reference.md) and the world (World::addBody) read
// this list and nothing model-specific.
//
// Adding a model: its folder src/models/<name>/ with the model, a <name>_registration.cpp
// defining `ModelRegistration <name>Registration()`, its CMakeLists.txt, one line in
// src/models/CMakeLists.txt (add_subdirectory) and two in registry.cpp (declaration, list
// entry); a public include/shellsim/models/<name>.hpp when it has options. A model kept
// outside the library registers itself with registerModel instead.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/json_fields.hpp"
#include "models/model.hpp"
#include "shellsim/geometry.hpp"
#include "shellsim/scene.hpp"

namespace shellsim {

// A body's model with its nodes: positions at rest and, for each vertex of the input
// geometry, the node it became (-1: none). Pins given as vertex lists go through it.
struct Discretization {
  std::unique_ptr<Model> model;
  std::vector<double> nodePositions;      // (nNodes, 3), m
  std::vector<int32_t> nodeOfVertex;      // (nInputVertices)
  std::shared_ptr<const Geometry> dense;  // a high-resolution surface to embed, or null
};

struct ModelRegistration {
  std::string_view name;     // the scene's "model" word, and the options object's key
  std::string_view meaning;  // what the body's options key is, for the docs
  // The options object (a body's "<name>": {...}) and the objects nested in it, for the
  // reader and the docs; options null: the model has none.
  const json_fields::ObjectSpec* options = nullptr;
  std::span<const json_fields::ObjectSpec* const> nestedOptions;
  // Reads the options object into body.modelOptions (the reader is on body.<name>; it
  // records problems and calls finish()).
  void (*readOptions)(json_fields::ObjectReader& reader, json_fields::Problems& problems,
                      BodyDef& body) = nullptr;
  // The options of `body` as the reader takes them.
  json_fields::Json (*writeOptions)(const BodyDef& body) = nullptr;
  // The model and its nodes from the body's transformed geometry. Messages (warnings,
  // InputError) are prefixed by the caller with the body's label.
  Discretization (*discretize)(const BodyDef& body, Geometry geometry,
                               std::vector<std::string>& warnings,
                               const std::string& label) = nullptr;
};

// Every registered model, in registration order (the docs list them in it): the built-in
// ones of registry.cpp, then those added with registerModel.
[[nodiscard]] const std::deque<ModelRegistration>& modelRegistry();
// The model named `name`, or null. The pointer stays valid.
[[nodiscard]] const ModelRegistration* findModel(std::string_view name);
// Adds a model at run time (tests; a program embedding the library with a model of its
// own). Not thread-safe: register before reading scenes or building worlds. Throws
// std::invalid_argument for an empty or taken name, a missing discretizer, or options
// without their reader and writer. The name must outlive the registry (a literal).
void registerModel(const ModelRegistration& model);
// Bumped by every registerModel: tables built from the registry are rebuilt when it moved.
[[nodiscard]] uint64_t modelRegistryVersion();

// Shared by the discretizers (discretization.cpp).
// 0, 1, ..., count - 1.
[[nodiscard]] std::vector<int32_t> identityMap(int32_t count);
// Drops a mesh's vertices in no triangle (removeUnreferencedVertices) with a warning when
// there are any; returns the map input vertex -> kept vertex (-1: dropped).
std::vector<int32_t> dropUnreferencedVertices(Geometry& mesh, std::vector<std::string>& warnings,
                                              const std::string& label);
// The triangle mesh that a mesh model (mass_spring, discrete_shell) takes: vertices in no
// triangle are dropped (with a warning), so that every node belongs to a stencil. Throws
// InputError for a point cloud.
Discretization meshDiscretization(std::string_view model, Geometry& geometry,
                                  std::vector<std::string>& warnings, const std::string& label);

}  // namespace shellsim
