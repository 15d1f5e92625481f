// A model's evolving state (plastic rest values, broken elements, cracks, a topology that
// fracture changes) as a copyable value: saving a frame's state is a copy, putting it back
// an assignment (Model::state, Model::setState), writing it to a checkpoint and reading it
// back is the same code for every model. A model only lists its evolving members
// (Model::listStateFields); nothing is written per model.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "core/byte_stream.hpp"
#include "core/crack.hpp"

namespace shellsim {

// The values one field of a state may hold: flat arrays (their shapes are the model's,
// written at its listStateFields) and counters.
using StateValue =
    std::variant<std::vector<double>, std::vector<int32_t>, std::vector<int64_t>,
                 std::vector<uint8_t>, std::vector<CrackDisc>, int32_t, int64_t, uint64_t>;

// What an array field's length must be once a state is put back: free, the model's node
// count or its element count (Model::nodeCount, Model::elementCount after the model has
// adopted the state), or one of those or empty (a field the model sizes on first use).
enum class StateShape : uint8_t { kFree, kPerNode, kPerElement, kPerNodeOrEmpty };

// The model's members that make up its evolving state, by name (letters, digits and '_',
// unique), listed by Model::listStateFields. The pointers are the model's own members: the
// state is read from them (Model::state) and assigned to them (Model::setState).
class StateFields {
 public:
  using Member =
      std::variant<std::vector<double>*, std::vector<int32_t>*, std::vector<int64_t>*,
                   std::vector<uint8_t>*, std::vector<CrackDisc>*, int32_t*, int64_t*, uint64_t*>;
  struct Entry {
    std::string name;
    Member member;
    StateShape shape = StateShape::kFree;
    uint8_t components = 1;  // values per node or element (a (nElements, 3) array: 3)
  };

  // Adds a member; throws std::logic_error for a bad or repeated name or no components (a
  // programming error).
  void add(std::string name, Member member, StateShape shape = StateShape::kFree,
           uint8_t components = 1);
  [[nodiscard]] std::span<const Entry> entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;
};

class ModelState {
 public:
  struct Field {
    std::string name;
    StateValue value;
    StateShape shape = StateShape::kFree;
    uint8_t components = 1;
  };

  // Empty: the state of a model without evolving state.
  ModelState() = default;
  // The current values of `fields`, for a model named `model` with `nodeCount` nodes.
  ModelState(std::string model, int32_t nodeCount, const StateFields& fields);

  [[nodiscard]] bool empty() const { return fields_ == nullptr; }
  [[nodiscard]] const std::string& model() const { return model_; }
  // The model's node count in this state (the world checks a checkpoint's positions
  // against it before the state is put back).
  [[nodiscard]] int32_t nodeCount() const { return nodeCount_; }
  [[nodiscard]] std::span<const Field> fields() const;
  // The field of that name, or null.
  [[nodiscard]] const Field* find(const std::string& name) const;

  // Appends the state to a checkpoint: model name, node count, then per field its name,
  // shape, components, type and values.
  void write(ByteWriter& out) const;
  // Reads what write wrote; fails through `in` (InputError naming the source) on bytes that
  // are not such a state. Whether it fits a model is Model::setState's to check.
  [[nodiscard]] static ModelState read(ByteReader& in);

 private:
  std::string model_;
  int32_t nodeCount_ = -1;
  // Immutable once made, so copies of a state share it: a copy is a pointer copy.
  std::shared_ptr<const std::vector<Field>> fields_;
};

}  // namespace shellsim
